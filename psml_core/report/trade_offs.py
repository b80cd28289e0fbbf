"""A paper's reported tables beside ours, and the helpers the sweep tables share.

A paper file may hold the tables the paper reports (``tables:`` in
``workflow/schemas/paper.schema.yaml``): each row the paper's values and the recipe of ours that
corresponds. :func:`reported_table` prints every row twice, the paper's line (its values only,
read from the paper file) and ours (means over the seeds of that recipe's runs in the table's
experiment, read from the runs table only), so a reader sees the whole reported trend, not the
one row a claim picks.

The sweep tables (:mod:`psml_core.report.sweeps`) use this module's formatting of means
over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from psml_core.analysis.experiments import experiment_grid
from psml_core.errors import ConfigError
from psml_core.report.format import (
    DASH,
    clock_phrase,
    fmt_bytes,
    fmt_percent,
    fmt_seconds,
    fmt_value,
    sig,
    time_to_target_cell,
)
from psml_core.report.tables import Table

__all__ = [
    "finite_mean",
    "fmt_accuracy",
    "run_column",
    "runs_of",
    "scenario_pairs",
    "NOT_RUN",
    "paper_settings",
    "reported_table",
]

NOT_RUN = "not run"
_NBSP = "\u00a0"
_MINUS = "\u2212"
# The paper's column kinds that have a counterpart of ours (paper.schema.yaml: columns.quantity).
_QUANTITIES = ("bytes", "final_test_accuracy", "total_time_s")


# --------------------------------------------------------------------------- formatting


def _paper_number(v: Any) -> str:
    """A paper's value as written in the paper file: ``0.0`` stays "0.0", ``621`` "621"."""
    if v is None:
        return DASH
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else DASH
    return str(v).strip() or DASH


def _with_unit(text: str, unit: str | None) -> str:
    return text if not unit or text == DASH else f"{text}{_NBSP}{unit}"


def _change(value: float, reference: float) -> str:
    """Change against the reference as a signed percentage: ``"−38.4 %"``; "" if undefined."""
    if not (math.isfinite(value) and math.isfinite(reference)) or reference == 0:
        return ""
    pct = 100.0 * (value / reference - 1.0)
    sign = _MINUS if pct < 0 else "+"
    return f" ({sign}{sig(abs(pct))}{_NBSP}%)" if pct != 0 else f" (0{_NBSP}%)"


def fmt_accuracy(values: pd.Series, percent: bool) -> str:
    """Mean accuracy with its range over seeds: ``"0.932 [0.921, 0.940]"`` (or in %)."""
    v = pd.to_numeric(values, errors="coerce").dropna().astype(float)
    if v.empty:
        return DASH
    if percent:
        text = fmt_percent(v.mean())
        return text if len(v) == 1 else f"{text} [{sig(v.min() * 100)}, {sig(v.max() * 100)}]"
    text = sig(float(v.mean()))
    return text if len(v) == 1 else f"{text} [{sig(float(v.min()))}, {sig(float(v.max()))}]"


def finite_mean(values: pd.Series) -> float:
    """The mean, or NaN when any value is missing (a quantity the runs do not all record)."""
    v = pd.to_numeric(values, errors="coerce").astype(float)
    return float(v.mean()) if len(v) and v.notna().all() else math.nan


def run_column(runs: pd.DataFrame, name: str) -> pd.Series:
    """Column ``name`` of the runs as floats (NaN where missing or absent)."""
    if name in runs.columns:
        return pd.to_numeric(runs[name], errors="coerce").astype(float)
    return pd.Series(math.nan, index=runs.index, dtype=float)


def _bytes(runs: pd.DataFrame, kind: str, direction: str = "both") -> pd.Series:
    """Per run: wire bytes (``wire``) or the same payloads Snappy-compressed (``lossless``).

    ``direction``: ``both`` (up + down) or ``up`` (what the workers send).
    """
    up = run_column(runs, "lossless_bytes_up" if kind == "lossless" else "bytes_up")
    if direction == "up":
        return up
    if kind == "lossless":
        return up + run_column(runs, "lossless_bytes_down")
    return run_column(runs, "bytes_total")


# --------------------------------------------------------------------------- experiments


def runs_of(runs: pd.DataFrame, grid: Mapping[str, list], methods: Sequence[str]) -> pd.DataFrame:
    """The runs of ``methods`` on the experiment's workloads, scenarios and seeds."""
    keep = (
        runs["method"].astype(str).isin(list(methods))
        & runs["workload"].astype(str).isin(grid["workloads"])
        & runs["scenario"].astype(str).isin(grid["scenarios"])
        & runs["seed"].astype(int).isin(grid["seeds"])
    )
    return runs[keep]


