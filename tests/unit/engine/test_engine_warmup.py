"""The linear learning-rate warm-up: the same step on the shards, the replicas and ctx.lr."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from psml_core.codecs import CodecContext
from psml_core.config import BlockSpec
from psml_core.data.store import load_prepared
from psml_core.engine import SimBackend, staged_job
from psml_core.engine.optim import SGD, AdaGrad, make_optimizer, warmup_factor


def _spec(smoke, method="dense_bsp", iterations=6, warmup=0, **method_changes):
    run = smoke.run("digits_mlp", method, "dc_10g", smoke.seeds[0])
    wl = dataclasses.replace(run.workload, iterations=iterations, warmup_iterations=warmup)
    recipe = dataclasses.replace(run.method, **method_changes)
    return dataclasses.replace(run, workload=wl, method=recipe)


def _simulate(spec, prepared):
    job = staged_job(spec, load_prepared(prepared[spec.dataset.name]))
    return job, SimBackend().run(job)


def test_warmup_factor_is_linear_then_one():
    assert [warmup_factor(t, 4) for t in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert warmup_factor(0, 0) == 1.0 and warmup_factor(99, 0) == 1.0


@pytest.mark.parametrize("cls", [SGD, AdaGrad])
def test_an_optimizer_steps_at_the_warmed_up_rate(cls):
    """Step t of a warmed-up optimizer equals a plain one at lr * warmup_factor(t)."""
    rng = np.random.default_rng(0)
    grads = rng.standard_normal((6, 5)).astype(np.float32)
    warm = cls(5, 0.1, 0.0)
    warm.warmup = 4
    got = np.zeros(5, np.float32)
    for t, g in enumerate(grads):
        before = got.copy()
        warm.step(got, g)
        plain = cls(5, 0.1 * warmup_factor(t, 4), 0.0)
        if cls is AdaGrad:  # its accumulator must hold the earlier gradients too
            plain.accum = warm.accum - g * g
        want = before.copy()
        plain.step(want, g)
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_shard_applying_pushes_alone_counts_p_updates_per_iteration(smoke):
    wl = dataclasses.replace(smoke.workloads["digits_mlp"], warmup_iterations=2)
    opt = make_optimizer(wl, 3, updates_per_iteration=4)
    lrs = [float(opt.next_lr()) for _ in range(12)]
    assert lrs == pytest.approx([0.05] * 4 + [0.1] * 8)


def test_no_warmup_keeps_the_run_byte_identical(smoke, prepared):
    """warmup_iterations 0 is the run as before the setting existed (and its config hash)."""
    spec = _spec(smoke)
    assert "warmup_iterations" not in spec.to_dict()["workload"]
    a = _simulate(spec, prepared)[1]
    b = _simulate(dataclasses.replace(spec, workload=spec.workload), prepared)[1]
    assert a == b
    assert _simulate(_spec(smoke, warmup=4), prepared)[1] != a  # and a warm-up changes it


@pytest.mark.parametrize("method", ["topk_ef", "topk_mc"])
def test_warmup_is_applied_alike_on_the_server_and_in_the_workers_replicas(smoke, prepared, method):
    """Aggregate pull mode: every replica applies the broadcasts with its own warmed-up
    optimizer; after the last round is delivered they equal the servers' model bit for bit."""
    spec = _spec(smoke, method, warmup=4)
    assert spec.method.pull == "aggregate"
    job, recs = _simulate(spec, prepared)
    ctx = CodecContext(step=spec.workload.iterations)
    for w in job.workers:
        for s, shard in enumerate(job.shards):
            w.apply_aggregate(s, shard.decode_pull(shard.pull(w.rank, 6, ctx), ctx))
        np.testing.assert_array_equal(w.params, job.global_params())
        assert [o.updates for o in w.optimizers] == [sh.optimizer.updates for sh in job.shards]
    assert all(sh.optimizer.updates == 6 for sh in job.shards)
    # The run differs from one without warm-up: the warm-up is really applied.
    plain, _ = _simulate(_spec(smoke, method), prepared)
    assert not np.array_equal(plain.global_params(), job.global_params())


def test_codecs_see_the_warmed_up_learning_rate(smoke, prepared):
    spec = _spec(smoke, "ratatouille", iterations=4, warmup=4)
    job = staged_job(spec, load_prepared(prepared["digits"]))
    assert [job.ctx(t, 1.0).lr for t in range(5)] == pytest.approx(
        [spec.workload.lr * f for f in (0.25, 0.5, 0.75, 1.0, 1.0)]
    )


def test_asp_shards_warm_up_over_the_same_iterations(smoke, prepared):
    """Without a barrier each push is applied alone: P updates per iteration, so the shard's
    warm-up ends after the same number of iterations as a barrier's."""
    spec = _spec(smoke, iterations=4, warmup=3, sync=BlockSpec("asp"))
    job, _ = _simulate(spec, prepared)
    for shard in job.shards:
        assert shard.optimizer.updates_per_iteration == spec.workers
        assert shard.optimizer.updates == spec.workers * 4
