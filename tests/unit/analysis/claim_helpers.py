"""Synthetic runs tables and claims for the verdict tests (imported by the analysis tests)."""

from __future__ import annotations

import math

import pandas as pd

from psml_core.analysis.claims import evaluate_claims

__all__ = ["accuracy_runs", "claim", "qual_runs", "runs_table", "seeds", "verdict"]


def runs_table(rows):
    base = {"workload": "w", "compute_s": 1.0, "comm_s": 1.0, "wait_s": 0.0,
            "remote_bytes_up": 0, "remote_bytes_down": 0, "final_test_accuracy": 0.9,
            "time_to_target_s": math.nan, "total_time_s": 1.0, "bytes_total": 1,
            "bytes_to_target": math.nan, "samples_processed": 1,
            "samples_to_target": math.nan}  # fmt: skip
    return pd.DataFrame([{**base, **r} for r in rows])


def claim(kind, value=None, baseline="base", metrics=("bytes_total",), scenarios=("a",),
          tolerance=None, **extra):  # fmt: skip
    rep = {"kind": kind, "up_to": extra.pop("up_to", False)}
    if value is not None:
        rep["value"] = value
    out = {"id": "c", "statement": "s", "source": "abs", "setup": "x", "reported": rep,
           "measure": {"experiment": "e", "method": "m", "baseline": baseline,
                       "metrics": list(metrics), "scenarios": list(scenarios)},
           **extra}  # fmt: skip
    if tolerance is not None:
        out["tolerance"] = tolerance
    return out


def verdict(c, runs, config=None, oracles=None):
    return evaluate_claims({"p": {"claims": [c]}}, runs, {"e": {}}, config=config,
                           oracles=oracles)[0]  # fmt: skip


def seeds(method_values, base_values, metric="bytes_total", scenario="a", base="base"):
    return runs_table(
        [{"method": "m", "seed": s, "scenario": scenario, metric: v}
         for s, v in enumerate(method_values)]
        + [{"method": base, "seed": s, "scenario": scenario, metric: v}
           for s, v in enumerate(base_values)]
    )  # fmt: skip


def accuracy_runs(ours, theirs, n_test=360):
    runs = seeds(ours, theirs, metric="final_test_accuracy")
    runs["test_samples"] = n_test
    return runs


def qual_runs(method, baselines, n_test=360):
    """method: {metric: [per seed]}; baselines: name -> {metric: [per seed]}."""
    rows = []
    for name, values in [("m", method), *baselines.items()]:
        for s in range(len(next(iter(values.values())))):
            rows.append({"method": name, "seed": s, "scenario": "a", "test_samples": n_test,
                         **{k: v[s] for k, v in values.items()}})  # fmt: skip
    return runs_table(rows)
