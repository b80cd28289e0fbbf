"""Analysis of finished runs: collect summaries, aggregate over seeds."""

from psml_core.analysis.aggregate import (
    aggregate_runs,
    collect_runs,
    read_runs_csv,
    write_runs_csv,
)

__all__ = ["aggregate_runs", "collect_runs", "read_runs_csv", "write_runs_csv"]
