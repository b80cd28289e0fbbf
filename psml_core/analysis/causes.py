"""Why a verdict fell as it did: the explanation printed beside it and its cause, by class.

Every verdict but REPRODUCED (and SETUP FACT) names its cause, prefixed by its class:

* ``method``: a property of the method as the paper describes it;
* ``regime``: our measured regime against the paper's (a field off its matching bound, a setup
  more favourable than the paper's, a ceiling set by our data);
* ``bound``: a bound from the paper's own numbers;
* ``ours``: a setting or rule of ours, a defect to fix (``psml compare`` warns about each, and
  the report marks it); a verdict without a recorded explanation is one;

besides the mechanical ``run`` (a run's fate: diverged, censored, below its workload's target),
``seeds`` (too few for REPRODUCED) and ``not run``. A paper file's explanation names its class
itself (``load_papers`` refuses one that does not); the cause is its first sentence.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from psml_core.analysis.claim_result import (
    CAUSE_CLASSES,
    DEFECT,
    EXPLANATION_KEYS,
    MECHANICAL_CAUSES,
    MIN_SEEDS,
    NOT_COMPARABLE,
    ClaimResult,
)
from psml_core.analysis.paper_files import CLASS_PREFIX

__all__ = [
    "MECHANICAL_EXPLANATIONS",
    "cause_class",
    "cause_of",
    "defect_warnings",
    "explanation_for",
]


def cause_class(cause: str) -> str:
    """The class a cause names (its text before the first colon), or "" for none."""
    head = cause.split(":", 1)[0].strip() if ":" in cause else ""
    return head if head in (*CAUSE_CLASSES, *MECHANICAL_CAUSES) else ""


def cause_of(res: ClaimResult) -> str:
    """What decided a verdict that is not REPRODUCED, prefixed by its class (module doc)."""
    if res.cause or res.verdict in ("REPRODUCED", "SETUP FACT"):
        return res.cause
    if res.verdict == "NOT RUN":
        return "not run: " + res.detail
    if "did not hold the target" in res.detail or "neither run held" in res.detail:
        return "run: the method never held its target in some seed (censored)"
    if res.seed_limited:
        return f"seeds: the effect holds in every seed, but REPRODUCED needs {MIN_SEEDS}"
    if res.verdict == "EXCEEDED" or res.above_band:
        return "regime: a setup more favourable than the paper's (see the regime rows)"
    key = EXPLANATION_KEYS.get(res.verdict, "")
    why = " ".join(res.explanation.split()) if res.explanation else ""
    if not why:
        return f"ours: no explanation of this verdict is recorded (explanation.{key})"
    first = why.split(". ")[0].rstrip(".")
    if CLASS_PREFIX.match(first):
        return first
    # Only a claim that bypassed load_papers gets here: an unclassified text is our defect.
    return f"ours: the explanation names no cause class (explanation.{key}): {first}"


def defect_warnings(results: Iterable[ClaimResult]) -> list[str]:
    """One warning line per claim whose cause is of class ``ours`` (a defect to fix)."""
    return [
        f"warning: claim {r.paper}/{r.claim} ({r.verdict}) is decided by a defect of ours, to "
        f"fix: {r.cause}"
        for r in results
        if r.cause_class == DEFECT
    ]


def explanation_for(
    claim: dict[str, Any],
    verdict: str,
    seeds: int = MIN_SEEDS,
    seed_limited: bool = False,
    above_band: bool = False,
) -> str:
    """The paper file's explanation of this verdict, or "" if it gives none for it.

    ``explanation`` maps verdict keys (``not_reproduced``, ``partial``, ``exceeded``,
    ``not_comparable``, ``inconsistent``, ``reproduced``) to text, so that an explanation
    written for one outcome is never printed beside another. A PARTIAL held back only by its
    number of seeds (``seed_limited``: every seed inside the band, or beyond the spread) is
    explained as such, not by the text written for a smaller effect; nor is a PARTIAL whose
    whole interval lies above the band (``above_band``), which takes the text written for
    EXCEEDED, or says that the setup favours the method more than the paper's did.
    """
    if verdict == "PARTIAL" and seed_limited:
        ran = "the one seed run" if seeds == 1 else f"each of the {seeds} seeds run"
        return (
            f"the claim holds in {ran}, but REPRODUCED needs "
            f"{MIN_SEEDS} seeds and a 95% interval; run this tier with more seeds (for example "
            "--config 'seeds=[0,1,2]')"
        )
    by_verdict = claim.get("explanation") or {}
    if verdict == "PARTIAL" and above_band:
        return str(by_verdict.get("exceeded") or MECHANICAL_EXPLANATIONS["EXCEEDED"])
    key = EXPLANATION_KEYS.get(verdict)
    if not key:
        return ""
    return str(by_verdict.get(key) or MECHANICAL_EXPLANATIONS.get(verdict, ""))


MECHANICAL_EXPLANATIONS = {
    "EXCEEDED": (
        "regime: the whole 95% interval lies above the paper's tolerance band: our setup favours "
        "the method more than the paper's did (see the regime rows); a larger effect than "
        "reported is no reproduction of the reported one"
    ),
    NOT_COMPARABLE: (
        "regime: a field of our measured regime (named in the cause) lies beyond its bound from "
        "the paper's, so the effect measured here does not test the claim in the setting the "
        "paper measured it in; the verdict our runs would have had is kept in the detail, and "
        "only a tier whose regime matches the paper's can judge the claim"
    ),
}
"""The explanation of a verdict whose cause the analysis measures itself, where the paper file
gives none for the claim: EXCEEDED (a whole interval above the band) and NOT COMPARABLE (a regime
field off its bound) follow from the measurement, whatever the claim. A paper file's own text for
the verdict takes precedence."""
