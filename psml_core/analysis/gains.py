"""Per-seed gains of a method over a baseline, with censored runs bounded, and their intervals."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from psml_core.analysis.claim_result import CENSORED_BOUND, HIGHER_IS_BETTER

__all__ = [
    "Gains",
    "censored_values",
    "effect_to_gain",
    "gain_interval",
    "gain_to_effect",
    "gains_of",
    "metric_values",
    "pair_gains",
    "paired_runs",
]


def metric_values(runs: pd.DataFrame, metric: str) -> pd.Series:
    """A summary metric per run, derived ones included (see the paper schema's ``metrics``).

    Censored metrics (:data:`CENSORED_BOUND`) are NaN where the run never held its target.
    """
    num = {c: pd.to_numeric(runs[c], errors="coerce") for c in runs.columns if c.endswith("_s")}
    busy = num["compute_s"] + num["comm_s"] + num["wait_s"]
    if "codec_s" in num:  # device time spent on codecs (sim cost model) is busy, not compute
        busy = busy + num["codec_s"].fillna(0.0)
    if metric == "remote_bytes_total":
        return pd.to_numeric(runs["remote_bytes_up"]) + pd.to_numeric(runs["remote_bytes_down"])
    if metric == "wait_fraction":
        return num["wait_s"] / busy
    if metric == "utilisation":
        return num["compute_s"] / busy
    if metric == "comm_compute_ratio":
        return num["comm_s"] / num["compute_s"]
    return pd.to_numeric(runs[metric], errors="coerce").astype(float)


def censored_values(runs: pd.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """``(values, censored)`` per run: a censored run's value is its bound (the run's total).

    For metrics that cannot be censored, ``censored`` is all False.
    """
    values = metric_values(runs, metric).to_numpy(dtype=float)
    bound = CENSORED_BOUND.get(metric)
    if bound is None:
        return values, np.zeros(values.size, dtype=bool)
    censored = np.isnan(values)
    totals = pd.to_numeric(runs[bound], errors="coerce").to_numpy(dtype=float)
    return np.where(censored, totals, values), censored


def effect_to_gain(kind: str, metric: str, effect: float) -> float:
    """The log gain of an effect written as ``kind`` (see the module docstring)."""
    higher = metric in HIGHER_IS_BETTER
    if kind == "speedup":
        return math.log(effect) if effect > 0 else math.nan
    if kind == "reduction":
        rest = 1.0 - effect / 100.0
        if higher:  # "x% more" of a higher-is-better metric
            return math.log(1.0 + effect / 100.0) if effect > -100 else math.nan
        return -math.log(rest) if rest > 0 else math.inf
    if kind in ("ratio", "value"):
        if effect <= 0:
            return math.nan
        return math.log(effect) if (higher or kind == "value") else -math.log(effect)
    raise ValueError(f"no gain for kind {kind!r}")


def gain_to_effect(kind: str, metric: str, gain: float) -> float:
    """Inverse of :func:`effect_to_gain`."""
    if not math.isfinite(gain):
        if kind == "reduction" and gain == math.inf and metric not in HIGHER_IS_BETTER:
            return 100.0
        return math.nan
    higher = metric in HIGHER_IS_BETTER
    if kind == "speedup":
        return math.exp(gain)
    if kind == "reduction":
        return 100.0 * (math.exp(gain) - 1.0) if higher else 100.0 * (1.0 - math.exp(-gain))
    if kind in ("ratio", "value"):
        return math.exp(gain) if (higher or kind == "value") else math.exp(-gain)
    raise ValueError(f"no effect for kind {kind!r}")


@dataclass
class Gains:
    """Per-seed gains of one (scenario, baseline) pairing, with censoring."""

    scenario: str
    baseline: str
    seeds: list[int]
    gains: np.ndarray  # exact gains, or the bound where censored (NaN: unknown)
    bound: list[str]  # per seed: "" exact, "at most" (method censored), "at least", "unknown"

    @property
    def mean(self) -> float:
        """The mean gain over the seeds whose gain is known (NaN if none)."""
        finite = self.gains[np.isfinite(self.gains)]
        return float(finite.mean()) if finite.size else math.nan


def paired_runs(
    runs: pd.DataFrame, method: str, baseline: str | None, scenario: str, workload: str | None
) -> pd.DataFrame:
    """The method's runs (``m_`` columns) joined to the baseline's of the same workload and seed."""
    sel = runs[runs["scenario"] == scenario]
    if workload is not None:
        sel = sel[sel["workload"] == workload]
    # Pair the method's and the baseline's runs of the same workload and seed.
    m = sel[sel["method"] == method].set_index(["workload", "seed"])
    if baseline is None:
        return m.add_prefix("m_")
    b = sel[sel["method"] == baseline].set_index(["workload", "seed"])
    return m.add_prefix("m_").join(b.add_prefix("b_"), how="inner")


def gains_of(
    runs: pd.DataFrame, meas: dict[str, Any], metric: str, baseline: str | None, scenario: str
) -> Gains | None:
    """Per-seed log gains of ``meas``'s method over ``baseline`` (None: its own values).

    A censored run bounds its gain: "at most" where the method never reached the target,
    "at least" where the baseline did not, unknown where neither did. None if no run pairs.
    """
    pairs = paired_runs(runs, meas["method"], baseline, scenario, meas.get("workload"))
    if pairs.empty:
        return None
    mine = pairs.filter(regex="^m_").rename(columns=lambda c: c[2:])
    ours, our_cens = censored_values(mine, metric)
    seeds = [int(s) for _, s in pairs.index]
    higher = metric in HIGHER_IS_BETTER
    if baseline is None:
        with np.errstate(divide="ignore", invalid="ignore"):
            gains = np.log(np.where(ours > 0, ours, np.nan))
        bounds = ["at least" if c else "" for c in our_cens]
        return Gains(scenario, "", seeds, gains, bounds)
    theirs = pairs.filter(regex="^b_").rename(columns=lambda c: c[2:])
    base, base_cens = censored_values(theirs, metric)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where((ours > 0) & (base > 0), ours / base, np.nan)
        gains = np.log(ratio) if higher else -np.log(ratio)
    bounds = []
    for i, (mc, bc) in enumerate(zip(our_cens, base_cens, strict=True)):
        if mc and bc:
            bounds.append("unknown")
            gains[i] = math.nan
        elif mc:  # our true value exceeds the bound (lower is better): the gain is at most this
            bounds.append("at most")
        elif bc:
            bounds.append("at least")
        else:
            bounds.append("")
    return Gains(scenario, baseline, seeds, gains, bounds)


pair_gains = gains_of


def gain_interval(gains: np.ndarray) -> tuple[float, float]:
    """Two-sided 95% Student-t interval of the mean (NaN with fewer than 2 values)."""
    n = gains.size
    if n < 2:
        return math.nan, math.nan
    mean, sd = float(gains.mean()), float(gains.std(ddof=1))
    half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return mean - half, mean + half
