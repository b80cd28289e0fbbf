"""Reading the report's inputs: every file checked before anything is written.

Each error names its file and the step that makes it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

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


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """The JSON object in ``path`` (a ``what`` file), or a DataError naming it."""
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{what} file {str(path)!r} is not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise DataError(f"{what} file {str(path)!r} must hold a JSON object")
    return obj


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


def partition_entry(entry: Path | str) -> tuple[str | None, Path]:
    """A ``--partition`` entry as ``(name, file)``.

    ``<workload>/<method>=<file>`` gives ("<workload> · <method>", file); a plain path, or a
    file whose own name holds "=", gives (None, path).
    """
    name, sep, file = str(entry).partition("=")
    if not sep or Path(entry).is_file():
        return None, Path(entry)
    return " · ".join(Path(name).parts), Path(file)


def partition_files(paths: Iterable[Path]) -> dict[str, dict[str, Any]]:
    """Read placement files, named "<workload> · <method>" from their keys.

    An entry ``<workload>/<method>=<file>`` names its file (the workflow's listing: one
    placement is shared by every method that places alike, and its file's ``method`` is the
    placement key). A plain file is named by its ``workload`` and ``method`` keys; one without
    a ``workload`` key by its path below the files' common folder (``<workload>/<method>.json``
    gives "<workload> · <method>").
    """
    out: dict[str, dict[str, Any]] = {}
    files = []
    for entry in paths:
        name, file = partition_entry(entry)
        if name is None:
            files.append(file)
            continue
        if name in out:
            raise DataError(f"two partition files describe {name!r}; the second is {str(file)!r}")
        out[name] = read_json_object(file, "partition")
    files.sort()
    root = Path(os.path.commonpath([p.parent for p in files])) if files else Path()
    for p in files:
        obj = read_json_object(p, "partition")
        if isinstance(obj.get("workload"), str):
            parts = [obj["workload"]] + (
                [obj["method"]] if isinstance(obj.get("method"), str) else []
            )
        else:
            parts = list(p.relative_to(root).with_suffix("").parts)
        name = " · ".join(parts)
        if name in out:
            raise DataError(f"two partition files describe {name!r}; the second is {str(p)!r}")
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
