"""The report's machine-readable attachments: long tables as CSV files inside the PDF.

The PDF prints what a reader needs to judge the claims; everything else travels with it as
CSV files attached to the PDF (``pdfdetach -saveall report.pdf``) and kept in the report's work
directory: every run, the means over seeds, the placements' predicted traffic, every claim with
its regime field by field, and every recipe with its deviations. Cells hold numbers, not
formatted strings (bytes in bytes, times in seconds), so the files load into pandas as they are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from psml_core.analysis.experiments import ALL_RUNS
from psml_core.atomic import write_text
from psml_core.report.tables_setup import method_entries

__all__ = [
    "NAMES",
    "Attachment",
    "aggregate_attachment",
    "claims_attachment",
    "methods_attachment",
    "partition_attachment",
    "regime_map_attachment",
    "regimes_attachment",
    "runs_attachment",
]


NAMES: dict[str, str] = {
    "runs": "",
    "aggregate": "",
    "claims": "",
    "regimes": "",
    "methods": "",
    "partition": "where the tier places keys by a partition",
    "tuning_candidates": "where the tier's operating points were tuned",
    "regime_map": "where the tier runs regime maps",
}
"""Every table a report can attach, by name, with when it does (empty: always).

An :class:`Attachment` of another name is refused: the README lists these (its test reads them).
"""


@dataclass(frozen=True)
class Attachment:
    """A table attached to the PDF as ``data_<name>.csv``.

    Attributes:
        name: File stem.
        caption: What the file holds: the attachment's description inside the PDF.
        frame: The rows; numbers stay numbers.
        summary: A few words for the report's list of attachments.
    """

    name: str
    caption: str
    frame: pd.DataFrame
    summary: str = ""

    def __post_init__(self) -> None:
        if self.name not in NAMES:
            raise ValueError(f"attachment {self.name!r} is not in attachments.NAMES: add it there")

    @property
    def file(self) -> str:
        """The CSV file name, relative to the work directory."""
        return f"data_{self.name}.csv"

    def write(self, workdir: Path) -> dict[str, Any]:
        """Write the CSV into ``workdir``; return its entry for ``report_data.json``."""
        text = self.frame.to_csv(index=False, lineterminator="\n")
        write_text(Path(workdir) / self.file, text)
        return {
            "file": self.file,
            "rows": len(self.frame),
            "columns": len(self.frame.columns),
            "caption": self.caption,
            "summary": self.summary or self.caption,
        }


def runs_attachment(runs: pd.DataFrame) -> Attachment:
    """Every run: its settings, headline numbers, provenance and whether it was censored."""
    frame = runs.copy()
    frame.insert(
        frame.columns.get_loc("time_to_target_s") + 1,
        "censored",
        frame["time_to_target_s"].isna(),
    )
    return Attachment(
        "runs",
        "Every run: workload, method, scenario, seed, iterations, final test accuracy, time to "
        "target in seconds (empty and censored = true if the run never held its target), total "
        "time, exact wire bytes up (worker to server) and down, the clock those times are on, "
        "the run's config hash and the wall-clock seconds it took to compute.",
        frame,
        summary="every run: settings, accuracy, times (censored flagged), wire bytes, clock, "
        "config hash, wall-clock seconds",
    )


def aggregate_attachment(aggregate: pd.DataFrame) -> Attachment:
    """``aggregate.csv`` as ``psml compare`` wrote it: means over seeds, all and per experiment."""
    return Attachment(
        "aggregate",
        "Means and sample standard deviations over seeds per workload, method and scenario, "
        f"over every run of the tier (experiment {ALL_RUNS}) and over each experiment's own "
        "grid (n seeds; time_to_target_reached counts the seeds that held the target, the time "
        "mean is over those).",
        aggregate,
        summary="means and standard deviations over seeds per experiment, workload, method and "
        "scenario",
    )


def _flatten(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(obj, Mapping) and obj:
        out: list[tuple[str, Any]] = []
        for k in sorted(obj, key=str):
            out += _flatten(obj[k], f"{prefix}.{k}" if prefix else str(k))
        return out
    return [(prefix, obj)]


def partition_attachment(partitions: Mapping[str, Mapping[str, Any]]) -> Attachment:
    """Every key of every placement file, flattened; lists as JSON."""
    rows = [
        {
            "placement": name,
            "quantity": key,
            "value": json.dumps(value) if isinstance(value, list | dict) else value,
        }
        for name in sorted(partitions)
        for key, value in _flatten(partitions[name])
    ]
    return Attachment(
        "partition",
        "Predicted traffic of each placement, computed before training from the data and the "
        "placement: every key of every placement file (lists as JSON).",
        pd.DataFrame(rows, columns=["placement", "quantity", "value"]),
        summary="every placement file's predicted traffic, key by key",
    )


def claims_attachment(claims: pd.DataFrame) -> Attachment:
    """Every claim as ``psml compare`` measured it, without the regime's JSON column."""
    return Attachment(
        "claims",
        "Every claim: the paper's value, ours (mean, range and 95% interval over seeds, "
        "censored runs), the fixed scenario, baselines and partial floor, the verdict and why.",
        claims.drop(columns=["regime"], errors="ignore"),
        summary="every claim as measured: values, intervals, baselines, floor, verdict and why",
    )


def regimes_attachment(frame: pd.DataFrame) -> Attachment:
    """Every claim's regime field by field (:func:`.claim_regimes.regimes_frame`)."""
    return Attachment(
        "regimes",
        "Every claim's regime, field by field: the paper's value, whether it is reported, "
        "derived or unknown (with its source), ours and ours over the paper's.",
        frame,
        summary="every claim's regime field by field: the paper's value, status and source, "
        "ours, ratio",
    )


def methods_attachment(experiment: Mapping[str, Any]) -> Attachment:
    """Every recipe in use: role, paper, building blocks, description and deviations."""
    rows = [
        {
            "recipe": m["name"],
            "role": m["role"],
            "paper": m["paper"],
            "plugin": m["plugin"],
            **{f"block_{b}": v for b, v in m["blocks"]},
            "description": m["description"],
            "deviations": " | ".join(m["deviations"]),
        }
        for m in method_entries(experiment)
    ]
    frame = pd.DataFrame(rows)
    front = ["recipe", "role", "paper", "plugin"]
    back = ["description", "deviations"]
    blocks = sorted(c for c in frame.columns if c.startswith("block_"))
    return Attachment(
        "methods",
        "Every recipe in use: its role, paper, building blocks, description and deviations "
        "from the paper's setup (each one our design choice), separated by “|”.",
        frame.reindex(columns=front + blocks + back),
        summary="every recipe: role, paper, blocks, description and deviations",
    )


def regime_map_attachment(rows: pd.DataFrame) -> Attachment:
    """Every regime-map point: claim, axis value, method against the strongest, factor, class."""
    return Attachment(
        "regime_map",
        "Every regime-map point: the map, its axis and value, the claim, its method against "
        "the strongest of its named comparator's recipes run there, the metric, the seeds, "
        "the factor (baseline / method, mean over seeds; a censored run makes it a bound), "
        "the paper's factor and the class (indication: fewer than 2 seeds).",
        rows,
        summary="every regime-map point: axis value, claim, factor, paper's factor, class",
    )
