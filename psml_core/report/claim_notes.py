"""The notes under a paper's claims tables: each claim as stated, why it missed, how it was judged.

* :func:`claim_notes`: each claim in the paper's words, with its source and setup;
* :func:`miss_notes`: for every verdict but REPRODUCED, the detail, the cause (by class; one of
  class ``ours`` is marked as a defect of ours to fix) and the paper file's explanation;
* :func:`measurement_notes`: the comparator, the resolution, an accuracy band's noise, a
  minimum effect and its reason, the paper's own bound, the robustness and codec-free rows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from psml_core.analysis.claim_result import CAUSE_CLASSES, EXPLANATION_KEYS
from psml_core.report.claim_cells import DEFECT_MARK, band_text, is_defect
from psml_core.report.reported_vs_ours import has_codec_free, has_robustness

__all__ = [
    "KIND_WORDS",
    "REFERENCES",
    "claim_notes",
    "drop_absent_references",
    "measurement_notes",
    "miss_notes",
    "section_holds",
]


def claim_notes(paper: Mapping[str, Any]) -> list[dict[str, str]]:
    """Each claim as the paper states it, with its source and the paper's setup for it."""
    return [
        {
            "claim": str(c["id"]),
            "text": f"{c['statement']} (source: {c['source']}). Paper's setup: {c['setup']}",
        }
        for c in paper.get("claims") or []
    ]


KIND_WORDS = {
    "method": "a property of the method as the paper describes it",
    "regime": "our measured regime against the paper's (the data or setup), not the method",
    "bound": "a bound from the paper's own numbers",
    "ours": f"a setting or rule of ours, {DEFECT_MARK}",
}
"""How a miss note names a cause whose text follows in the explanation."""


def _cause_text(r: Any, why: str) -> tuple[str, str]:
    """(the note's cause sentence, the explanation without its class) for one claims row."""
    kind, _, told = r.cause.partition(": ")
    # The paper file names the class itself ("regime: ..."): the cause says it, in words.
    named, _, rest = why.partition(": ")
    body = rest if named in CAUSE_CLASSES and rest else why
    if told and body.startswith(told):  # the cause is the explanation's first sentence
        return f" Cause: {KIND_WORDS.get(kind, kind)}, as follows.", body
    if not r.cause:
        return "", body
    if is_defect(r):
        return f" Cause ({DEFECT_MARK}): {r.cause}.", body
    return f" Cause: {r.cause}.", body


def miss_notes(
    claims: pd.DataFrame, paper_file: str, held: set[str] | None = None
) -> list[dict[str, str]]:
    """For every claim not reproduced: the verdict, why, and what we think explains it.

    Args:
        claims: The paper's rows of ``claims.csv``.
        paper_file: The paper file's name, for a missing explanation's key.
        held: The tables and figures the report holds (:func:`section_holds`): an explanation's
            pointers at others are left out (:func:`drop_absent_references`); None keeps all.
    """
    out = []
    for r in claims.itertuples(index=False):
        if r.verdict == "REPRODUCED":
            continue
        if r.verdict == "NOT RUN":  # the detail says why (not in this tier, or a divergence)
            here = "not run in this tier: "
            tier = r.detail.startswith(here)
            text = f"NOT RUN{' in this tier' if tier else ''}: {r.detail.removeprefix(here)}."
        elif r.verdict == "SETUP FACT":
            text = f"SETUP FACT: {r.detail}."
        else:
            key = EXPLANATION_KEYS.get(r.verdict, "")
            why = " ".join(r.explanation.split())
            if held is not None:  # the cause is the explanation's first sentence: both
                why = drop_absent_references(why, held)
                r = r._replace(cause=drop_absent_references(r.cause, held))
            why = why.rstrip(". ") or (
                f"no explanation of this outcome is recorded (key explanation.{key} of the claim "
                f"in {paper_file}); the deviations above are the first suspects"
            )
            means = f" Means, method vs comparator: {r.per_metric}." if r.per_metric else ""
            cause, why = _cause_text(r, why)
            text = f"{r.verdict}: {r.detail}.{means}{cause} What we think explains it: {why}."
        out.append({"claim": r.claim, "text": text})
    return out


