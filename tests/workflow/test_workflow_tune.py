"""The workflow tunes only what the record lacks or holds stale (dry runs)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from wf_helpers import snakemake_cli

from psml_core.recipes import load_experiment
from psml_core.tuning.targets import tuning_targets

TUNED = re.compile(r"^\s*output: results/smoke/tune/(\S+)\.json$", re.M)


def _tuned(out: str) -> set[str]:
    return set(TUNED.findall(out))


def test_dry_run_tunes_only_the_keys_the_record_lacks_or_holds_stale(workflow_copy: Path):
    proc = snakemake_cli(["-n"], workflow_copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _tuned(proc.stdout) == set()  # the committed record covers the smoke tier
    assert "rule operating_points:" in proc.stdout or "localrule operating_points:" in proc.stdout

    # One entry removed, and one workload's settings changed: those keys are tuned first.
    record = workflow_copy / "config" / "operating_points" / "smoke.yaml"
    data = yaml.safe_load(record.read_text())
    del data["entries"]["digits_mlp/dfs"]
    record.write_text(yaml.safe_dump(data))
    cf = workflow_copy / "user.yaml"
    cf.write_text(yaml.safe_dump({"tier": "smoke", "workloads": {"rcv1_logreg": {"lr": 0.3}}}))
    proc = snakemake_cli(["-n", "--configfile", str(cf)], workflow_copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    exp = load_experiment({"tier": "smoke"}, workflow_copy / "config")
    stale = {k for k in tuning_targets(exp) if k.startswith("rcv1_logreg/")}
    assert stale and _tuned(proc.stdout) == {"digits_mlp/dfs", *stale}
    # A run of a tuned key waits for its tune job (its spec is a run_spec job's); a run of a
    # recorded key does not: its spec was written when the workflow was read.
    jobs = proc.stdout.split("\n\n")
    specs = [j for j in jobs if "rule run_spec:" in j]
    dfs = [j for j in specs if "tuned/digits_mlp/dfs/" in j]
    assert dfs and all("input: results/smoke/tune/digits_mlp/dfs.json" in j for j in dfs)
    assert not any("/digits_mlp/dense_bsp/" in j for j in specs)
    written = workflow_copy / "results" / "smoke" / "specs" / "runs" / "digits_mlp"
    assert sorted((written / "dense_bsp").rglob("seed*.json"))
