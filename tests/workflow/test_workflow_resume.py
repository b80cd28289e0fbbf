"""An interrupted workflow resumes: finished runs are kept, the cut-off run goes on from its
checkpoint, and nothing half-written is left behind.

The interruption is a training process killed with SIGKILL after its second checkpoint (fault
injection, ``PSML_FAULT_KILL_AFTER_CHECKPOINT``: what an out-of-memory kill or a lost node does
to a job), deterministic where a signal sent from outside would race with the run. The same
`snakemake --cores 1` command is then run again.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from wf_helpers import copy_workflow, env_with_venv, snakemake_cli

from psml_core.engine.sim.checkpoint import CHECKPOINT_NAME, FAULT_ENV

pytestmark = pytest.mark.slow

FIRST, CUT, LATER = (
    "digits_mlp/dense_bsp/dc_10g/seed0",
    "digits_mlp/topk_ef/dc_10g/seed0",
    "digits_mlp/dense_bsp/slow_100m/seed0",
)
CONFIG = ["--config", "tier=smoke", "checkpoint_every=5"]


def targets(*runs: str) -> list[str]:
    return [f"results/smoke/runs/{r}/summary.json" for r in runs]


def test_interrupted_workflow_resumes_without_recomputing(tmp_path: Path) -> None:
    wf = copy_workflow(tmp_path / "wf")
    runs = wf / "results" / "smoke" / "runs"
    first = snakemake_cli(["--cores", "1", *targets(FIRST), *CONFIG], wf)
    assert first.returncode == 0, first.stderr[-3000:]
    stamp = (runs / FIRST / "summary.json").stat().st_mtime_ns

    # The next run to start is killed after its 2nd checkpoint; Snakemake stops with an error.
    cut = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", *targets(FIRST, CUT), *CONFIG],
        cwd=wf,
        capture_output=True,
        text=True,
        env={**env_with_venv(), FAULT_ENV: "2"},
        timeout=300,
    )
    assert cut.returncode != 0
    assert sorted(p.name for p in (runs / CUT).iterdir()) == [CHECKPOINT_NAME]

    again = snakemake_cli(["--cores", "1", *targets(FIRST, CUT, LATER), *CONFIG], wf)
    assert again.returncode == 0, again.stderr[-3000:]
    for r in (FIRST, CUT, LATER):
        assert (runs / r / "summary.json").exists(), r
        assert not (runs / r / CHECKPOINT_NAME).exists(), r
    # The finished run was not recomputed; the killed one went on from its checkpoint.
    assert (runs / FIRST / "summary.json").stat().st_mtime_ns == stamp
    log = (wf / "logs" / "smoke" / "train" / f"{CUT}.log").read_text()
    assert "resumed from its checkpoint at iteration 10" in log
    assert not [p for p in runs.rglob("*") if p.name.endswith(".tmp")], "a half-written file"