def scenario_pairs(sub: pd.DataFrame, grid: Mapping[str, list]) -> list[tuple[str, str]]:
    """The experiment's (workload, scenario) pairs that hold runs, in the experiment's order."""
    have = set(zip(sub["workload"].astype(str), sub["scenario"].astype(str), strict=True))
    return [(w, s) for w in grid["workloads"] for s in grid["scenarios"] if (w, s) in have]


# --------------------------------------------------------------------------- reported tables


def _check_table(spec: Mapping[str, Any], paper_file: str) -> None:
    where = f"invalid paper file {paper_file!r}: table {spec['id']!r}"
    ids = [str(c["id"]) for c in spec["columns"]]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{where}: column ids must be unique, got {ids}")
    for q in _QUANTITIES:
        n = sum(1 for c in spec["columns"] if c.get("quantity") == q)
        if n > 1:
            raise ConfigError(f"{where}: {n} columns have quantity {q!r}; give it to one")
    for i, row in enumerate(spec["rows"]):
        unknown = sorted(set(row["values"]) - set(ids))
        if unknown:
            raise ConfigError(
                f"{where}: key 'rows[{i}].values' names columns {unknown} the table does not "
                f"have; its columns: {', '.join(ids)}"
            )


def _setting(spec: Mapping[str, Any], row: Mapping[str, Any]) -> str:
    """The row's setting as the paper prints it (``θ0 = 0.2``) and our reading of it, if any."""
    cols = [c for c in spec["columns"] if c.get("quantity") == "setting"]
    parts = [
        f"{c['name']} = {_with_unit(_paper_number(row['values'].get(c['id'])), c.get('unit'))}"
        for c in cols
    ]
    if row.get("label"):
        parts.append(str(row["label"]))
    return ", ".join(parts) or f"row {row['method']}"


def paper_settings(spec: Mapping[str, Any]) -> dict[str, str]:
    """Recipe -> the paper's setting of the row it stands for (``θ0 = 0.2``), for one table."""
    return {str(row["method"]): _setting(spec, row) for row in spec["rows"]}


def _paper_line(
    spec: Mapping[str, Any], row: Mapping[str, Any], first: Mapping[str, Any]
) -> list[str]:
    values = row["values"]
    by_q = {c.get("quantity"): c for c in spec["columns"] if c.get("quantity")}
    cells = []
    for q in _QUANTITIES:
        col = by_q.get(q)
        if col is None:
            cells.append(DASH)
            continue
        v = values.get(col["id"])
        text = _with_unit(_paper_number(v), col.get("unit"))
        if q == "bytes" and row is not first and isinstance(v, int | float):
            ref = first["values"].get(col["id"])
            if isinstance(ref, int | float):
                text += _change(float(v), float(ref))
        cells.append(text)
    others = [
        f"{c['name']}: {_with_unit(_paper_number(values.get(c['id'])), c.get('unit'))}"
        for c in spec["columns"]
        if not c.get("quantity") and c["id"] in values
    ]
    return ["paper", *cells, DASH, "; ".join(others) or DASH]


def _our_line(
    source: str,
    runs: pd.DataFrame,
    kind: str,
    reference: float,
    percent: bool,
    direction: str = "both",
) -> list[str]:
    if runs.empty:
        return [source, NOT_RUN, DASH, DASH, DASH, DASH]
    nbytes = finite_mean(_bytes(runs, kind, direction))
    if math.isnan(nbytes):
        bytes_cell = "not measured" if kind == "lossless" else DASH
    else:
        bytes_cell = fmt_bytes(nbytes) + (f"{_NBSP}Snappy" if kind == "lossless" else "")
        bytes_cell += _change(nbytes, reference)
    return [
        f"{source} ({len(runs)} seed{'' if len(runs) == 1 else 's'})",
        bytes_cell,
        fmt_accuracy(runs["final_test_accuracy"], percent),
        fmt_seconds(finite_mean(runs["total_time_s"])),
        time_to_target_cell(runs["time_to_target_s"]),
        DASH,
    ]


