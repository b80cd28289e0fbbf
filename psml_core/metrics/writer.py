"""Atomic, deterministic Parquet output: the same records give the same bytes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from psml_core.atomic import atomic_path
from psml_core.errors import DataError
from psml_core.metrics.records import METRIC_COLUMNS, IterationRecord, records_table

__all__ = ["read_metrics", "write_metrics"]


def write_metrics(path: str | Path, records: list[IterationRecord]) -> None:
    """Write records to ``path`` atomically; byte-identical for identical records."""
    table = records_table(records)
    with atomic_path(path) as tmp:
        # Fixed writer options: no statistics-dependent choices, one row group, zstd.
        pq.write_table(
            table,
            tmp,
            compression="zstd",
            use_dictionary=["clock"],
            write_statistics=True,
            row_group_size=max(1, table.num_rows),
        )


def read_metrics(path: str | Path) -> pd.DataFrame:
    """Read a metrics file; a missing file or one with the wrong columns is a DataError."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"metrics file {str(p)!r} does not exist; run `psml train` for it first")
    try:
        df = pq.read_table(p).to_pandas()
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise DataError(
            f"metrics file {str(p)!r} is not readable Parquet ({exc}); re-run "
            "the training job that writes it"
        ) from None
    missing = [c for c in METRIC_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(f"metrics file {str(p)!r} lacks columns {missing}; re-run its job")
    return df
