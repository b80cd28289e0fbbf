"""Pairing a claim's method with the strongest of a set of baselines, scenario by scenario.

The verdict row, the robustness row and the codec-free sensitivity row (:mod:`.second_rows`)
all apply this one rule; they differ only in the baselines and the scenarios they are given.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from psml_core.analysis.claim_result import HIGHER_IS_BETTER, VERDICT_RANK
from psml_core.analysis.gains import Gains, gains_of
from psml_core.analysis.judge import accuracy_step_gain, judge

__all__ = ["Outcome", "accuracy_step", "strongest_pairing", "worst"]

# (verdict, scenario, gains against the strongest baseline, detail, the judge's numbers)
Outcome = tuple[str, str, Gains, str, dict[str, float]]


def accuracy_step(runs: pd.DataFrame, baseline: str, scenario: str) -> float:
    """One test sample as a gain of an accuracy ratio against ``baseline`` (NaN if unknown)."""
    rows = runs[(runs["method"] == baseline) & (runs["scenario"] == scenario)]
    if rows.empty or "test_samples" not in rows:
        return math.nan
    n = pd.to_numeric(rows["test_samples"], errors="coerce").min()
    acc = pd.to_numeric(rows["final_test_accuracy"], errors="coerce").mean()
    return accuracy_step_gain(float(n), float(acc))


def strongest_pairing(
    claim: dict[str, Any], baselines: list[str | None], scenarios: list[str], runs: pd.DataFrame
) -> tuple[list[Outcome], list[str]]:
    """Per scenario, the verdict against the strongest of ``baselines``; and what is missing."""
    meas = claim["measure"]
    metric = meas["metrics"][0]
    outcomes: list[Outcome] = []
    missing: list[str] = []
    for sc in scenarios:
        here = runs["scenario"].astype(str) == sc
        if not (here & (runs["method"].astype(str) == meas["method"])).any():
            missing.append(f"{meas['method']} under {sc}")
            continue
        options = []
        for b in baselines:
            got = gains_of(runs, meas, metric, b, sc)
            if got is None:
                missing.append(f"{b or meas['method']} under {sc}")
                continue
            options.append(got)
        if not options:
            continue
        # The strongest: the least favourable to the method (bounds count as values).
        g = min(options, key=lambda o: o.mean if math.isfinite(o.mean) else -math.inf)
        step = math.nan
        if claim["reported"]["kind"] == "ratio" and metric in HIGHER_IS_BETTER:
            step = accuracy_step(runs, g.baseline, sc)
        verdict, detail, nums = judge(claim, g, metric, step)
        outcomes.append((verdict, sc, g, detail, nums))
    return outcomes, missing


def worst(outcomes: list[Outcome]) -> Outcome:
    """The deciding scenario's outcome: the worst verdict (ties: the first listed)."""
    return min(outcomes, key=lambda o: VERDICT_RANK[o[0]])