def reported_table(
    name: str,
    spec: Mapping[str, Any],
    runs: pd.DataFrame,
    experiment: Mapping[str, Any],
    paper_file: str,
) -> Table:
    """A paper's reported table, each of its rows beside the same row of ours.

    Per row of the paper file, in order: the paper's line (its bytes column with the change
    against the paper's first row, final accuracy, time, and its other columns as reported),
    then ours per workload · scenario of the table's experiment, from ``runs`` only: mean
    wire bytes over seeds (the Snappy sizes where the row's ``measure.bytes`` is ``lossless``)
    with the change against the first row's recipe, final accuracy mean [min, max], mean total
    time and time to target with the censored runs counted. A row whose recipe has no runs
    says "not run".

    Args:
        name: The table's file stem.
        spec: One entry of the paper file's ``tables``.
        runs: The runs table (all runs; the experiment's are picked here).
        experiment: The effective configuration (tier, experiments, seeds, ...).
        paper_file: The paper file's name, for messages and the caption.

    Raises:
        ConfigError: A row names a column the table does not have, or two columns claim the
            same quantity.
    """
    _check_table(spec, paper_file)
    ex_name = str(spec["experiment"])
    ex = (experiment.get("experiments") or {}).get(ex_name)
    grid = experiment_grid(experiment, ex or {})
    acc_col = next((c for c in spec["columns"] if c.get("quantity") == "final_test_accuracy"), {})
    percent = acc_col.get("unit") == "%"
    rows_spec = list(spec["rows"])
    direction = str(spec.get("bytes_direction", "both"))
    first = rows_spec[0]
    first_kind = str((first.get("measure") or {}).get("bytes", "wire"))
    mine = runs_of(runs, grid, [str(r["method"]) for r in rows_spec]) if ex else runs.iloc[:0]
    pairs = scenario_pairs(mine, grid)
    several = len(pairs) > 1
    rows = []
    for row in rows_spec:
        method = str(row["method"])
        kind = str((row.get("measure") or {}).get("bytes", "wire"))
        head = f"{_setting(spec, row)} → {method}"
        rows.append([head, *_paper_line(spec, row, first)])
        if not pairs:
            rows.append([head, "ours", NOT_RUN, DASH, DASH, DASH, DASH])
            continue
        for w, s in pairs:
            at = mine[(mine["workload"].astype(str) == w) & (mine["scenario"].astype(str) == s)]
            ref_runs = at[at["method"].astype(str) == str(first["method"])]
            reference = (
                finite_mean(_bytes(ref_runs, first_kind, direction))
                if not ref_runs.empty
                else math.nan
            )
            source = f"ours · {w} · {s}" if several else "ours"
            rows.append(
                [head, *_our_line(source, at[at["method"].astype(str) == method], kind,
                                  reference if row is not first else math.nan, percent,
                                  direction)]
            )  # fmt: skip
    caption = _reported_caption(spec, mine, pairs, ex_name, ex, experiment, paper_file, direction)
    return Table(
        name,
        caption,
        ["Row", "Source", "Bytes", "Final accuracy", "Time", "Time to target", "Also reported"],
        rows,
        align=["left", "left", "right", "right", "right", "right", "left"],
        widths=["auto", "auto", "auto", "auto", "auto", "auto", 1],
        group=True,
    )


def _reported_caption(
    spec: Mapping[str, Any],
    mine: pd.DataFrame,
    pairs: list[tuple[str, str]],
    ex_name: str,
    ex: Mapping[str, Any] | None,
    experiment: Mapping[str, Any],
    paper_file: str,
    direction: str,
) -> str:
    """The caption of a paper's reported table: its source, our runs, and each column's sense."""
    by_q = {c.get("quantity"): c for c in spec["columns"] if c.get("quantity")}

    def paper_col(q: str, fallback: str) -> str:
        col = by_q.get(q)
        if col is None:
            return f"{fallback} (not reported)"
        return f"the paper's {col['name']}" + (f" ({col['unit']})" if col.get("unit") else "")

    clock = clock_phrase(mine["clock"]) if not mine.empty else "simulated"
    settings = ", ".join(f"{w} · {s}" for w, s in pairs)
    where = (
        f"experiment {ex_name}" + (f" ({settings})" if pairs else "")
        if ex
        else f"experiment {ex_name}, which the {fmt_value(experiment.get('tier'))} tier does not "
        "define"
    )
    setup = " ".join(str(spec.get("setup") or "").split()).rstrip(".")
    note = " ".join(str(spec.get("note") or "").split())
    return (
        f"{spec['title']}. Paper: {spec['source']}" + (f" ({setup})" if setup else "")
        + f", values from {paper_file}; ours: {where}, from the runs table. Each heading names "
        "the paper's row and our recipe for it. "
        f"Bytes: {paper_col('bytes', 'bytes')} / our wire bytes ("
        + ("up: what the workers send" if direction == "up" else "up + down")
        + ", all workers and iterations; “Snappy”: the runs' lossless Snappy sizes), in "
        "brackets the change against the first row. "
        f"Final accuracy: {paper_col('final_test_accuracy', 'accuracy')} / ours, mean "
        "[min, max] over seeds. "
        f"Time: {paper_col('total_time_s', 'time')}, its own clock / our total time on the "
        f"{clock} clock. Time to target (ours only): over the seeds that held the target to the "
        "end of the run, censored seeds counted. “not run”: no run of the recipe in this "
        "experiment; “not measured”: the runs record no lossless sizes."
        + (f" {note}" if note else "")
    )  # fmt: skip


# --------------------------------------------------------------------------- sweeps
