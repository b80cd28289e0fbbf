"""Checkpoints of sim runs: a run killed after a checkpoint resumes to the very same metrics.

In-process, a "kill" is an exception thrown right after the k-th checkpoint is written (the
process state is then thrown away: the resumed run is built from scratch). End to end, `psml
train` is really killed with SIGKILL (fault injection) and run again.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from psml_core.config import HeterogeneitySpec
from psml_core.data.store import load_prepared
from psml_core.engine import staged_job
from psml_core.engine.sim import checkpoint as ckpt_mod
from psml_core.engine.sim.backend import SimBackend
from psml_core.engine.sim.checkpoint import CHECKPOINT_NAME, FAULT_ENV
from psml_core.errors import DataError
from psml_core.recipes import load_methods

EVERY = 5


class Killed(Exception):
    """Stands for the process dying right after a checkpoint."""


def spec_for(smoke, method, workload="digits_mlp", scenario="dc_10g", iterations=17, every=EVERY):
    run = smoke.run(workload, "dense_bsp", scenario, smoke.seeds[0])
    if method == "pcp":  # rounds of several local steps: a larger step budget, enough rounds
        iterations *= 3
    spec = dataclasses.replace(
        run,
        method=load_methods()[method],
        workload=dataclasses.replace(run.workload, iterations=iterations, eval_every=4),
        checkpoint_every=every,
    )
    if method in ("pcp", "ssp_2", "dssp"):  # heterogeneous workers: the policies matter
        het = HeterogeneitySpec(multipliers=(1.0, 1.5, 2.0, 4.0))
        compute = dataclasses.replace(spec.compute, heterogeneity=het)
        spec = dataclasses.replace(spec, compute=compute)
    return spec


def run(spec, prepared, path=None):
    job = staged_job(spec, load_prepared(prepared[spec.dataset.name]))
    backend = SimBackend(path)
    recs = sorted(backend.run(job), key=lambda r: (r.iteration, r.worker))
    return job, recs, backend


def kill_after(monkeypatch, k):
    real = ckpt_mod.write_bytes
    count = {"n": 0}

    def write_then_die(path, data):
        real(path, data)
        count["n"] += 1
        if count["n"] == k:
            raise Killed

    monkeypatch.setattr(ckpt_mod, "write_bytes", write_then_die)


def killed_after_first(spec, prepared, path, monkeypatch):
    """Run ``spec`` until its first checkpoint is written, then "die"."""
    with monkeypatch.context() as m:
        kill_after(m, 1)
        with pytest.raises(Killed):
            run(spec, prepared, path)


RECIPES = [
    ("dense_bsp", "digits_mlp"),
    ("topk_ef", "digits_mlp"),  # aggregate pulls: a pending broadcast in the checkpoint
    ("dc2_topk", "digits_mlp"),  # adaptive controller
    ("ssp_2", "digits_mlp"),  # async clocks
    ("pcp", "digits_mlp"),  # rounds, budgets, round reports
    ("ratatouille_async", "digits_mlp"),  # per-worker views (delta pulls)
    ("dfs", "digits_mlp"),  # published codec state (block masks)
    ("jpdc", "rcv1_logreg"),  # hashing, touched pulls
]


@pytest.mark.parametrize(
    ("method", "workload", "k"),
    [(m, w, 2) for m, w in RECIPES] + [("topk_ef", "digits_mlp", 1), ("pcp", "digits_mlp", 3)],
)
def test_a_run_killed_after_a_checkpoint_resumes_to_identical_metrics(
    smoke, prepared, tmp_path, monkeypatch, method, workload, k
):
    spec = spec_for(smoke, method, workload)
    whole_job, whole, _ = run(spec, prepared, tmp_path / "whole" / CHECKPOINT_NAME)
    path = tmp_path / "killed" / CHECKPOINT_NAME
    with monkeypatch.context() as m:
        kill_after(m, k)
        with pytest.raises(Killed):
            run(spec, prepared, path)
    assert path.is_file()
    job, resumed, backend = run(spec, prepared, path)
    assert backend.resumed_at == k * EVERY
    assert resumed == whole
    assert job.global_params().tobytes() == whole_job.global_params().tobytes()


def test_bsp_checkpoints_change_no_model_only_the_drain_time(smoke, prepared, tmp_path):
    """Under BSP the drain only moves pull requests in time: the same model and bytes.

    (The clock differs slightly: requests sent after the drain no longer share the links with
    the last pushes.)
    """
    with_ckpt = spec_for(smoke, "topk_ef")
    job_a, a, _ = run(with_ckpt, prepared, tmp_path / CHECKPOINT_NAME)
    job_b, b, _ = run(dataclasses.replace(with_ckpt, checkpoint_every=0), prepared)
    assert [r.loss for r in a] == [r.loss for r in b]
    assert [(r.bytes_up, r.bytes_down) for r in a] == [(r.bytes_up, r.bytes_down) for r in b]
    assert job_a.global_params().tobytes() == job_b.global_params().tobytes()
    assert a[-1].time_s != b[-1].time_s


def test_the_drain_is_waiting_time_and_the_split_stays_exact(smoke, prepared, tmp_path):
    spec = spec_for(smoke, "ssp_2")
    _, recs, _ = run(spec, prepared, tmp_path / CHECKPOINT_NAME)
    for p in range(spec.workers):
        prev = 0.0
        for r in [r for r in recs if r.worker == p]:
            step = r.compute_s + r.codec_s + r.comm_s + r.wait_s
            assert step == pytest.approx(r.time_s - prev, rel=1e-9)
            prev = r.time_s
    # Everyone leaves a drain together: no worker starts iteration 5 before all finished 4.
    end4 = max(r.time_s for r in recs if r.iteration == EVERY - 1)
    busy = [(r.time_s, r.compute_s + r.codec_s + r.comm_s, r.wait_s) for r in recs
            if r.iteration == EVERY]  # fmt: skip
    assert all(end - work - wait <= end4 for end, work, wait in busy)
    assert all(end - work >= end4 - 1e-12 for end, work, _ in busy)


def test_a_checkpoint_of_other_settings_is_not_resumed(smoke, prepared, tmp_path, monkeypatch):
    spec = spec_for(smoke, "dense_bsp")
    path = tmp_path / CHECKPOINT_NAME
    killed_after_first(spec, prepared, path, monkeypatch)
    other = dataclasses.replace(spec, seed=spec.seed + 1)
    _, recs, backend = run(other, prepared, path)
    assert backend.resumed_at is None and recs[0].iteration == 0


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_a_damaged_checkpoint_is_a_clear_error(smoke, prepared, tmp_path, monkeypatch, damage):
    spec = spec_for(smoke, "dense_bsp")
    path = tmp_path / CHECKPOINT_NAME
    killed_after_first(spec, prepared, path, monkeypatch)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"not a pickle")
    with pytest.raises(DataError, match=f"checkpoint '{path}'.*delete it"):
        run(spec, prepared, path)


def test_psml_train_killed_by_sigkill_resumes_and_matches(smoke, prepared, tmp_path):
    """End to end: the real process dies (SIGKILL) after its 2nd checkpoint; a re-run resumes."""
    spec = spec_for(smoke, "topk_ef", iterations=21)
    data = str(prepared[spec.dataset.name])

    def train(out, **env):
        cmd = [sys.executable, "-m", "psml_core.cli", "train", "--run", spec.to_json(),
               "--data", data, "--out", str(out)]  # fmt: skip
        return subprocess.run(
            cmd, capture_output=True, text=True, env={**os.environ, **env}, timeout=300
        )

    killed = train(tmp_path / "run", **{FAULT_ENV: "2"})
    assert killed.returncode == -9, killed.stderr
    assert "killing this process" in killed.stderr
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [CHECKPOINT_NAME]
    again = train(tmp_path / "run")
    assert again.returncode == 0, again.stderr
    assert f"resumed from its checkpoint at iteration {2 * EVERY}" in again.stdout
    assert not (tmp_path / "run" / CHECKPOINT_NAME).exists()
    whole = train(tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr
    a = pd.read_parquet(tmp_path / "run" / "metrics.parquet")
    b = pd.read_parquet(tmp_path / "whole" / "metrics.parquet")
    pd.testing.assert_frame_equal(a, b)
    sa, sb = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("run", "whole"))
    for key in ("final_test_accuracy", "bytes_total", "total_time_s", "time_to_target_s"):
        assert sa[key] == sb[key], key
    assert np.isfinite(sa["final_test_accuracy"])
