"""Collect run summaries into one table and aggregate them over seeds.

The runs table (``runs.csv``) is the report's single source for per-run numbers: one row per
run, the summary's top-level scalars plus the provenance the report prints (config hash, git
commit and dirty flag, package versions, data checksums).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from psml_core.analysis.experiments import ALL_RUNS, experiment_runs
from psml_core.atomic import atomic_path
from psml_core.config import validate
from psml_core.errors import ConfigError, DataError

__all__ = [
    "AGGREGATE_KEYS",
    "AGGREGATE_METRICS",
    "OPTIONAL_COLUMNS",
    "PLACEMENT_COLUMNS",
    "PROVENANCE_COLUMNS",
    "RUN_KEYS",
    "SUMMARY_COLUMNS",
    "aggregate_experiments",
    "aggregate_runs",
    "collect_runs",
    "read_aggregate_csv",
    "read_runs_csv",
    "write_runs_csv",
]

# The summary's top-level scalars, in the schema's order (workflow/schemas/summary.schema.yaml).
SUMMARY_COLUMNS: tuple[str, ...] = (
    "run_id", "tier", "backend", "clock", "seed", "method", "workload", "scenario", "dataset",
    "workers", "shards", "iterations", "final_test_accuracy", "final_test_loss",
    "final_train_loss", "target_accuracy", "time_to_target_s", "target_censored",
    "first_target_s", "bytes_to_target", "samples_to_target", "samples_processed",
    "total_time_s", "bytes_up", "bytes_down", "bytes_total", "remote_bytes_up",
    "remote_bytes_down", "compute_s", "comm_s", "wait_s", "codec_s", "lossless_bytes_up",
    "lossless_bytes_down", "status", "status_reason", "test_samples", "eval_every",
    "iteration_to_target",
)  # fmt: skip

# Summary columns that older summaries and runs tables lack: read as missing (NaN), not refused.
OPTIONAL_COLUMNS: tuple[str, ...] = (
    "lossless_bytes_up", "lossless_bytes_down", "status", "status_reason", "test_samples",
    "eval_every", "iteration_to_target",
)  # fmt: skip
_NUMERIC_OPTIONAL = (
    "lossless_bytes_up", "lossless_bytes_down", "test_samples", "eval_every",
    "iteration_to_target",
)  # fmt: skip

# Taken from ``provenance``; ``versions`` and ``data_sha256`` are canonical JSON strings so that
# one CSV column holds them whatever packages or files a run lists.
PROVENANCE_COLUMNS: tuple[str, ...] = (
    "config_hash", "git_commit", "git_dirty", "wall_clock_s", "versions", "data_sha256",
)  # fmt: skip

# The dynamic placement's decisions (``placement_decisions``), summarised per run; 0 and NaN
# for static placements.
PLACEMENT_COLUMNS: tuple[str, ...] = (
    "placement_evaluated", "placement_accepted", "migration_bytes", "placement_best_saving",
)  # fmt: skip

_REL_NOISE = 1e-12
RUN_KEYS: tuple[str, ...] = ("workload", "method", "scenario", "seed")
AGGREGATE_KEYS: tuple[str, ...] = ("workload", "method", "scenario")
AGGREGATE_METRICS: tuple[str, ...] = (
    "final_test_accuracy", "total_time_s", "time_to_target_s", "bytes_up", "bytes_down",
    "bytes_total",
)  # fmt: skip


def _read_summary(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise DataError(f"summary file {str(path)!r} does not exist; run `psml train` for it first")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(
            f"summary file {str(path)!r} is not valid JSON ({exc}); re-run the job that writes it"
        ) from None
    try:
        return validate(raw, "summary", source=f"summary file {str(path)!r}")
    except ConfigError as exc:
        raise DataError(f"{exc}; re-run the job that writes it") from None


def _row(summary: dict[str, Any]) -> dict[str, Any]:
    prov = summary["provenance"]
    row = {col: summary.get(col) if col in OPTIONAL_COLUMNS else summary[col]
           for col in SUMMARY_COLUMNS}  # fmt: skip
    row.update(
        config_hash=prov["config_hash"],
        git_commit=prov["git_commit"],
        git_dirty=prov["git_dirty"],
        wall_clock_s=prov["wall_clock_s"],
        versions=json.dumps(prov["versions"], sort_keys=True, separators=(",", ":")),
        data_sha256=json.dumps(prov["data_sha256"], sort_keys=True, separators=(",", ":")),
    )
    decisions = summary.get("placement_decisions") or []
    moved = [d for d in decisions if d["accepted"]]
    # The best proposal's estimated cut of remote bytes per step (accepted or not).
    cuts = [
        (d["remote_before"] - d["remote_after"]) / d["remote_before"]
        for d in decisions
        if d["remote_before"] > 0
    ]
    row.update(
        placement_evaluated=len(decisions),
        placement_accepted=len(moved),
        migration_bytes=sum(int(d["migration_bytes"]) for d in moved),
        placement_best_saving=max(cuts) if cuts else math.nan,
    )
    # JSON null (target never held: censored) becomes NaN, so the columns stay numeric.
    # So does a lossless size the recipe does not measure.
    for col in ("time_to_target_s", "first_target_s", "bytes_to_target", "samples_to_target",
                "final_test_accuracy", "final_test_loss", "final_train_loss",
                *_NUMERIC_OPTIONAL):  # fmt: skip
        if row[col] is None:
            row[col] = math.nan
    # Summaries from before the divergence test: ok unless their loss says otherwise.
    row["status"] = row["status"] or "ok"
    row["status_reason"] = row["status_reason"] or ""
    return row


def collect_runs(summary_paths: list[Path]) -> pd.DataFrame:
    """Read run summaries into one table, one row per run.

    Args:
        summary_paths: The ``summary.json`` of every run.

    Returns:
        Columns :data:`SUMMARY_COLUMNS`, :data:`PROVENANCE_COLUMNS` and
        :data:`PLACEMENT_COLUMNS`, sorted by
        (workload, method, scenario, seed). ``time_to_target_s`` is NaN for runs that never
        reached their target accuracy.

    Raises:
        DataError: A summary is missing, not JSON, or fails the summary schema (the message
            names the file), or two summaries share a run id.
    """
    rows = []
    seen: dict[str, Path] = {}
    for raw_path in summary_paths:
        path = Path(raw_path)
        row = _row(_read_summary(path))
        if row["run_id"] in seen:
            raise DataError(
                f"summary files {str(seen[row['run_id']])!r} and {str(path)!r} both hold run "
                f"{row['run_id']!r}; pass each run's summary once"
            )
        seen[row["run_id"]] = path
        rows.append(row)
    df = pd.DataFrame(rows, columns=[*SUMMARY_COLUMNS, *PROVENANCE_COLUMNS, *PLACEMENT_COLUMNS])
    return df.sort_values(list(RUN_KEYS), kind="stable", ignore_index=True)


def write_runs_csv(df: pd.DataFrame, path: str | Path) -> None:
    """Write the runs table atomically, byte-identical for identical input.

    Args:
        df: A table from :func:`collect_runs`.
        path: Destination CSV file.
    """
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, float_format="%.10g", lineterminator="\n", encoding="utf-8")


def _read_table(p: Path, what: str) -> pd.DataFrame:
    """A CSV that ``psml compare`` wrote; only empty cells are missing values."""
    if not p.is_file():
        raise DataError(f"{what} {str(p)!r} does not exist; run `psml compare` first")
    try:
        return pd.read_csv(p, keep_default_na=False, na_values=[""], encoding="utf-8")
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise DataError(f"{what} {str(p)!r} is not readable CSV ({exc})") from None


def read_runs_csv(path: str | Path) -> pd.DataFrame:
    """Read a table written by :func:`write_runs_csv`.

    Only empty cells are missing values, so a method or scenario named "NA" or "None" survives.
    A table written before :data:`OPTIONAL_COLUMNS` were recorded gets them as missing values.

    Raises:
        DataError: The file is missing, unreadable or lacks columns (the message names it).
    """
    p = Path(path)
    df = _read_table(p, "runs table")
    for col in OPTIONAL_COLUMNS:
        if col not in df.columns:
            df[col] = math.nan
    df["status"] = df["status"].map(lambda v: "ok" if v != v or v == "" else str(v))
    df["status_reason"] = df["status_reason"].map(lambda v: "" if v != v else str(v))
    wanted = (*SUMMARY_COLUMNS, *PROVENANCE_COLUMNS, *PLACEMENT_COLUMNS)
    missing = [c for c in wanted if c not in df.columns]
    if missing:
        raise DataError(f"runs table {str(p)!r} lacks columns {missing}; regenerate it")
    return df


def aggregate_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Aggregate runs over seeds, per (workload, method, scenario).

    Args:
        df: A runs table (:func:`collect_runs` or :func:`read_runs_csv`).

    Returns:
        One row per (workload, method, scenario), sorted, with ``clock``, ``n`` (seeds),
        ``<metric>_mean`` and ``<metric>_std`` (ddof=1, NaN when fewer than two values) for each
        of :data:`AGGREGATE_METRICS`, and ``time_to_target_reached`` (runs that reached the
        target) and ``diverged`` (runs marked DIVERGED, whose numbers are in the means: read
        them with it). Time to target is averaged over the runs that reached it (NaN if none did).
    """
    cols = [*AGGREGATE_KEYS, "clock", "n"]
    for m in AGGREGATE_METRICS:
        cols += [f"{m}_mean", f"{m}_std"]
    cols += ["time_to_target_reached", "diverged"]
    rows = []
    for keys, group in df.groupby(list(AGGREGATE_KEYS), sort=True):
        row: dict[str, Any] = dict(zip(AGGREGATE_KEYS, keys, strict=True))
        row["clock"] = " / ".join(sorted(set(group["clock"].astype(str))))
        row["n"] = len(group)
        for m in AGGREGATE_METRICS:
            values = pd.to_numeric(group[m], errors="coerce").astype(float)
            # mean()/std() skip NaN, so time to target is over the runs that reached it.
            mean = float(values.mean()) if values.notna().any() else math.nan
            std = float(values.std(ddof=1)) if values.notna().sum() > 1 else math.nan
            # Equal values can give a std of ~1e-19 from rounding; that is zero, not a spread.
            if std <= _REL_NOISE * abs(mean):
                std = 0.0
            row[f"{m}_mean"], row[f"{m}_std"] = mean, std
        row["time_to_target_reached"] = int(
            pd.to_numeric(group["time_to_target_s"], errors="coerce").notna().sum()
        )
        status = group["status"] if "status" in group else pd.Series(["ok"] * len(group))
        row["diverged"] = int((status == "diverged").sum())
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def aggregate_experiments(df: pd.DataFrame, config: dict[str, Any] | None) -> pd.DataFrame:
    """:func:`aggregate_runs` over every run, and over each experiment's own grid.

    The comparison stage writes this as ``aggregate.csv``; the report reads it, so the means
    it prints are the ones this stage computed.

    Args:
        df: The runs table.
        config: The effective configuration (its ``experiments``); None: every run only.

    Returns:
        :func:`aggregate_runs`'s columns after an ``experiment`` column: :data:`ALL_RUNS` for
        the rows over every run of the tier, then each experiment's rows (by name) over that
        experiment's methods, workloads, scenarios and seeds only.
    """
    parts = [aggregate_runs(df).assign(experiment=ALL_RUNS)]
    for name, ex in sorted(((config or {}).get("experiments") or {}).items()):
        parts.append(aggregate_runs(experiment_runs(df, config or {}, ex)).assign(experiment=name))
    out = pd.concat(parts, ignore_index=True)
    return out[["experiment", *(c for c in out.columns if c != "experiment")]]


def read_aggregate_csv(path: str | Path) -> pd.DataFrame:
    """Read ``aggregate.csv`` (:func:`aggregate_experiments`, written by ``psml compare``).

    Raises:
        DataError: The file is missing, unreadable or not an aggregate table (names it).
    """
    p = Path(path)
    df = _read_table(p, "aggregate table")
    wanted = ["experiment", *AGGREGATE_KEYS, "clock", "n"]
    missing = [c for c in wanted if c not in df.columns]
    if missing:
        raise DataError(
            f"aggregate table {str(p)!r} lacks columns {missing}; regenerate it with `psml compare`"
        )
    for key in ("experiment", *AGGREGATE_KEYS):
        df[key] = df[key].astype(str)
    return df
