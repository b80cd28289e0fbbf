"""An interrupted workflow resumes: finished runs are kept, the cut-off run goes on from its
checkpoint, and nothing half-written is left behind.

The workflow is interrupted as a user's Ctrl-C does (SIGINT to its whole process group: Snakemake
and the running `psml train`) while a training run is between checkpoints; the same command is
then run again.
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

pytestmark = pytest.mark.slow

RUNS = [
    "digits_mlp/dense_bsp/dc_10g/seed0",
    "digits_mlp/topk_ef/dc_10g/seed0",
    "digits_mlp/dense_bsp/slow_100m/seed0",
]


def test_interrupted_workflow_resumes_without_recomputing(tmp_path: Path) -> None:
    wf = copy_workflow(tmp_path / "wf")
    runs = wf / "results" / "smoke" / "runs"
    targets = [f"results/smoke/runs/{r}/summary.json" for r in RUNS]
    args = ["--cores", "1", *targets, "--config", "tier=smoke", "checkpoint_every=5"]
    first_log = tmp_path / "first.log"
    with open(first_log, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "snakemake", *args],
            cwd=wf,
            env=env_with_venv(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a terminal's foreground job
        )
    done: list[str] = []
    cut: list[str] = []
    deadline = time.monotonic() + 240
    try:
        # Stop once one run is finished and another has written a checkpoint.
        while time.monotonic() < deadline and proc.poll() is None:
            done = [r for r in RUNS if (runs / r / "summary.json").exists()]
            cut = [r for r in RUNS if (runs / r / "checkpoint.pkl").exists() and r not in done]
            if done and cut:
                os.killpg(proc.pid, signal.SIGINT)
                break
            time.sleep(0.01)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert done and cut, (
        "the workflow ended before it could be interrupted between checkpoints:\n"
        + first_log.read_text()[-3000:]
    )
    assert proc.returncode != 0
    stamps = {r: (runs / r / "summary.json").stat().st_mtime_ns for r in done}
    interrupted = cut[0]
    # The cut-off run left its checkpoint, and no output of its own.
    left = sorted(p.name for p in (runs / interrupted).iterdir())
    assert left == ["checkpoint.pkl"], (left, first_log.read_text()[-3000:])
    assert not (runs / interrupted / "summary.json").exists()
    assert not (runs / interrupted / "metrics.parquet").exists()

    again = snakemake_cli(args, wf, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    for r in RUNS:
        assert (runs / r / "summary.json").exists(), r
        assert not (runs / r / "checkpoint.pkl").exists(), r
    # Finished runs were not recomputed; the interrupted one went on from its checkpoint.
    for r, stamp in stamps.items():
        assert (runs / r / "summary.json").stat().st_mtime_ns == stamp, r
    log = wf / "logs" / "smoke" / "train" / f"{interrupted}.log"
    assert "resumed from its checkpoint at iteration" in log.read_text()
    assert not list(runs.rglob("*.tmp")), "a half-written file was left behind"
