"""What the claims tables print beside a verdict: how strict it was, and what decided it.

* **Band** (an accuracy ratio): its half-width and what set it, the larger of the claim's
  tolerance and our noise (the test set's binomial error, the seed spread), both noises shown.
* **Minimum effect** (a qualitative claim): the floor and where it came from ("25% of the
  oracle's 14% cut = 3.5%").
* **Bound** (a claim the paper's own numbers bound): the bound, or their range.
* **Cause** class of every verdict but REPRODUCED; ``ours`` is marked as a defect to fix.
* **Final accuracy** of both sides of a claim judged on a time or bytes to target, beside its
  effect, so that an accuracy cost shows beside a gain.
"""

from __future__ import annotations

import math
from typing import Any

from psml_core.analysis.claim_result import DEFECT
from psml_core.report.format import DASH, fmt_percent, sig

__all__ = [
    "DEFECT_MARK",
    "accuracies_text",
    "band_text",
    "basis_cell",
    "bound_range",
    "cause_cell",
    "is_defect",
]

DEFECT_MARK = "a defect of ours, to fix"
"""How the report marks a verdict whose cause is of class ``ours``."""
_NBSP = "\u00a0"
_BAND_WORDS = {
    "tolerance": "the claim's tolerance",
    "test set": "the test set's binomial error",
    "seeds": "the seed spread",
}


def _num(row: Any, name: str) -> float:
    """A numeric column of a claims row (NaN where absent: an older claims file)."""
    try:
        return float(getattr(row, name, math.nan))
    except (TypeError, ValueError):
        return math.nan


def _pct(x: float) -> str:
    """A log gain or fraction as a short percentage ("1.3%"), "–" where unknown."""
    return f"{100 * x:.2g}%" if math.isfinite(x) else DASH


def band_text(row: Any) -> str:
    """An accuracy ratio's band: "band ±1.3% (the test set's binomial error; ...)", or ""."""
    source = str(getattr(row, "band_set_by", "") or "")
    low, high = _num(row, "band_low"), _num(row, "band_high")
    if not source or not (low > 0 and high > 0):
        return ""
    width = 0.5 * math.log(high / low)
    return (
        f"band ±{_pct(width)}, set by {_BAND_WORDS.get(source, source)} (test-set SE "
        f"{_pct(_num(row, 'noise_test_se'))}, seed SD {_pct(_num(row, 'noise_seed_sd'))})"
    )


def bound_range(row: Any) -> str:
    """The paper's own bound on the claim ("Amdahl bound 2.79× to 6.01×"), or ""."""
    high, low = _num(row, "bound_value"), _num(row, "bound_low")
    if not math.isfinite(high):
        return ""
    unit = "×" if row.kind == "speedup" else f"{_NBSP}%" if row.kind == "reduction" else ""
    if math.isfinite(low) and not math.isclose(low, high):
        return f"Amdahl bound {sig(low)}{unit} to {sig(high)}{unit} (the paper pins no one value)"
    return f"Amdahl bound {sig(high)}{unit}"


def is_defect(row: Any) -> bool:
    """Whether the verdict's cause is of class ``ours``: a defect of ours to fix."""
    return str(getattr(row, "cause_class", "") or "") == DEFECT


def cause_cell(row: Any) -> str:
    """The cause's class ("cause: regime"), marked where it is a defect of ours; or ""."""
    cls = str(getattr(row, "cause_class", "") or "")
    if not cls:
        return ""
    return f"cause: ours, {DEFECT_MARK}" if cls == DEFECT else f"cause: {cls}"


def basis_cell(row: Any) -> str:
    """The claims table's cell beside the verdict: band, minimum effect, bound and cause."""
    parts = [
        band_text(row),
        f"minimum effect {row.min_effect_text}" if getattr(row, "min_effect_text", "") else "",
        bound_range(row),
        cause_cell(row),
    ]
    return "; ".join(p for p in parts if p) or DASH


def accuracies_text(row: Any, short: bool = False) -> str:
    """Both sides' mean final test accuracy of a to-target claim ("" where not recorded)."""
    ours, theirs = _num(row, "method_accuracy"), _num(row, "baseline_accuracy")
    if not (math.isfinite(ours) or math.isfinite(theirs)):
        return ""
    if short:
        return f"acc. {fmt_percent(ours)} vs {fmt_percent(theirs)}"
    return f"final accuracy: ours {fmt_percent(ours)}, comparator's {fmt_percent(theirs)}"
