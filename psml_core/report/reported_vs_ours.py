"""Reported versus reproduced, for the report: ``claims.csv`` checked against the paper files.

``psml compare`` measures every claim of ``config/papers/*.yaml`` on the runs and writes one row
per claim to ``claims.csv`` (:class:`psml_core.analysis.claim_result.ClaimResult`). The report reads
the measured numbers and verdicts from that file and the words (titles, setups, deviations)
from the paper files; the two must describe the same claims with the same reported values, or
the claims file is stale and the report refuses to print it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from psml_core.analysis.claim_result import VERDICTS
from psml_core.errors import DataError
from psml_core.report.claim_cells import accuracies_text, basis_cell, is_defect
from psml_core.report.claim_regimes import regime_cell
from psml_core.report.format import DASH, fmt_value, missing, sig
from psml_core.report.glossary import COUNT_MEANINGS
from psml_core.report.tables import Table

__all__ = [
    "CLAIM_COLUMNS",
    "check_claims",
    "fmt_ours",
    "fmt_ours_short",
    "fmt_reported",
    "has_codec_free",
    "has_robustness",
    "is_measured",
    "judged_short",
    "measured_as",
    "paper_claims_table",
    "read_claims",
    "ran_without_value",
    "summary_counts",
    "summary_intro",
    "verdict_counts",
    "verdict_table",
]

CLAIM_COLUMNS: tuple[str, ...] = (
    "paper", "claim", "statement", "source", "kind", "reported", "unit", "up_to", "metric",
    "ours", "low", "high", "ci_low", "ci_high", "seeds", "censored", "bound", "scenario",
    "baseline", "baselines", "floor", "band_low", "band_high", "verdict", "detail",
    "explanation", "per_metric",
)  # fmt: skip
_VERDICTS = VERDICTS
_REGIME_COLUMNS = ("regime_status", "regime_notes", "regime_map", "regime", "workload")
# Columns of claims files written since named comparators, bounds and causes: older files
# read them as empty (text) or missing (numbers).
_NEWER_TEXT = ("comparator", "robust_verdict", "robust_baseline", "robust_detail", "bound_text",
               "cause", "resolution", "nocodec_verdict", "nocodec_detail", "cause_class",
               "band_set_by", "min_effect_text")  # fmt: skip
_NEWER_NUMBERS = ("robust_ours", "robust_ci_low", "robust_ci_high", "bound_value",
                  "nocodec_ours", "nocodec_ci_low", "nocodec_ci_high", "bound_low",
                  "noise_test_se", "noise_seed_sd", "min_effect", "method_accuracy",
                  "baseline_accuracy")  # fmt: skip
_NBSP = "\u00a0"


# --------------------------------------------------------------------------- reading


def read_claims(path: str | Path) -> pd.DataFrame:
    """Read ``claims.csv`` (written by ``psml compare --claims``).

    Only empty cells are missing values. Text columns come back as strings ("" when empty).

    Raises:
        DataError: The file is missing, unreadable, lacks columns or holds an unknown verdict.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"claims file {str(p)!r} does not exist; run `psml compare --claims`")
    try:
        df = pd.read_csv(p, keep_default_na=False, na_values=[""], encoding="utf-8")
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise DataError(f"claims file {str(p)!r} is not readable CSV ({exc})") from None
    absent = [c for c in CLAIM_COLUMNS if c not in df.columns]
    if absent:
        raise DataError(f"claims file {str(p)!r} lacks columns {absent}; regenerate it")
    for col in (*_REGIME_COLUMNS, *_NEWER_TEXT):  # older claims files have none
        if col not in df.columns:
            df[col] = ""
        df[col] = df[col].map(lambda v: "" if missing(v) else str(v))
    for col in ("paper", "claim", "statement", "source", "kind", "unit", "metric", "scenario",
                "baseline", "baselines", "bound", "verdict", "detail", "explanation",
                "per_metric"):  # fmt: skip
        df[col] = df[col].map(lambda v: "" if missing(v) else str(v))
    for col in ("reported", "ours", "low", "high", "ci_low", "ci_high", "seeds", "censored",
                "floor", "band_low", "band_high"):  # fmt: skip
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    for col in _NEWER_NUMBERS:  # older claims files have none: missing
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float) if col in df else math.nan
    df["up_to"] = df["up_to"].map(lambda v: str(v).strip().lower() in ("true", "1"))
    bad = sorted(
        set(df["verdict"]) - set(_VERDICTS)
        | (set(df["robust_verdict"]) | set(df["nocodec_verdict"])) - {"", *_VERDICTS}
    )
    if bad:
        raise DataError(f"claims file {str(p)!r} holds unknown verdicts {bad}; regenerate it")
    return df


