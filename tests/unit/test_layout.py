"""The results layout: one pattern per kind of file, filled in whole or as rule wildcards."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from psml_core import layout


def test_a_rules_pattern_keeps_the_fields_it_is_not_given_as_wildcards() -> None:
    run = layout.wildcards(layout.RUN, tier="smoke", run_id=layout.RUN_ID)
    assert run == "results/smoke/runs/{workload}/{method}/{scenario}/seed{seed}"
    assert layout.wildcards(layout.PARTITION, tier="small", ext="npz") == (
        "results/small/partition/{workload}/{placement}.npz"
    )
    assert (
        layout.wildcards(layout.HASHED, tier="t") == "data/t/hashed/{dataset}/{hashing}/seed{seed}"
    )


def test_a_path_fills_every_field_and_names_the_one_missing() -> None:
    got = layout.path(layout.SPEC_RUN, tier="smoke", kind="tuned", run_id="w/m/s/seed3")
    assert got == "results/smoke/specs/tuned/w/m/s/seed3.json"
    assert (
        layout.path(layout.RUN_ID, workload="w", method="m", scenario="s", seed=0) == "w/m/s/seed0"
    )
    with pytest.raises(KeyError, match="no value for placement"):
        layout.path(layout.PARTITION, tier="smoke", workload="w", ext="npz")


def test_every_pattern_lives_under_a_folder_of_its_tier() -> None:
    patterns = [getattr(layout, name) for name in layout.__all__ if name.isupper()]
    assert len(patterns) == 26
    for pattern in patterns:
        if pattern is layout.RUN_ID:
            continue
        assert pattern.split("/")[0] in ("data", "results", "reports", "logs"), pattern
        assert pattern.split("/")[1] == "{tier}", pattern
        assert layout.fields(pattern)[0] == "tier"


def test_a_log_names_its_job_and_keeps_the_run_as_wildcards() -> None:
    job = f"train/{layout.RUN_ID}"
    assert layout.wildcards(layout.LOG, tier="smoke", job=job) == (
        "logs/smoke/train/{workload}/{method}/{scenario}/seed{seed}.log"
    )
    assert layout.path(layout.BENCH, tier="smoke", job="compare") == "logs/smoke/bench/compare.tsv"


def test_the_workflow_writes_no_path_of_its_own() -> None:
    """The rules take every data, results, report and log path from the layout."""
    workflow = Path(__file__).resolve().parents[2] / "workflow"
    files = [workflow / "Snakefile", *sorted((workflow / "rules").glob("*.smk"))]
    pattern = re.compile(r"""["'](?:data|results|reports|logs)/\{""")
    found = [
        f"{f.name}:{n}: {line.strip()}"
        for f in files
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, "paths written outside psml_core/layout.py:\n" + "\n".join(found)
