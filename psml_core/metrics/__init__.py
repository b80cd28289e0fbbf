"""Per-iteration records, their Parquet writer, and run summaries.

The names below load their modules on first use (PEP 562): ``psml_core.metrics.divergence``,
which the tuning targets read, then costs no pyarrow or pandas (``psml runs`` stays light).
"""

from importlib import import_module
from typing import Any

__all__ = ["METRIC_COLUMNS", "IterationRecord", "read_metrics", "records_table", "write_metrics"]

_WHERE = {
    "METRIC_COLUMNS": "records",
    "IterationRecord": "records",
    "records_table": "records",
    "read_metrics": "writer",
    "write_metrics": "writer",
}


def __getattr__(name: str) -> Any:
    """``METRIC_COLUMNS`` and the rest, from the module that defines them."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"psml_core.metrics.{_WHERE[name]}"), name)