def check_claims(
    claims: pd.DataFrame, papers: Mapping[str, Mapping[str, Any]], path: str | Path
) -> None:
    """Check that ``claims`` measured exactly the claims of ``papers``, with their values.

    Raises:
        DataError: A claim is in one and not the other, or its statement or reported value
            differs: the claims file was made from other paper files (stale).
    """
    fix = f"claims file {str(path)!r} does not match the paper files; re-run `psml compare`"
    want = {(pid, c["id"]): c for pid, paper in papers.items() for c in paper.get("claims") or []}
    have = {(r.paper, r.claim): r for r in claims.itertuples(index=False)}
    if len(have) != len(claims):
        raise DataError(f"{fix} (a claim appears twice)")
    for key in sorted(set(want) ^ set(have)):
        where = "the paper files" if key in want else "the claims file"
        raise DataError(f"{fix} (claim {key[0]}/{key[1]} is only in {where})")
    for key, c in want.items():
        row = have[key]
        reported = c["reported"].get("value")
        same = (
            (reported is None and math.isnan(row.reported))
            or (reported is not None and math.isclose(float(reported), row.reported, rel_tol=1e-9))
        )  # fmt: skip
        if not same or row.statement != c["statement"] or row.kind != c["reported"]["kind"]:
            raise DataError(f"{fix} (claim {key[0]}/{key[1]} differs)")


# --------------------------------------------------------------------------- formatting


def _unit(value: str, unit: str) -> str:
    if unit in ("x", "×"):
        return f"{value}×"
    return f"{value}{_NBSP}{unit}" if unit else value


def is_measured(row: Any) -> bool:
    """Whether the claim was measured on runs of this tier (NOT RUN: its runs are missing)."""
    return row.verdict != "NOT RUN" and math.isfinite(float(row.ours))


def fmt_reported(row: Any) -> str:
    """The paper's number as written (``"up to 41×"``), or the direction of a qualitative one."""
    if row.kind == "qualitative":
        return "direction only (no number)"
    if not math.isfinite(float(row.reported)):
        return DASH
    text = _unit(fmt_value(float(row.reported)), row.unit)
    return f"up to {text}" if row.up_to else text


def _unmeasured(row: Any) -> str | None:
    """The text for a claim without a value: "not run", or what became of its runs; else None."""
    if row.verdict == "NOT RUN":
        return "not run"
    return None if is_measured(row) else ran_without_value(row.detail)


def ran_without_value(detail: str) -> str:
    """What to print for a comparison whose runs ran but whose metric has no value.

    A run that never held its target has no time or bytes to target (it is censored): the
    comparison ran and missed, which "not run" would misreport.
    """
    if "held the target" in detail or "censored" in detail:
        return "ran, missed the target: no value of the metric (censored)"
    return "ran: no value of the metric"