def _strictness(r: Any, claim: Mapping[str, Any]) -> list[str]:
    """An accuracy band's noises against the tolerance; a minimum effect with its reason."""
    parts = []
    if band_text(r):
        tol = float((claim.get("tolerance") or {}).get("reproduced", 0.25))
        width = 0.5 * math.log(float(r.band_high) / float(r.band_low))
        sd = float(getattr(r, "noise_seed_sd", math.nan))
        parts.append(
            f"Accuracy band: the paper's ratio ±{100 * width:.2g}%, the largest of the claim's "
            f"tolerance ({100 * math.log1p(tol):.2g}%), the test set's binomial standard error "
            f"of the log ratio ({100 * float(r.noise_test_se):.2g}%) and the standard deviation "
            "of the per-seed log ratios ("
            + (f"{100 * sd:.2g}%" if math.isfinite(sd) else "none with one seed")
            + "); REPRODUCED when the mean of 3 or more seeds lies inside, NOT REPRODUCED when "
            "the whole interval lies below it, EXCEEDED when above."
        )
    if getattr(r, "min_effect_text", ""):
        meas = claim.get("measure") or {}
        stated = (meas.get("min_effect") or {}).get((meas.get("metrics") or [""])[0])
        why = stated.get("why", "") if isinstance(stated, Mapping) else ""
        parts.append(
            f"Minimum effect: {r.min_effect_text}, fixed in the paper file before any run"
            + (f" ({' '.join(str(why).split())})." if why else ".")
        )
    return parts


def measurement_notes(
    claims: pd.DataFrame, paper: Mapping[str, Any] | None = None
) -> list[dict[str, str]]:
    """For every claim: how it was compared, how finely it is measured, and its bound.

    Args:
        claims: The paper's rows of ``claims.csv``.
        paper: Its paper file, for a claim's tolerance and the reason for its minimum effect.
    """
    by_id = {str(c["id"]): c for c in (paper or {}).get("claims") or []}
    out = []
    for r in claims.itertuples(index=False):
        parts = []
        if r.comparator:
            parts.append(f"Comparator: {r.comparator}.")
        if r.resolution:
            parts.append(f"Resolution: {r.resolution}.")
        parts += _strictness(r, by_id.get(r.claim, {}))
        if r.bound_text:
            parts.append(f"Bound from the paper's own numbers: {r.bound_text}.")
        if has_robustness(r) and r.robust_detail:
            parts.append(f"Robustness ({r.robust_verdict}): {r.robust_detail}.")
        if has_codec_free(r) and r.nocodec_detail:
            parts.append(f"Codec-free sensitivity ({r.nocodec_verdict}): {r.nocodec_detail}.")
        if parts:
            out.append({"claim": r.claim, "text": " ".join(parts)})
    return out


REFERENCES = {
    "placement table": "_oracle",
    "reassignment table": "_reassignment",
    "hashing-size sweep": "_sweep",
    "theta0 table": "reported",
    "MNIST table": "reported",
    "traffic figure": "_traffic",
    "locality map": "map:locality",
    "link map": "map:comm_compute",
    "regime map": "map:",
}
"""A phrase of a note that points at a table or figure -> the mark of that table or figure in
the report (:func:`section_holds`): a table's or figure's name ends in the mark, ``reported`` is a
paper's reported table, ``map:<axis>`` a regime map over that axis (``map:`` any). Tables every
report has (the scenario table, the Regime column) need no entry."""

_PAREN = re.compile(r"\s*\([^()]*\)")
_PIECE = re.compile(r"(?<=[.;:])\s+")


def section_holds(section: Mapping[str, Any], map_axes: set[str]) -> set[str]:
    """The marks of :data:`REFERENCES` that a paper's section (or the report) holds."""
    held = {f"map:{a}" for a in map_axes} | ({"map:"} if map_axes else set())
    if section.get("reported"):
        held.add("reported")
    for item in [*section.get("tables", []), *section.get("figures", [])]:
        name = str(item.get("label") or item.get("file") or "")
        held |= {mark for mark in REFERENCES.values() if mark.startswith("_") and mark in name}
    return held


def _absent(text: str, held: set[str]) -> bool:
    low = text.lower()
    return any(phrase.lower() in low and mark not in held for phrase, mark in REFERENCES.items())


def drop_absent_references(text: str, held: set[str]) -> str:
    """``text`` without the brackets, clauses and sentences naming a table or figure not held.

    A paper file's explanation serves every tier, but a tier shows only some tables and
    figures: what points at one this report lacks is left out, the rest kept as written.
    """
    text = _PAREN.sub(lambda m: "" if _absent(m.group(0), held) else m.group(0), text)
    pieces = _PIECE.split(text)
    kept = [p for p in pieces if not _absent(p, held)]
    if len(kept) == len(pieces):
        return text
    out = ""
    for piece in kept:
        if out.endswith((";", ":")) and piece[:1].isupper():
            out = out[:-1] + "."
        if out.endswith("."):
            piece = piece[:1].upper() + piece[1:]
        out = f"{out} {piece}" if out else piece
    return out[:-1] + "." if out.endswith((";", ":")) else out
