"""A tier's experiments as grids of runs: which runs belong to which experiment.

An experiment (``experiments.<name>`` in the config) is a grid of its own: its methods x its
workloads x its scenarios x its seeds, each defaulting to the tier's. The comparison stage
aggregates each experiment over its own grid, and the report selects the same runs, so both
read one definition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

__all__ = ["ALL_RUNS", "experiment_grid", "experiment_runs"]

ALL_RUNS = "*"
"""The ``experiment`` of aggregate rows over every run of the tier, whatever experiment."""


def experiment_grid(experiment: Mapping[str, Any], ex: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The experiment's methods, workloads, scenarios and seeds (empty: the tier's).

    Args:
        experiment: The effective configuration (the tier's workloads, scenarios, seeds).
        ex: One experiment's block.
    """
    workloads = ex.get("workloads") or sorted(experiment.get("workloads") or {})
    scenarios = ex.get("scenarios") or sorted(experiment.get("scenarios") or {})
    return {
        "methods": [str(m) for m in ex.get("methods") or []],
        "workloads": [str(w) for w in workloads],
        "scenarios": [str(s) for s in scenarios],
        "seeds": [int(s) for s in ex.get("seeds") or experiment.get("seeds") or []],
    }


def experiment_runs(
    runs: pd.DataFrame, experiment: Mapping[str, Any], ex: Mapping[str, Any]
) -> pd.DataFrame:
    """The rows of ``runs`` that belong to experiment ``ex`` of the tier ``experiment``."""
    g = experiment_grid(experiment, ex)
    keep = (
        runs["method"].astype(str).isin(g["methods"])
        & runs["workload"].astype(str).isin(g["workloads"])
        & runs["scenario"].astype(str).isin(g["scenarios"])
        & runs["seed"].astype(int).isin(g["seeds"])
    )
    return runs[keep].reset_index(drop=True)