def fmt_ours(row: Any) -> str:
    """Our mean with its 95% interval, range over seeds, n and censoring, or "not run"."""
    if (unmeasured := _unmeasured(row)) is not None:
        return unmeasured
    n = f"n{_NBSP}={_NBSP}{int(row.seeds)}"
    if row.kind == "qualitative":
        # ours / low / high hold: scenarios better on the primary metric on average, beyond
        # the seed spread, in all; the secondary metrics' non-inferiority is in the detail.
        text = (
            f"primary metric better in {int(row.ours)} of {int(row.high)} scenario(s) "
            f"({int(row.low)} beyond the seed spread); {n}"
        )
        return f"{text}; {acc}" if (acc := accuracies_text(row)) else text
    mean = _unit(sig(float(row.ours)), row.unit)
    if row.verdict == "SETUP FACT":
        return f"{mean} (set by our setup) [{sig(float(row.low))}, {sig(float(row.high))}], {n}"
    parts = [mean]
    if math.isfinite(float(row.ci_low)):
        parts.append(f"95%{_NBSP}CI [{sig(float(row.ci_low))}, {sig(float(row.ci_high))}]")
    if int(row.seeds) >= 2:
        parts.append(f"range [{sig(float(row.low))}, {sig(float(row.high))}], {n}")
    else:  # one seed has no spread: say so instead of printing a range of one value
        parts.append(f"{n}: one seed, no interval")
    text = " ".join(parts[:2]) + "; " + parts[-1] if len(parts) == 3 else ", ".join(parts)
    if 0 < int(row.seeds) < 3:
        text += " (fewer than 3 seeds: indicative only)"
    if int(row.censored or 0):
        text += f"; {int(row.censored)} censored ({row.bound})"
    if accuracies := accuracies_text(row):
        text += f"; {accuracies}"
    return text


def measured_as(row: Any) -> str:
    """The metric, fixed scenario(s) and named comparator a claim was judged with, and its floor."""
    parts = [p for p in (row.metric, getattr(row, "workload", ""), row.scenario) if p]
    fixed = row.baselines or row.baseline
    if fixed:
        family = row.baselines and "," in row.baselines
        which = "best on the primary metric" if row.kind == "qualitative" else "strongest"
        chosen = f" ({which}: {row.baseline})" if family and row.baseline else ""
        parts.append(f"vs {fixed}{chosen}")
    # An accuracy ratio has a band, not a partial floor (its Basis cell gives the band).
    if math.isfinite(float(row.floor)) and not getattr(row, "band_set_by", ""):
        parts.append(f"partial floor {_unit(sig(float(row.floor)), row.unit)}")
    return " · ".join(parts) or DASH


def has_robustness(row: Any) -> bool:
    """Whether the claim has a robustness row (``measure.robustness`` in its paper file)."""
    return bool(getattr(row, "robust_verdict", ""))


def fmt_robust(row: Any) -> str:
    """The robustness row's effect: its mean and 95% interval (or the qualitative count)."""
    if row.robust_verdict == "NOT RUN":
        return "not run"
    if not math.isfinite(float(row.robust_ours)):
        return ran_without_value(row.robust_detail)
    if row.kind == "qualitative":
        return f"primary metric better in {int(row.robust_ours)} scenario(s)"
    text = _unit(sig(float(row.robust_ours)), row.unit)
    if math.isfinite(float(row.robust_ci_low)):
        text += f" [{sig(float(row.robust_ci_low))}, {sig(float(row.robust_ci_high))}]"
    return text


def has_codec_free(row: Any) -> bool:
    """Whether the claim has a codec-free sensitivity row (the tier ran ``__nocodec`` runs)."""
    return bool(getattr(row, "nocodec_verdict", ""))


def fmt_codec_free(row: Any) -> str:
    """The codec-free row's effect: its mean and 95% interval."""
    if row.nocodec_verdict == "NOT RUN":
        return "not run"
    if not math.isfinite(float(row.nocodec_ours)):
        return ran_without_value(row.nocodec_detail)
    text = _unit(sig(float(row.nocodec_ours)), row.unit)
    if math.isfinite(float(row.nocodec_ci_low)):
        text += f" [{sig(float(row.nocodec_ci_low))}, {sig(float(row.nocodec_ci_high))}]"
    return text


_CODEC_FREE_JUDGED = "sensitivity: codec work at 0 s"


