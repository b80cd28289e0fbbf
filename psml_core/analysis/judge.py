"""One pairing's verdict: a method's per-seed gains over one baseline, against the paper's value.

:func:`judge` applies the verdict rules of :mod:`psml_core.analysis.claims` to the gains of one
(scenario, baseline) pairing; the caller chooses the pairing (the named comparator, or the
strongest of a family) and combines scenarios.

An **accuracy ratio** (a higher-is-better metric, e.g. "accuracy moves from 0.975 to 0.969")
is judged two-sided around the paper's drop: the band is the paper's ratio plus or minus one
*resolution step*, the accuracy of one test sample over the baseline's accuracy. A drop up to
the paper's plus one test sample is inside; a drop larger than that is a miss; a drop smaller
than the paper's by more than one test sample is EXCEEDED (the accuracy is kept better than
the paper's). A one-sided band (any accuracy above ``reported / (1 + tolerance)``) would pass
a drop several times the paper's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from psml_core.analysis.claim_result import CENSORED_BOUND, HIGHER_IS_BETTER, MIN_SEEDS
from psml_core.analysis.gains import Gains, effect_to_gain, gain_interval

__all__ = ["accuracy_step_gain", "judge"]


def accuracy_step_gain(test_samples: float, baseline_accuracy: float) -> float:
    """One test sample as a log gain of an accuracy ratio (NaN if either is unknown)."""
    if not (test_samples > 0 and baseline_accuracy > 0):
        return math.nan
    return math.log1p(1.0 / float(test_samples) / float(baseline_accuracy))


def _censoring_note(g: Gains, metric: str) -> str:
    censored = [s for s, b in zip(g.seeds, g.bound, strict=True) if b]
    if not censored:
        return ""
    what = CENSORED_BOUND.get(metric, "its total")
    return (
        f"censored (target never held; bounded by {what}) in seed"
        f"{'s' if len(censored) > 1 else ''} {', '.join(map(str, censored))}"
    )


def _accuracy(
    g: Gains, g_rep: float, step: float, nums: dict[str, float]
) -> tuple[str, str, dict[str, float]]:
    """The two-sided accuracy rule (module docstring); ``step``: one test sample as a gain."""
    n = len(g.seeds)
    lo_band, hi_band = g_rep - step, g_rep + step
    nums.update(width=step, floor=lo_band)
    ci_lo, ci_hi = nums["ci_low"], nums["ci_high"]
    where = f"the paper's ratio ± one test sample ({step * 100:.2g}% of the baseline's accuracy)"
    if n >= MIN_SEEDS and lo_band <= ci_lo and ci_hi <= hi_band:
        return "REPRODUCED", f"the 95% interval lies within {where}", nums
    if n >= MIN_SEEDS and ci_lo > hi_band:
        return "EXCEEDED", f"the whole interval lies above {where}: less accuracy lost", nums
    if g.mean >= lo_band:
        why = f"n = {n} < {MIN_SEEDS}" if n < MIN_SEEDS else "the interval reaches outside it"
        nums["seed_limited"] = float(n < MIN_SEEDS and g.mean <= hi_band)
        return "PARTIAL", f"the mean is within or above {where}, but {why}", nums
    return "NOT REPRODUCED", f"accuracy falls by more than {where}", nums


def judge(
    claim: dict[str, Any], g: Gains, metric: str, accuracy_step: float = math.nan
) -> tuple[str, str, dict[str, float]]:
    """(verdict, detail, numbers in gain space) of one pairing.

    Args:
        claim: The claim (reported value, kind, tolerance, ``up_to``).
        g: The method's per-seed gains over the baseline (censoring included).
        metric: The claim's metric.
        accuracy_step: One test sample as a gain (:func:`accuracy_step_gain`), for the
            two-sided accuracy rule; NaN falls back to the claim's tolerance, one-sided.
    """
    rep = claim["reported"]
    tol = claim.get("tolerance", {})
    g_rep = effect_to_gain(rep["kind"], metric, float(rep["value"]))
    width = math.log(1.0 + float(tol.get("reproduced", 0.25)))
    one_sided = rep["kind"] == "ratio" and metric in HIGHER_IS_BETTER
    floor = g_rep - width if one_sided else float(tol.get("partial", 0.5)) * g_rep
    n = len(g.seeds)
    exact = np.array([b == "" for b in g.bound])
    ci = gain_interval(g.gains) if exact.all() else (math.nan, math.nan)
    nums = {"g_rep": g_rep, "width": width, "floor": floor, "ci_low": ci[0], "ci_high": ci[1]}
    cens_note = _censoring_note(g, metric)
    mean = g.mean
    band = (g_rep - width, g_rep + width)
    if any(b in ("at most", "unknown") for b in g.bound):
        who = (
            "the method did not hold the target in every seed"
            if any(b == "at most" for b in g.bound)
            else "neither run held the target in some seed"
        )
        return "NOT REPRODUCED", f"{who}: {cens_note}", nums
    if cens_note:
        ok = bool(np.all(g.gains >= floor))
        verdict = "PARTIAL" if ok else "NOT REPRODUCED"
        side = "clears" if ok else "does not clear"
        return verdict, f"the baseline {cens_note}; the bound {side} the partial floor", nums
    if one_sided and math.isfinite(accuracy_step):
        return _accuracy(g, g_rep, accuracy_step, nums)
    if one_sided:
        if n >= MIN_SEEDS and ci[0] >= floor:
            return "REPRODUCED", "the interval's lower end is within tolerance (one-sided)", nums
        if mean >= floor:
            why = f"n = {n} < {MIN_SEEDS}" if n < MIN_SEEDS else "the interval reaches below it"
            nums["seed_limited"] = float(n < MIN_SEEDS)
            return "PARTIAL", f"the mean is within tolerance (one-sided), but {why}", nums
        return "NOT REPRODUCED", "below the reported value by more than the tolerance", nums
    inside = n >= MIN_SEEDS and band[0] <= ci[0] and ci[1] <= band[1]
    if inside:
        return "REPRODUCED", "the 95% interval lies inside the tolerance band", nums
    clears = bool(ci[0] >= floor) if n >= MIN_SEEDS else bool(np.all(g.gains >= floor))
    if g_rep <= 0:  # a claim of no gain: there is no floor to clear
        clears = False
    if clears and n >= MIN_SEEDS and ci[0] > band[1] and rep.get("up_to"):
        return "EXCEEDED", 'the whole interval lies above the tolerance band of an "up to"', nums
    if clears:
        if n < MIN_SEEDS and bool(np.all((band[0] <= g.gains) & (g.gains <= band[1]))):
            why = f"every seed within the tolerance band, but n = {n} < {MIN_SEEDS} seeds"
            nums["seed_limited"] = 1.0
        elif n < MIN_SEEDS:
            why = f"n = {n} < {MIN_SEEDS} seeds (no interval)"
        elif ci[0] > band[1]:
            why = "the interval lies above the tolerance band (a more favourable setup)"
            nums["above_band"] = 1.0
        elif mean > band[1]:
            why = "the interval reaches above the tolerance band"
        else:
            why = "the interval reaches below the tolerance band"
        return "PARTIAL", f"clears the partial floor; {why}", nums
    where = "the interval reaches below" if n >= MIN_SEEDS else "a seed falls below"
    return "NOT REPRODUCED", f"{where} the partial floor", nums
