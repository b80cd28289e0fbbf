"""The PDF report: seaborn figures, formatted tables, a Typst template."""

from psml_core.report.build import build_report

__all__ = ["build_report"]
