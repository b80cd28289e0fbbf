"""The resolution a claim is measured at: the time to target's grid and the test set's size.

A time to target is only known to the evaluation grid: a run that holds its target between
two evaluations is credited at the later one. A grid step of 20 iterations on a baseline that
reaches its target in 100 adds up to 20% to either side of a ratio. So every claim judged on
a time (or bytes, or samples) to target states its grid step as a share of the dense
baseline's iterations to target; a share above :data:`GRID_SHARE` is coarser than the effects
psml judges and the text says so. Every claim with an accuracy states the test set's size, since
one test sample is the smallest accuracy difference it can see.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from psml_core.analysis.regime import reference_method

__all__ = ["GRID_SHARE", "TO_TARGET", "grid_share", "resolution_text"]

GRID_SHARE = 0.02
"""The largest grid step, as a share of the dense baseline's iterations to target."""
TO_TARGET = frozenset({"time_to_target_s", "bytes_to_target", "samples_to_target"})


def _num(rows: pd.DataFrame, col: str) -> pd.Series:
    if col not in rows:
        return pd.Series(dtype=float)
    return pd.to_numeric(rows[col], errors="coerce").dropna()


def grid_share(runs: pd.DataFrame, claim: dict[str, Any], scenarios: list[str]) -> float:
    """The grid step over the dense reference's mean iterations to target (NaN if unknown)."""
    sel = runs[runs["scenario"].isin(scenarios)]
    ref = reference_method(claim, set(sel["method"]))
    if ref is None:
        return math.nan
    rows = sel[sel["method"] == ref]
    step, reach = _num(rows, "eval_every"), _num(rows, "iteration_to_target")
    if step.empty or reach.empty:
        return math.nan
    return float(step.max()) / (float(reach.mean()) + 1.0)


def resolution_text(claim: dict[str, Any], runs: pd.DataFrame, scenarios: list[str]) -> str:
    """One sentence on the claim's resolution, or "" where the runs do not say it."""
    metrics = list(claim["measure"]["metrics"])
    sel = runs[runs["scenario"].isin(scenarios)]
    parts = []
    if metrics[0] in TO_TARGET:
        ref = reference_method(claim, set(sel["method"]))
        rows = sel[sel["method"] == ref] if ref else sel.iloc[0:0]
        step, reach = _num(sel, "eval_every"), _num(rows, "iteration_to_target")
        if not step.empty:
            text = f"time to target on a grid of {int(step.max())} iteration(s)"
            share = grid_share(runs, claim, scenarios)
            if math.isfinite(share):
                text += (
                    f", {100 * share:.2g}% of {ref}'s {reach.mean() + 1:.0f} iterations to target"
                )
                if share > GRID_SHARE:
                    text += f" (coarser than the {100 * GRID_SHARE:g}% the effects need)"
            parts.append(text)
    if "final_test_accuracy" in metrics:
        n = _num(sel, "test_samples")
        if not n.empty:
            parts.append(f"{int(n.min())} test samples (one is {100 / n.min():.2g}% accuracy)")
    return "; ".join(parts)
