"""Sim backend: round policies (PCP), DSSP, the delta pull mode and lossless accounting."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from psml_core.config import BlockSpec, HeterogeneitySpec
from psml_core.data.store import load_prepared
from psml_core.engine import SimBackend, staged_job
from psml_core.errors import ConfigError
from psml_core.sync.rounds import BUDGET_BYTES, REPORT_BYTES


def spec_for(smoke, iterations=12, sync=None, multipliers=None, **method):
    sync = sync or BlockSpec("bsp")
    run = smoke.run("digits_mlp", "dense_bsp", "dc_10g", smoke.seeds[0])
    wl = dataclasses.replace(run.workload, iterations=iterations)
    m = dataclasses.replace(run.method, sync=sync, **method)
    compute = run.compute
    if multipliers is not None:
        compute = dataclasses.replace(
            compute, heterogeneity=HeterogeneitySpec(multipliers=tuple(multipliers))
        )
    return dataclasses.replace(run, workload=wl, method=m, compute=compute)


def simulate(spec, prepared):
    job = staged_job(spec, load_prepared(prepared[spec.dataset.name]))
    return job, SimBackend().run(job)


def test_pcp_with_one_step_rounds_equals_bsp_local_sgd(smoke, prepared):
    """Differential: s_max = 1 makes every round one local SGD step and a uniform merge, which
    is BSP with plain SGD (momentum 0) up to float rounding."""
    base = spec_for(smoke, iterations=8)
    wl = dataclasses.replace(base.workload, momentum=0.0)
    bsp = dataclasses.replace(base, workload=wl)
    pcp = dataclasses.replace(
        bsp, method=dataclasses.replace(bsp.method, sync=BlockSpec("pcp", {"s_max": 1}))
    )
    job_b, _ = simulate(bsp, prepared)
    job_p, recs = simulate(pcp, prepared)
    np.testing.assert_allclose(job_p.global_params(), job_b.global_params(), rtol=0, atol=2e-6)
    assert {r.local_steps for r in recs} == {1}


def test_pcp_grants_fast_workers_more_local_steps_and_cuts_waiting(smoke, prepared):
    mult = [1, 1, 1, 4]
    pcp_spec = spec_for(smoke, iterations=24, sync=BlockSpec("pcp"), multipliers=mult)
    bsp_spec = spec_for(smoke, iterations=24, multipliers=mult)
    job, recs = simulate(pcp_spec, prepared)
    _, bsp = simulate(bsp_spec, prepared)
    first = [r for r in recs if r.iteration == 0]
    assert all(r.local_steps == 1 for r in first)  # no prediction before the first reports
    last = max(r.iteration for r in recs)  # its budgets are trimmed to the step budget
    later = [r for r in recs if 2 <= r.iteration < last]
    assert all(r.local_steps == 1 for r in later if r.worker == 3)
    # Fast workers fill the slow one's round: ~4 steps, fewer for a worker whose own
    # communication (both shards remote) takes longer.
    assert all(3 <= r.local_steps <= 8 for r in later if r.worker != 3)
    assert max(r.local_steps for r in later) >= 4
    fast_wait = sum(r.wait_s for r in recs if r.worker != 3) / sum(
        r.time_s - (r.time_s - r.compute_s - r.comm_s - r.wait_s) for r in recs if r.worker != 3
    )
    bsp_wait = sum(r.wait_s for r in bsp if r.worker != 3) / sum(
        r.compute_s + r.codec_s + r.comm_s + r.wait_s for r in bsp if r.worker != 3
    )
    assert fast_wait < 0.5 * bsp_wait
    # Each round is one push and one pull per worker; the push carries the 12-byte report and
    # shard 0's answer the 4-byte budget: exact bytes. The last record also holds the final
    # pull (the merged model, with a budget of 0 steps) that ends the run.
    n = job.model.n_params
    hdr = job.spec.scenario.header_bytes
    shards = job.spec.shards
    for r in recs:
        pulls = 2 if r.iteration == last else 1
        assert r.bytes_up == 4 * n + shards * (REPORT_BYTES + hdr) + pulls * shards * hdr
        assert r.bytes_down == pulls * (4 * n + BUDGET_BYTES + shards * hdr)


def test_pcp_stops_at_the_sample_budget_of_the_other_policies(smoke, prepared):
    """A round policy processes as many samples as BSP (P x iterations steps), not as many
    rounds: its run ends when the budget is spent, and its last round is evaluated."""
    iterations = 24
    spec = spec_for(smoke, iterations=iterations, sync=BlockSpec("pcp"), multipliers=[1, 1, 1, 4])
    job, recs = simulate(spec, prepared)
    P = job.spec.workers
    steps = sum(r.local_steps for r in recs)
    assert P * iterations <= steps < P * iterations + P
    rounds = max(r.iteration for r in recs) + 1
    assert rounds < iterations  # fast workers' local steps: fewer rounds than BSP's steps
    assert len(recs) == P * rounds
    evaluated = {r.iteration for r in recs if not np.isnan(r.test_accuracy)}
    assert rounds - 1 in evaluated
    assert all(s.finished for s in job.shards)


def test_pcp_merge_is_weighted_by_local_steps(smoke, prepared):
    spec = spec_for(smoke, iterations=4, sync=BlockSpec("pcp"), multipliers=[1, 1, 1, 4])
    job, recs = simulate(spec, prepared)
    shard = job.shards[0]
    assert shard.policy.weights([4, 4, 4, 1]).tolist() == pytest.approx(
        [4 / 13, 4 / 13, 4 / 13, 1 / 13]
    )
    uniform = job.shards[0].policy.__class__(weighting="uniform")
    assert uniform.weights([4, 1]).tolist() == [0.5, 0.5]


def test_pcp_is_deterministic(smoke, prepared):
    spec = spec_for(smoke, iterations=6, sync=BlockSpec("pcp"), multipliers=[1, 2, 1, 4])
    a = simulate(spec, prepared)[1]
    b = simulate(spec, prepared)[1]
    assert a == b


def test_pcp_needs_params_pull(smoke, prepared):
    spec = spec_for(smoke, sync=BlockSpec("pcp"), pull="aggregate")
    with pytest.raises(ConfigError, match="pull: aggregate needs a barrier"):
        simulate(spec, prepared)


@pytest.mark.parametrize(("s_low", "r_max"), [(0, 2), (1, 3)])
def test_dssp_staleness_stays_within_its_range(smoke, prepared, s_low, r_max):
    spec = spec_for(
        smoke,
        iterations=24,
        sync=BlockSpec("dssp", {"s_low": s_low, "r_max": r_max}),
        multipliers=[1, 1, 1, 6],
    )
    _, recs = simulate(spec, prepared)
    worst = max(r.staleness for r in recs)
    assert s_low < worst <= s_low + r_max  # it does grant beyond s_low, never beyond the cap


def test_delta_pull_with_dense_codec_equals_params_pull(smoke, prepared):
    """A lossless delta pull hands every worker exactly the parameters a params pull would."""
    spec = spec_for(smoke, iterations=8, sync=BlockSpec("asp"), multipliers=[1, 1, 2, 3])
    job_p, recs_p = simulate(spec, prepared)
    job_d, recs_d = simulate(
        dataclasses.replace(spec, method=dataclasses.replace(spec.method, pull="delta")), prepared
    )
    np.testing.assert_allclose(job_d.global_params(), job_p.global_params(), atol=1e-6)
    assert [r.loss for r in recs_d] == pytest.approx([r.loss for r in recs_p], rel=1e-5)


def test_delta_pull_with_a_filter_keeps_views_exact(smoke, prepared):
    down = BlockSpec("threshold", {"threshold": 1e-3})
    spec = spec_for(smoke, iterations=10, sync=BlockSpec("asp"), pull="delta", codec_down=down)
    job, recs = simulate(spec, prepared)
    for w in job.workers:
        for shard in job.shards:
            assert shard.views is not None
            np.testing.assert_array_equal(w.params[shard.keys], shard.views[w.rank])
    dense = 4 * job.model.n_params
    assert sum(r.bytes_down for r in recs) < 0.9 * dense * len(recs)


def test_lossless_bytes_are_reported_separately(smoke, prepared):
    spec = spec_for(smoke, iterations=4)
    _, raw = simulate(spec, prepared)
    _, rec = simulate(
        dataclasses.replace(spec, method=dataclasses.replace(spec.method, lossless="snappy")),
        prepared,
    )
    assert all(r.lossless_bytes_up is None for r in raw)
    assert [r.bytes_up for r in rec] == [r.bytes_up for r in raw]  # raw bytes untouched
    assert all(0 < r.lossless_bytes_up <= r.bytes_up + 64 for r in rec)
    # Digits has always-blank pixels whose weights get exact-zero gradients: the pushes hold
    # runs of zeros that Snappy shrinks; the pulled random-initialised weights barely shrink.
    up = sum(r.lossless_bytes_up for r in rec) / sum(r.bytes_up for r in rec)
    down = sum(r.lossless_bytes_down for r in rec) / sum(r.bytes_down for r in rec)
    assert up < 0.97 and 0.97 < down < 1.01, (up, down)