def robust_judged(row: Any) -> str:
    """Against what the robustness row was judged."""
    if not row.robust_baseline:
        return row.robust_detail or DASH
    return f"robustness: vs the strongest of ours ({row.robust_baseline})"


# --------------------------------------------------------------------------- tables and text


def verdict_counts(claims: pd.DataFrame) -> dict[str, int]:
    """Claims per verdict, in verdict order."""
    return {v: int((claims["verdict"] == v).sum()) for v in _VERDICTS}


def summary_intro(claims: pd.DataFrame, papers: Mapping[str, Any], tier: str) -> str:
    """A few lines: what was judged, what the tier's seeds allow, and where to read on.

    The verdicts' counts follow in a table of their own (:func:`summary_counts`) and the rules
    in the glossary (:mod:`.glossary`), so the first page stays a summary.
    """
    counts = verdict_counts(claims)
    n, k = len(claims), len(papers)
    text = (
        f"This report checks {n} claim{'' if n == 1 else 's'} from {k} "
        f"paper{'' if k == 1 else 's'} against runs of the {tier} tier. Each claim's scenario, "
        "comparator and metric were fixed in its paper file before any run. Verdicts: "
        + ", ".join(f"{c} {v}" for v, c in counts.items() if c)
        + "."
    )
    measured = claims[claims["verdict"] != "NOT RUN"]
    most = int(pd.to_numeric(measured["seeds"], errors="coerce").fillna(0).max() or 0)
    if len(measured) and most < 3:
        text += (
            f" With {most} seed{'' if most == 1 else 's'} per run no claim can be REPRODUCED "
            "in this tier: its numbers are indicative."
        )
    if counts.get("NOT RUN"):
        text += (
            f" {counts['NOT RUN']} could not be judged because this tier does not run them (the "
            "paper's section names the missing runs)."
        )
    defects = [f"{r.paper}/{r.claim}" for r in claims.itertuples(index=False) if is_defect(r)]
    if defects:
        text += (
            f" Decided by a defect of ours, to fix (a cause of class ours): {', '.join(defects)}."
        )
    return text + (
        " Where to read on: Table 1 below gives every claim, the paper's number, ours and the "
        "verdict; each paper's section gives its setup and deviations, its figures, why each "
        "verdict fell and how finely it was measured; the Glossary after Table 1 defines every "
        "verdict, the regime fields and each abbreviation."
    )


def summary_counts(claims: pd.DataFrame) -> list[dict[str, Any]]:
    """Every verdict with its number of claims (0 included) and what it means, in one line."""
    counts = verdict_counts(claims)
    return [{"verdict": v, "count": counts[v], "meaning": COUNT_MEANINGS[v]} for v in _VERDICTS]


def fmt_ours_short(row: Any) -> str:
    """The summary's form of :func:`fmt_ours`: mean, 95% interval, n, censored runs."""
    if (unmeasured := _unmeasured(row)) is not None:
        return unmeasured
    n = f"n{_NBSP}={_NBSP}{int(row.seeds)}"
    acc = accuracies_text(row, short=True)
    if row.kind == "qualitative":
        text = f"better in {int(row.ours)} of {int(row.high)} ({int(row.low)} beyond spread), {n}"
        return f"{text}; {acc}" if acc else text
    text = _unit(sig(float(row.ours)), row.unit)
    if row.verdict != "SETUP FACT" and math.isfinite(float(row.ci_low)):
        text += f" [{sig(float(row.ci_low))}, {sig(float(row.ci_high))}]"
    text += f", {n}"
    if 0 < int(row.seeds) < 3:
        text += " (indicative)"
    if int(row.censored or 0):
        text += f", {int(row.censored)} censored"
    return f"{text}; {acc}" if acc else text


def judged_short(row: Any) -> str:
    """The summary's form of :func:`measured_as`: metric, workload, scenario, strongest rival."""
    parts = [p for p in (row.metric, getattr(row, "workload", ""), row.scenario) if p]
    if row.baseline:
        parts.append(f"vs {row.baseline}")
    return " · ".join(parts) or DASH


