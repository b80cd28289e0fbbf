"""One pairing's verdict: a method's per-seed gains over one baseline, against the paper's value.

:func:`judge` applies the verdict rules of :mod:`psml_core.analysis.claims` to the gains of one
(scenario, baseline) pairing; the caller chooses the pairing (the named comparator, or the
strongest of a family) and combines scenarios.

An **accuracy ratio** (a ratio of a higher-is-better metric, e.g. "accuracy moves from 0.975 to
0.969") is judged two-sided around the paper's ratio, in a band whose half-width ``w`` (a log
gain) is the largest of the claim's tolerance ``log(1 + tolerance.reproduced)`` and the noise
measured on our side (:class:`AccuracyNoise`): the test set's binomial standard error of the log
ratio, ``sqrt(se_m^2 + se_b^2)`` with ``se = sqrt(p (1 - p) / n) / p`` for each side's mean
accuracy ``p`` on ``n`` test samples, and the sample standard deviation of the per-seed log
gains. With 3 to 5 seeds the 95% interval of the mean is wider than one seed's standard
deviation, so an interval inside a band one noise unit wide could never pass; the rule reads
the mean and the interval:

* REPRODUCED: at least 3 seeds and the mean gain inside ``g_rep +- w``;
* EXCEEDED: at least 3 seeds and the whole 95% interval above the band (less accuracy lost);
* NOT REPRODUCED: the whole interval below the band (with fewer than 3 seeds: every seed);
* PARTIAL: otherwise (the mean outside the band with the interval reaching into it, or fewer
  than 3 seeds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from psml_core.analysis.claim_result import CENSORED_BOUND, HIGHER_IS_BETTER, MIN_SEEDS
from psml_core.analysis.gains import Gains, effect_to_gain, gain_interval

__all__ = ["BAND_SOURCES", "AccuracyNoise", "band_source", "binomial_log_se", "judge"]

BAND_SOURCES = ("tolerance", "test set", "seeds")
"""What may set an accuracy band's half-width: the claim's tolerance or one of our noises."""
_BAND_WORDS = {
    "tolerance": "the claim's tolerance",
    "test set": "the test set's binomial error",
    "seeds": "the seed spread",
}


@dataclass(frozen=True)
class AccuracyNoise:
    """The noise of an accuracy ratio on our side, as log gains (NaN where unknown).

    Attributes:
        test_se: The test set's binomial standard error of ``log(ours / baseline)`` for one
            run of each (:func:`binomial_log_se`).
    """

    test_se: float = math.nan


def binomial_log_se(accuracies: tuple[float, float], test_samples: float) -> float:
    """The binomial standard error of the log of a ratio of two accuracies on ``n`` samples.

    Each accuracy ``p`` has a standard error ``sqrt(p (1 - p) / n)``, ``sqrt(p (1 - p) / n) / p``
    on a log scale; the two sides' add in quadrature. NaN where ``n`` or an accuracy is unknown.
    """
    n = float(test_samples)
    if not (n > 0 and all(0 < p <= 1 for p in accuracies)):
        return math.nan
    return math.sqrt(sum((1.0 - p) / (n * p) for p in accuracies))


def band_source(nums: dict[str, float]) -> str:
    """Which of :data:`BAND_SOURCES` set an accuracy band's half-width ("" for other claims)."""
    if "noise_test" not in nums:
        return ""
    options = (nums["tolerance_width"], nums["noise_test"], nums["noise_seeds"])
    finite = [(w, name) for w, name in zip(options, BAND_SOURCES, strict=True) if math.isfinite(w)]
    return max(finite)[1]


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
    g: Gains, g_rep: float, tol_width: float, noise: AccuracyNoise, nums: dict[str, float]
) -> tuple[str, str, dict[str, float]]:
    """The two-sided accuracy rule (module docstring)."""
    n = len(g.seeds)
    finite = g.gains[np.isfinite(g.gains)]
    seed_sd = float(finite.std(ddof=1)) if finite.size >= 2 else math.nan
    width = max(w for w in (tol_width, noise.test_se, seed_sd) if math.isfinite(w))
    lo_band, hi_band = g_rep - width, g_rep + width
    nums.update(width=width, floor=lo_band, tolerance_width=tol_width,
                noise_test=noise.test_se, noise_seeds=seed_sd)  # fmt: skip
    where = (
        f"the paper's ratio ± {100 * width:.2g}% (the largest of the claim's tolerance, the test "
        f"set's binomial error and the seed spread; here {_BAND_WORDS[band_source(nums)]})"
    )
    mean = g.mean
    inside = lo_band <= mean <= hi_band
    if n >= MIN_SEEDS:
        ci_lo, ci_hi = nums["ci_low"], nums["ci_high"]
        if inside:
            return "REPRODUCED", f"the mean lies within {where}", nums
        if ci_lo > hi_band:
            return "EXCEEDED", f"the whole interval lies above {where}: less accuracy lost", nums
        if ci_hi < lo_band:
            return "NOT REPRODUCED", f"the whole interval lies below {where}", nums
        side = "above" if mean > hi_band else "below"
        return "PARTIAL", f"the mean lies {side} {where}, the interval reaches into it", nums
    if bool(np.all(finite < lo_band)):
        return "NOT REPRODUCED", f"every seed lies below {where}", nums
    nums["seed_limited"] = float(inside)
    return (
        "PARTIAL",
        f"the mean is {'within' if inside else 'outside'} {where}, but n = {n} < {MIN_SEEDS}",
        nums,
    )


def judge(
    claim: dict[str, Any], g: Gains, metric: str, noise: AccuracyNoise | None = None
) -> tuple[str, str, dict[str, float]]:
    """(verdict, detail, numbers in gain space) of one pairing.

    Args:
        claim: The claim (reported value, kind, tolerance, ``up_to``).
        g: The method's per-seed gains over the baseline (censoring included).
        metric: The claim's metric.
        noise: The test set's noise of an accuracy ratio (:class:`AccuracyNoise`); None: not
            known (the band is then the larger of the tolerance and the seed spread).
    """
    rep = claim["reported"]
    tol = claim.get("tolerance", {})
    g_rep = effect_to_gain(rep["kind"], metric, float(rep["value"]))
    width = math.log(1.0 + float(tol.get("reproduced", 0.25)))
    two_sided = rep["kind"] == "ratio" and metric in HIGHER_IS_BETTER
    floor = g_rep - width if two_sided else float(tol.get("partial", 0.5)) * g_rep
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
    if two_sided:
        return _accuracy(g, g_rep, width, noise or AccuracyNoise(), nums)
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
