"""Pairing a claim's method with the strongest of a set of baselines, scenario by scenario.

The verdict row, the robustness row and the codec-free sensitivity row (:mod:`.second_rows`)
all apply this one rule; they differ only in the baselines and the scenarios they are given.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from psml_core.analysis.claim_result import VERDICT_RANK
from psml_core.analysis.gains import Gains, gains_of
from psml_core.analysis.judge import AccuracyNoise, binomial_log_se, judge

__all__ = ["Outcome", "accuracy_noise", "strongest_pairing", "worst"]

# (verdict, scenario, gains against the strongest baseline, detail, the judge's numbers)
Outcome = tuple[str, str, Gains, str, dict[str, float]]


def accuracy_noise(
    runs: pd.DataFrame, meas: dict[str, Any], baseline: str, scenario: str
) -> AccuracyNoise:
    """The test set's noise of the method's accuracy over ``baseline``'s under ``scenario``.

    The binomial standard error of the log ratio (:func:`.judge.binomial_log_se`) at the two
    sides' mean final test accuracies on the smaller of their test sets; NaN where the runs do
    not record their test set.
    """
    sel = runs[runs["scenario"] == scenario]
    if meas.get("workload"):
        sel = sel[sel["workload"] == meas["workload"]]
    mine, theirs = sel[sel["method"] == meas["method"]], sel[sel["method"] == baseline]
    if mine.empty or theirs.empty or "test_samples" not in sel:
        return AccuracyNoise()
    n = pd.to_numeric(pd.concat([mine, theirs])["test_samples"], errors="coerce").min()
    acc = [float(pd.to_numeric(r["final_test_accuracy"], errors="coerce").mean())
           for r in (mine, theirs)]  # fmt: skip
    return AccuracyNoise(test_se=binomial_log_se((acc[0], acc[1]), float(n)))


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
        noise = None
        if claim["reported"]["kind"] == "ratio" and metric == "final_test_accuracy":
            noise = accuracy_noise(runs, meas, g.baseline, sc)
        verdict, detail, nums = judge(claim, g, metric, noise)
        outcomes.append((verdict, sc, g, detail, nums))
    return outcomes, missing


def worst(outcomes: list[Outcome]) -> Outcome:
    """The deciding scenario's outcome: the worst verdict (ties: the first listed)."""
    return min(outcomes, key=lambda o: VERDICT_RANK[o[0]])
