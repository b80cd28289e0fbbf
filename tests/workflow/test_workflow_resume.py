"""An interrupted workflow resumes: finished runs are kept, the cut-off run goes on from its
checkpoint, and nothing half-written is left behind.

Two interruptions: a training process killed with SIGKILL after its second checkpoint (fault
injection, ``PSML_FAULT_KILL_AFTER_CHECKPOINT``: what an out-of-memory kill does to a job), and
Snakemake itself killed with SIGKILL, with its job, while a checkpoint is on disk (a lost login
session; the job holds at its checkpoint, ``PSML_FAULT_HOLD_AFTER_CHECKPOINT``, so the kill
does not race the run). The same `snakemake --cores 1` command is then run again; after a
Snakemake kill it first asks for `--unlock`, as the README says.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from wf_helpers import copy_workflow, env_with_venv, snakemake_cli

from psml_core.engine.sim.checkpoint import CHECKPOINT_NAME, FAULT_ENV, HOLD_ENV

pytestmark = pytest.mark.slow

FIRST, CUT, LATER = (
    "digits_mlp/dense_bsp/dc_10g/seed0",
    "digits_mlp/topk_ef/dc_10g/seed0",
    "digits_mlp/dense_bsp/slow_100m/seed0",
)
CONFIG = ["--config", "tier=smoke", "checkpoint_every=5"]


def targets(*runs: str) -> list[str]:
    return [f"results/smoke/runs/{r}/summary.json" for r in runs]


def finished_first_run(tmp_path: Path) -> tuple[Path, Path, int]:
    """A workflow copy whose FIRST run has finished: (workflow, runs dir, its summary's mtime)."""
    wf = copy_workflow(tmp_path / "wf")
    runs = wf / "results" / "smoke" / "runs"
    first = snakemake_cli(["--cores", "1", *targets(FIRST), *CONFIG], wf)
    assert first.returncode == 0, first.stderr[-3000:]
    return wf, runs, (runs / FIRST / "summary.json").stat().st_mtime_ns


def test_interrupted_workflow_resumes_without_recomputing(tmp_path: Path) -> None:
    wf, runs, stamp = finished_first_run(tmp_path)

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


def test_a_killed_snakemake_resumes_after_unlock(tmp_path: Path) -> None:
    wf, runs, stamp = finished_first_run(tmp_path)

    # Snakemake and its job are killed (SIGKILL, whole process group) at the 2nd checkpoint.
    proc = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--cores", "1", *targets(FIRST, CUT), *CONFIG],
        cwd=wf,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**env_with_venv(), HOLD_ENV: "2"},
        start_new_session=True,
    )
    log = wf / "logs" / "smoke" / "train" / f"{CUT}.log"
    deadline = time.monotonic() + 240
    while not (log.is_file() and HOLD_ENV in log.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, "never reached the hold"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert (runs / CUT / CHECKPOINT_NAME).is_file()

    locked = snakemake_cli(["--cores", "1", *targets(FIRST, CUT), *CONFIG], wf)
    assert locked.returncode != 0 and "--unlock" in locked.stderr, locked.stderr[-2000:]
    unlock = snakemake_cli(["--unlock", *CONFIG], wf)
    assert unlock.returncode == 0, unlock.stderr[-2000:]

    again = snakemake_cli(["--cores", "1", *targets(FIRST, CUT), *CONFIG], wf)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (runs / FIRST / "summary.json").stat().st_mtime_ns == stamp  # not recomputed
    assert (runs / CUT / "summary.json").exists()
    assert not (runs / CUT / CHECKPOINT_NAME).exists()
    assert "resumed from its checkpoint at iteration 10" in log.read_text()
    assert not [p for p in runs.rglob("*") if p.name.endswith(".tmp")], "a half-written file"
