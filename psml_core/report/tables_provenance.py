"""The report's provenance tables: what ran, with which code, packages and input files."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from psml_core.report.format import (
    DASH,
    fmt_value,
    missing,
)
from psml_core.report.tables import Table, kv_table

__all__ = [
    "data_files_table",
    "inputs_table",
    "overview_table",
    "versions_text",
]


def _unique(values: Iterable[Any]) -> list[str]:
    return sorted({str(v) for v in values if not missing(v)})


def _dirty_word(values: Iterable[Any]) -> str:
    flags = {str(v).lower() for v in values if not missing(v)}
    if flags == {"false"}:
        return "clean working tree"
    if "true" in flags:
        return "uncommitted changes (dirty working tree)"
    return "working-tree state unknown"


def overview_table(runs: pd.DataFrame, experiment: Mapping[str, Any]) -> Table:
    """Title-page provenance: tier, backend, clock, seeds, runs, git commit, config hashes."""
    commits = _unique(runs["git_commit"])
    hashes = _unique(runs["config_hash"])
    seeds = sorted({int(s) for s in runs["seed"]})
    hash_text = (
        hashes[0]
        if len(hashes) == 1
        else f"{len(hashes)} distinct, one per run; in the attached runs table (config_hash)"
    )
    # Tier, backend and clock are in the report's subtitle.
    pairs = [
        ("Seeds", fmt_value(seeds)),
        ("Runs", str(len(runs))),
        ("Git commit", ", ".join(commits) or DASH),
        ("Working tree", _dirty_word(runs["git_dirty"])),
        ("Config hashes (SHA-256)", hash_text),
    ]
    return kv_table("overview", "Provenance of this report.", pairs, ["Item", "Value"])


def _merged_json_column(runs: pd.DataFrame, column: str) -> dict[str, list[str]]:
    merged: dict[str, set[str]] = {}
    for text in runs[column]:
        if missing(text):
            continue
        for k, v in json.loads(str(text)).items():
            merged.setdefault(str(k), set()).add(str(v))
    return {k: sorted(v) for k, v in sorted(merged.items())}


def versions_text(runs: pd.DataFrame) -> str:
    """Package versions recorded by the runs, as one sentence; differing versions all listed."""
    merged = _merged_json_column(runs, "versions")
    listed = ", ".join(f"{pkg} {' / '.join(vs)}" for pkg, vs in merged.items())
    return (
        f"Package versions recorded in the runs' provenance (several separated by “/” where "
        f"runs differ): {listed}."
        if listed
        else "The runs recorded no package versions."
    )


def data_files_table(runs: pd.DataFrame) -> Table:
    """SHA-256 of every data file the runs read, per dataset (file names repeat across sets)."""
    entries = set()
    for dataset, text in zip(runs["dataset"], runs["data_sha256"], strict=True):
        if missing(text):
            continue
        entries |= {(str(dataset), str(f), str(h)) for f, h in json.loads(str(text)).items()}
    rows = [list(e) for e in sorted(entries)] or [[DASH, DASH, DASH]]
    return Table(
        "data_sha256",
        "SHA-256 of the data files the runs read, per dataset (– if the runs recorded none).",
        ["Dataset", "File", "SHA-256"],
        rows,
        widths=["auto", "auto", 1],
    )


def inputs_table(files: Mapping[str, str]) -> Table:
    """SHA-256 of the report's inputs other than the runs' data (configs, tables)."""
    rows = [[k, v] for k, v in sorted(files.items())] or [[DASH, DASH]]
    return Table(
        "inputs",
        "SHA-256 of the report's configuration and result tables: the effective configuration "
        "(canonical JSON of the tier with its recipes), the paper files with the reported "
        "numbers, the runs, means-over-seeds and claims tables, and the simulator validation "
        "table where the tier names one (report.validation).",
        ["Input", "SHA-256"],
        rows,
        widths=["auto", 1],
    )
