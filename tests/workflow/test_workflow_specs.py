"""Settings files are written when the workflow is read, and rewritten only where they change."""

from __future__ import annotations

from pathlib import Path

import yaml
from wf_helpers import snakemake_cli


def _stamps(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def test_specs_are_rewritten_only_where_their_settings_change(workflow_copy: Path):
    proc = snakemake_cli(["-n"], workflow_copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # No job writes a spec: they are files when the workflow has been read.
    assert "rule run_spec:" not in proc.stdout and "rule partition_spec:" not in proc.stdout
    specs = workflow_copy / "results" / "smoke" / "specs"
    before = _stamps(specs)
    runs = [k for k in before if k.startswith("runs/")]
    assert runs and any(k.startswith("partition/") for k in before)
    assert {"summaries.txt", "metrics.txt", "partitions.txt"} <= set(before)

    # Read again unchanged: no file is rewritten.
    proc = snakemake_cli(["-n"], workflow_copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _stamps(specs) == before

    # One scenario's latency changed: only run specs on that scenario are rewritten, each one
    # whose (workload, recipe) keeps its recorded point (the others wait for a tune job).
    cf = workflow_copy / "user.yaml"
    cf.write_text(
        yaml.safe_dump({"tier": "smoke", "scenarios": {"slow_100m": {"latency_us": 3000}}})
    )
    proc = snakemake_cli(["-n", "--configfile", str(cf)], workflow_copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = _stamps(specs)
    changed = {k for k in runs if after[k] != before[k]}
    assert changed and all("/slow_100m/" in k for k in changed)
    tuned = {k.replace("tuned/", "runs/", 1) for k in after if k.startswith("tuned/")}
    assert not tuned  # a dry run writes no tuned spec: those are jobs after their tune job
    for k in changed:
        assert '"latency_us":3000' in (specs / k).read_text().replace(" ", "")
