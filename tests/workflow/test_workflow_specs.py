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


def _outputs(stdout: str) -> list[str]:
    """Every output path of a dry run's jobs."""
    out = []
    for line in stdout.splitlines():
        if line.strip().startswith("output: "):
            out += [p.strip() for p in line.strip().removeprefix("output: ").split(",")]
    return out


def _trained(stdout: str) -> set[str]:
    """The runs (``<workload>/<method>/<scenario>/seedN``) a dry run would train."""
    prefix = "results/smoke/runs/"
    return {
        p.removeprefix(prefix).rsplit("/", 1)[0]
        for p in _outputs(stdout)
        if p.startswith(prefix) and p.endswith("/summary.json")
    }


def test_a_changed_recipe_reruns_exactly_its_cells(workflow_copy: Path):
    proc = snakemake_cli(["-n"], workflow_copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    every = _trained(proc.stdout)
    assert any("/topk_ef/" in r for r in every) and any("/topk_ef/" not in r for r in every)
    # Every job done: the data prepared for real (a job's resources read its manifest), every
    # other output empty ({} in JSON), the time stamps in the DAG's order.
    for rule in ("prepare", "hash"):  # one at a time: Snakemake 9 stalls on --until with both
        prep = snakemake_cli(["--cores", "1", "--until", rule], workflow_copy)
        assert prep.returncode == 0, prep.stdout + prep.stderr
    for path in map(workflow_copy.joinpath, _outputs(proc.stdout)):
        if path.exists():
            continue
        if path.suffix:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("{}" if path.suffix == ".json" else "")
        else:  # the report's figure and table folders
            path.mkdir(parents=True, exist_ok=True)
    proc = snakemake_cli(["--touch", "--cores", "1"], workflow_copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = snakemake_cli(["-n"], workflow_copy)
    assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout

    methods = workflow_copy / "config" / "methods.yaml"
    head, rest = methods.read_text().split("\ntopk_ef:\n", 1)
    old = "codec: {name: topk, params: {ratio: 0.01, error_feedback: true}}"
    assert rest.index(old) < rest.index("\n\n")  # topk_ef's own codec
    methods.write_text(f"{head}\ntopk_ef:\n" + rest.replace(old, old.replace("0.01", "0.02"), 1))
    proc = snakemake_cli(["-n"], workflow_copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _trained(proc.stdout) == {r for r in every if "/topk_ef/" in r}
    # A codec does not move a placement: topk_ef's stays shared, and is not recomputed.
    assert "rule partition:" not in proc.stdout, proc.stdout
