"""Reading the report's inputs: every file checked before anything is written.

Each error names its file and the step that makes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from psml_core.analysis.partition_files import (
    partition_entry,
    partition_files,
    read_json_object,
)
from psml_core.analysis.regime_map import MAP_COLUMNS
from psml_core.errors import DataError
from psml_core.metrics.writer import read_metrics

__all__ = [
    "load_metrics",
    "named_json",
    "partition_entry",
    "partition_files",
    "read_json_object",
    "read_regime_map",
    "require_files",
]


def require_files(paths: Iterable[Path]) -> None:
    """Refuse the first of ``paths`` that is not a file."""
    for p in paths:
        if not Path(p).is_file():
            raise DataError(f"report input {str(p)!r} does not exist; run the step that makes it")


def named_json(paths: Iterable[Path], what: str, key: str) -> dict[str, dict[str, Any]]:
    """Read JSON files keyed by their ``key`` field, or else by file stem."""
    out: dict[str, dict[str, Any]] = {}
    for p in sorted(Path(x) for x in paths):
        obj = read_json_object(p, what)
        name = obj[key] if isinstance(obj.get(key), str) else p.stem
        if name in out:
            raise DataError(f"two {what} files describe {name!r}; the second is {str(p)!r}")
        out[name] = obj
    return out


def load_metrics(runs: pd.DataFrame, metrics: Mapping[str, Path]) -> dict[str, pd.DataFrame]:
    """Every run's metrics table by run id; the files must match the runs table exactly."""
    ids = set(runs["run_id"].astype(str))
    missing = sorted(ids - set(metrics))
    extra = sorted(set(metrics) - ids)
    if missing or extra:
        raise DataError(
            "the metrics files do not match the runs table: "
            + (f"no metrics for runs {missing}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"metrics for runs not in the table {extra}" if extra else "")
        )
    return {run_id: read_metrics(metrics[run_id]) for run_id in sorted(metrics)}


def read_regime_map(path: Path | None) -> pd.DataFrame:
    """The regime maps' points, or an empty table (no file given, or a tier without maps)."""
    if path is None:
        return pd.DataFrame(columns=MAP_COLUMNS)
    p = Path(path)
    if not p.is_file():
        raise DataError(f"regime map {str(p)!r} does not exist; run `psml compare --regime-map`")
    try:
        rows = pd.read_parquet(p)
    except (OSError, ValueError) as exc:
        raise DataError(f"regime map {str(p)!r} is not readable Parquet ({exc})") from None
    missing = [c for c in MAP_COLUMNS if c not in rows.columns]
    if missing:
        raise DataError(f"regime map {str(p)!r} lacks columns {missing}; regenerate it")
    return rows