def verdict_table(claims: pd.DataFrame) -> Table:
    """The summary's table: every claim, grouped by paper, one short row each."""
    rows = []
    for r in claims.itertuples(index=False):
        rows.append(
            [
                r.paper,
                f"{r.claim}: {' '.join(r.statement.split())}",
                fmt_reported(r),
                fmt_ours_short(r),
                judged_short(r),
                r.verdict,
                regime_cell(r),
            ]
        )
        if has_robustness(r):
            rows.append(
                [r.paper, "↳ robustness", "", fmt_robust(r), robust_judged(r), r.robust_verdict, ""]
            )
        if has_codec_free(r):
            rows.append([r.paper, "↳ codec-free", "", fmt_codec_free(r), _CODEC_FREE_JUDGED,
                         r.nocodec_verdict, ""])  # fmt: skip
    return Table(
        "verdicts",
        "Reported versus reproduced, every claim of every paper. Reported: the paper's number; "
        "Ours: our mean effect over seeds (geometric mean of the per-seed ratios), its 95% "
        "interval in brackets, n seeds, runs censored, and for a claim judged on a time or "
        "bytes to target both sides' mean final test accuracy (acc., ours vs the "
        "comparator's); Judged as: the fixed metric, workload, "
        "scenario and the comparator the paper names; ↳ robustness: the same rule against the "
        "strongest of the named comparator and our other baselines (never the verdict); "
        "↳ codec-free: the verdict's rule on the same runs with codec work priced at 0 s "
        "(a sensitivity, where the tier ran it); Regime: ours against the paper's where it "
        "gives one, else where along the regime map the claim holds. Each paper's section "
        "gives every baseline, the partial floor, the range over seeds, the resolution, and "
        "the cause of every verdict but REPRODUCED.",
        ["Paper", "Claim", "Reported", "Ours", "Judged as", "Verdict", "Regime"],
        rows or [[DASH] * 7],
        widths=["auto", 1.5, 0.65, 1.05, 1.25, 0.8, 1.2],
        group=True,
        verdict=5,
        breakable=True,
    )


def paper_claims_table(claims: pd.DataFrame, paper: str) -> Table:
    """A paper's claims: reported vs reproduced, how judged, the verdict and how strict it was.

    Beside the verdict: an accuracy ratio's band and the noise that set it, a qualitative
    claim's minimum effect and where it came from, the paper's own bound and the cause's class
    (:func:`.claim_cells.basis_cell`). Why each verdict fell as it did is in the list of misses
    below the table (the detail and our explanation), so the table does not repeat it.
    """
    rows = []
    for r in claims.itertuples(index=False):
        rows.append([r.claim, fmt_reported(r), fmt_ours(r), measured_as(r), r.verdict,
                     basis_cell(r)])  # fmt: skip
        if has_robustness(r):
            rows.append(["↳ robustness", "", fmt_robust(r), robust_judged(r), r.robust_verdict,
                         ""])  # fmt: skip
        if has_codec_free(r):
            rows.append(["↳ codec-free", "", fmt_codec_free(r), _CODEC_FREE_JUDGED,
                         r.nocodec_verdict, ""])  # fmt: skip
    return Table(
        f"claims_{paper}",
        "Reported versus reproduced, as in Table 1, with the range over seeds, the comparator "
        "the paper names (the strongest member of a family), the partial floor and, for a claim "
        "judged on a time or bytes to target, both sides' mean final test accuracy. Basis: how "
        "strict the verdict was (an accuracy band and the noise that set it, a direction-only "
        "claim's minimum effect, the paper's own bound) and the class of its cause (ours marks "
        "a defect of ours to fix). Why each verdict fell, and how finely each claim is "
        "measured, is below the tables.",
        ["Claim", "Reported", "Ours", "Judged as", "Verdict", "Basis"],
        rows or [[DASH] * 6],
        widths=["auto", 0.65, 1.45, 1.45, "auto", 1.25],
        verdict=4,
        breakable=True,
    )
