"""What a claim's final accuracy says beside its effect: the workload's target, and the cost.

* **The workload's own target.** A qualitative claim ("reduces the communication overhead") is
  judged against a baseline, which may itself fall short; so the method's mean final test
  accuracy is also held to its workload's ``target_accuracy`` (the effective config), and a
  method below it is NOT REPRODUCED, with the numbers in the detail (:func:`below_target`).
* **The accuracy beside a speed-up.** A claim judged on a time, bytes or samples to target
  carries the method's and its comparator's mean final test accuracy (:func:`final_accuracies`),
  so that an accuracy cost shows beside the gain.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from psml_core.analysis.claim_result import ClaimResult
from psml_core.analysis.resolution import TO_TARGET

__all__ = ["below_target", "final_accuracies", "is_to_target"]


def _mean_accuracy(rows: pd.DataFrame) -> float:
    vals = pd.to_numeric(rows.get("final_test_accuracy"), errors="coerce").dropna()
    return float(vals.mean()) if len(vals) else math.nan


def _scenario_rows(runs: pd.DataFrame, meas: dict[str, Any], scenario: str) -> pd.DataFrame:
    sel = runs[runs["scenario"] == scenario]
    if meas.get("workload"):
        sel = sel[sel["workload"] == meas["workload"]]
    return sel


def below_target(
    claim: dict[str, Any], runs: pd.DataFrame, scenarios: list[str], config: dict[str, Any] | None
) -> str:
    """Where the method's mean final accuracy is below its workload's target ("" nowhere).

    Args:
        claim: The claim (its ``measure`` names the method and may fix a workload).
        runs: The runs (restricted to the claim's experiment's workloads, no diverged one).
        scenarios: The claim's fixed scenarios; each is checked.
        config: The effective config (``workloads.<name>.target_accuracy``); None: no check.
    """
    meas = claim["measure"]
    workloads = (config or {}).get("workloads") or {}
    notes = []
    for sc in scenarios:
        sel = _scenario_rows(runs, meas, sc)
        mine = sel[sel["method"] == meas["method"]]
        for wl, rows in mine.groupby(mine["workload"].astype(str), sort=True):
            target = (workloads.get(wl) or {}).get("target_accuracy")
            acc = _mean_accuracy(rows)
            if isinstance(target, int | float) and math.isfinite(acc) and acc < float(target):
                notes.append(
                    f"the method's mean final test accuracy {acc:.3g} ({len(rows)} seed(s), "
                    f"{sc}) is below the target {float(target):.3g} of its workload {wl}"
                )
    return "; ".join(notes)


def is_to_target(claim: dict[str, Any]) -> bool:
    """Whether the claim is judged on a time, bytes or samples to target (its first metric)."""
    return claim["measure"]["metrics"][0] in TO_TARGET


def final_accuracies(
    claim: dict[str, Any], res: ClaimResult, runs: pd.DataFrame
) -> tuple[float, float]:
    """``(method, comparator)`` mean final test accuracy of a to-target claim (NaN: none).

    The comparator is the one that decided the verdict: the named (or strongest) baseline in
    the deciding scenario, or, for a qualitative claim, the best single configuration chosen
    in each scenario (the mean over scenarios of each side's mean over seeds).
    """
    meas = claim["measure"]
    if res.kind == "qualitative":
        pairs = [(m["scenario"], m["strongest"]) for m in res.per_metric
                 if m.get("role") == "primary"]  # fmt: skip
    else:
        pairs = [(res.scenario, res.baseline)] if res.scenario and res.baseline else []
    ours, theirs = [], []
    for sc, base in pairs:
        sel = _scenario_rows(runs, meas, sc)
        ours.append(_mean_accuracy(sel[sel["method"] == meas["method"]]))
        theirs.append(_mean_accuracy(sel[sel["method"] == base]))

    def mean(xs: list[float]) -> float:
        finite = [x for x in xs if math.isfinite(x)]
        return sum(finite) / len(finite) if finite else math.nan

    return mean(ours), mean(theirs)
