"""Sweep tables: a method's trade-off as one setting (its ratio, threshold, staleness) varies.

A tier experiment with a ``sweep`` (one derived recipe ``<method>__<label>`` per value) gets
:func:`sweep_table`: per swept value, what it means (``m = d/16``), the remote and total wire
bytes, final accuracy and time to target, beside the experiment's other methods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from psml_core.analysis.experiments import experiment_grid
from psml_core.config import sweep_label
from psml_core.report.format import (
    DASH,
    clock_phrase,
    fmt_bytes,
    fmt_value,
    time_to_target_cell,
)
from psml_core.report.tables import Table
from psml_core.report.trade_offs import (
    NOT_RUN,
    finite_mean,
    fmt_accuracy,
    run_column,
    runs_of,
    scenario_pairs,
)

__all__ = [
    "sweep_names",
    "sweep_table",
    "swept_value",
]


def sweep_names(ex: Mapping[str, Any]) -> list[tuple[str, float]]:
    """The sweep's derived recipes ``<method>__<label>`` with their values, in value order."""
    sweep = ex.get("sweep") or {}
    if not sweep:
        return []
    values = [float(v) for v in sweep["values"]]
    labels = list(sweep.get("labels") or [])
    if not labels:
        labels = [sweep_label(str(sweep["params"][0]), v) for v in values]
    return [(f"{sweep['method']}__{lb}", v) for lb, v in zip(labels, values, strict=True)]


def swept_value(params: Sequence[str], value: float) -> str:
    """What a swept value means: ``m = d/16`` for a hashing ratio, else ``theta0 = 0.02``."""
    param = str(params[0])
    if param.endswith("hashing.ratio") and value > 0:
        inverse = 1.0 / value
        if value == 1:
            return "m = d"
        if abs(inverse - round(inverse)) < 1e-9 * inverse:
            return f"m = d/{round(inverse)}"
        return f"m = {fmt_value(value)} d"
    return f"{param.rsplit('.', 1)[-1]} = {fmt_value(float(value))}"


def sweep_table(
    name: str,
    ex_name: str,
    experiment: Mapping[str, Any],
    runs: pd.DataFrame,
    paper_rows: Mapping[str, str] | None = None,
) -> Table | None:
    """The trade-off of an experiment's sweep, beside the experiment's other methods.

    Per workload · scenario, one row per swept value (its recipe, what the value means, and
    the paper's row it stands for when a paper table maps it), then one per other method:
    seeds, remote bytes (up + down that crossed the network), all wire bytes, final accuracy
    mean [min, max] and time to target with censored runs counted. Read from ``runs`` only.

    Args:
        name: The table's file stem.
        ex_name: The experiment's name in the tier.
        experiment: The effective configuration.
        runs: The runs table.
        paper_rows: Recipe -> the paper's setting it stands for (:func:`paper_settings`).

    Returns:
        The table, or None when the experiment has no sweep or no runs.
    """
    ex = (experiment.get("experiments") or {}).get(ex_name) or {}
    derived = sweep_names(ex)
    if not derived:
        return None
    sweep = ex["sweep"]
    grid = experiment_grid(experiment, ex)
    names = [m for m, _ in derived]
    others = [m for m in grid["methods"] if m not in names]
    sub = runs_of(runs, grid, [*names, *others])
    if sub.empty:
        return None
    paper_rows = paper_rows or {}
    order = [(m, swept_value(sweep["params"], v)) for m, v in derived] + [(m, DASH) for m in others]
    rows = []
    for w, s in scenario_pairs(sub, grid):
        at = sub[(sub["workload"].astype(str) == w) & (sub["scenario"].astype(str) == s)]
        for method, meaning in order:
            mine = at[at["method"].astype(str) == method]
            if method in paper_rows and meaning != DASH:
                meaning = f"{meaning} (paper: {paper_rows[method]})"
            if mine.empty:
                rows.append([f"{w} · {s}", method, meaning, "0", NOT_RUN, DASH, DASH, DASH])
                continue
            rows.append(_sweep_row(f"{w} · {s}", method, meaning, mine))
    caption = _sweep_caption(ex_name, sweep, sub)
    return Table(
        name,
        caption,
        ["Setting", "Recipe", "Swept value", "Seeds", "Remote bytes", "Bytes", "Final accuracy",
         "Time to target"],
        rows,
        align=["left", "left", "left", "right", "right", "right", "right", "right"],
        widths=["auto", "auto", 1, "auto", "auto", "auto", "auto", "auto"],
        group=True,
    )  # fmt: skip


def _sweep_row(setting: str, method: str, meaning: str, mine: pd.DataFrame) -> list[str]:
    """One recipe's row of a sweep table from its runs."""
    remote = run_column(mine, "remote_bytes_up") + run_column(mine, "remote_bytes_down")
    return [
        setting,
        method,
        meaning,
        str(len(mine)),
        fmt_bytes(finite_mean(remote)),
        fmt_bytes(finite_mean(run_column(mine, "bytes_total"))),
        fmt_accuracy(mine["final_test_accuracy"], percent=True),
        time_to_target_cell(mine["time_to_target_s"]),
    ]


def _sweep_caption(ex_name: str, sweep: Mapping[str, Any], sub: pd.DataFrame) -> str:
    """A sweep table's caption: the sweep, and what each column means."""
    params = ", ".join(str(p) for p in sweep["params"])
    return (
        f"Trade-off of experiment {ex_name}'s sweep, grouped by workload · scenario: "
        f"{sweep['method']} with {params} set to each value (one recipe per value, "
        f"{sweep['method']}__<label>), beside the experiment's other methods (– under Swept "
        "value). Means over seeds: remote bytes are the wire bytes that crossed the network "
        "(up + down, all workers and iterations; a colocated shard's are not remote), bytes all "
        "wire bytes; final test accuracy [min, max]; time to target on the "
        f"{clock_phrase(sub['clock'])} clock, averaged over the seeds that held the target to "
        "the end of the run, the others counted as censored. “not run”: no run of that recipe "
        "in the runs table."
        + (
            " m is the number of hashing buckets, d the raw feature count."
            if str(sweep["params"][0]).endswith("hashing.ratio")
            else ""
        )
    )
