"""Per-iteration records, their Parquet writer, and run summaries."""

from psml_core.metrics.records import METRIC_COLUMNS, IterationRecord, records_table
from psml_core.metrics.writer import read_metrics, write_metrics

__all__ = ["METRIC_COLUMNS", "IterationRecord", "read_metrics", "records_table", "write_metrics"]
