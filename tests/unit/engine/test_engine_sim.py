from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from psml_core.codecs import CodecContext
from psml_core.config import BlockSpec, HeterogeneitySpec
from psml_core.control import Controller, Observation
from psml_core.data.store import load_prepared
from psml_core.devices.codec_cost import CodecCostModel
from psml_core.engine import SimBackend, staged_job, train
from psml_core.engine.sim.backend import SERVER_DEVICE
from psml_core.engine.worker import BatchSampler
from psml_core.errors import ConfigError


def spec_for(smoke, workload="digits_mlp", scenario="dc_10g", **changes):
    run = smoke.run(workload, "dense_bsp", scenario, smoke.seeds[0])
    wl = dataclasses.replace(run.workload, iterations=changes.pop("iterations", 12))
    return dataclasses.replace(run, workload=wl, **changes)


def simulate(spec, prepared):
    ds = load_prepared(prepared[spec.dataset.name])
    job = staged_job(spec, ds)
    return job, SimBackend().run(job)


def test_same_seed_same_records_and_same_bytes(smoke, prepared, tmp_path):
    spec = spec_for(smoke)
    _, a = simulate(spec, prepared)
    _, b = simulate(spec, prepared)
    assert a == b
    train(spec, prepared["digits"], tmp_path / "one")
    train(spec, prepared["digits"], tmp_path / "two")
    assert (tmp_path / "one" / "metrics.parquet").read_bytes() == (
        tmp_path / "two" / "metrics.parquet"
    ).read_bytes()


def test_bsp_time_split_and_zero_staleness(smoke, prepared):
    spec = spec_for(smoke, scenario="slow_100m")
    _, recs = simulate(spec, prepared)
    for p in range(spec.workers):
        mine = sorted((r for r in recs if r.worker == p), key=lambda r: r.iteration)
        prev = 0.0
        for r in mine:
            step = r.compute_s + r.codec_s + r.comm_s + r.wait_s
            assert step == pytest.approx(r.time_s - prev, abs=1e-12)
            assert r.staleness == 0 and r.wait_s >= 0
            prev = r.time_s
    # Barrier: nobody computes iteration t before every worker's push of t-1 has arrived
    # (time_s is when a worker's last push of the iteration arrived).
    by_it: dict[int, list] = {}
    for r in recs:
        by_it.setdefault(r.iteration, []).append(r)
    for t in range(1, spec.workload.iterations):
        barrier = max(r.time_s for r in by_it[t - 1])
        for r in by_it[t]:
            assert r.time_s - r.compute_s >= barrier


def test_exact_bytes_per_direction(smoke, prepared):
    spec = spec_for(smoke)
    job, recs = simulate(spec, prepared)
    n = job.model.n_params
    for r in recs:
        assert r.bytes_up == 4 * n and r.bytes_down == 4 * n
        own = sum(
            4 * len(s.keys)
            for s, m in zip(job.shards, job.shard_machine, strict=True)
            if m == r.worker
        )
        assert r.remote_bytes_up == 4 * n - own == r.remote_bytes_down


def test_header_bytes_are_counted_per_message(smoke, prepared):
    sc = dataclasses.replace(smoke.scenarios["dc_10g"], header_bytes=64)
    spec = dataclasses.replace(spec_for(smoke), scenario=sc)
    job, recs = simulate(spec, prepared)
    n, s = job.model.n_params, spec.shards
    # up: S pushes + S pull requests; down: S pull answers.
    assert all(r.bytes_up == 4 * n + 2 * s * 64 for r in recs)
    assert all(r.bytes_down == 4 * n + s * 64 for r in recs)


def test_matches_single_process_sgd(smoke, prepared):
    """Differential: dense BSP over P workers and S shards == SGD on the averaged gradient."""
    spec = spec_for(smoke, iterations=6)
    job, _ = simulate(spec, prepared)
    ds = load_prepared(prepared["digits"])
    ref_job = staged_job(spec, ds)
    model, wl = ref_job.model, spec.workload
    w = model.init_params(spec.seed)
    v = np.zeros_like(w)
    samplers = [
        BatchSampler(len(wk.y), wl.batch_size, spec.seed, wk.rank) for wk in ref_job.workers
    ]
    for _ in range(wl.iterations):
        g = np.zeros_like(w)
        for wk, smp in zip(ref_job.workers, samplers, strict=True):
            idx = smp.next()
            g += model.loss_grad(w, wk.X[idx], wk.y[idx])[1]
        g /= np.float32(spec.workers)
        v = np.float32(wl.momentum) * v + g
        w = w - np.float32(wl.lr) * v
    np.testing.assert_allclose(job.global_params(), w, rtol=1e-5, atol=1e-6)


def test_single_worker_iteration_time_is_analytic(smoke, prepared):
    sc = dataclasses.replace(smoke.scenarios["slow_100m"], header_bytes=0)
    spec = dataclasses.replace(
        spec_for(smoke, iterations=3, workers=1, shards=1, colocated=False), scenario=sc
    )
    spec = dataclasses.replace(spec, compute=dataclasses.replace(spec.compute, codec_costs=False))
    job, recs = simulate(spec, prepared)
    bw = sc.bandwidth_gbps * 1e9 / 8
    lat, ovh = sc.latency_us * 1e-6, sc.message_overhead_us * 1e-6
    n = job.model.n_params
    for r in recs:
        # Three messages (request, answer, push), two of them dense, each held on the link for
        # bytes / efficiency. The push is asynchronous: the worker goes on once it has left,
        # and its latency overlaps the next request's, so an iteration pays two latencies.
        expected = 2 * lat + 3 * ovh + 2 * 4 * n / (bw * sc.wire_efficiency) + r.compute_s
        assert r.time_s - (r.iteration and recs[r.iteration - 1].time_s) == pytest.approx(expected)
        assert r.wait_s == 0


def test_codec_costs_appear_in_the_simulated_time(smoke, prepared):
    """A codec's encode and decode (worker) and the server's answer are charged, exactly.

    The server's decode of the push is hidden here: it runs while the next pull request
    travels (one worker, one shard).
    """
    sc = dataclasses.replace(smoke.scenarios["slow_100m"], header_bytes=0)
    base = dataclasses.replace(
        spec_for(smoke, iterations=3, workers=1, shards=1, colocated=False), scenario=sc
    )
    job, recs = simulate(base, prepared)
    free = dataclasses.replace(base, compute=dataclasses.replace(base.compute, codec_costs=False))
    _, free_recs = simulate(free, prepared)
    costs = CodecCostModel.for_device(base.compute.cost_profile)
    server = CodecCostModel.for_device(SERVER_DEVICE)
    n = job.model.n_params
    ctx = job.ctx(0, 1.0)
    dense = job.workers[0].codecs[0]
    encode = costs.encode_s(dense, n, ctx, ratio=1.0)
    decode = costs.decode_down_s(dense, n, ctx, ratio=1.0, pull=True)
    answer = server.encode_down_s(dense, n, ctx, ratio=1.0, pull=True)
    bw = sc.bandwidth_gbps * 1e9 / 8
    lat, ovh = sc.latency_us * 1e-6, sc.message_overhead_us * 1e-6
    for r, f in zip(recs, free_recs, strict=True):
        assert r.codec_s == pytest.approx(encode + decode, rel=1e-12) and r.codec_s > 0
        assert r.wait_s == 0 and f.codec_s == 0  # the server's answer is communication time
        assert r.comm_s == pytest.approx(f.comm_s + answer, rel=1e-9)
        step = 2 * lat + 3 * ovh + 2 * 4 * n / (bw * sc.wire_efficiency) + r.compute_s + r.codec_s
        step += answer
        assert r.time_s - (r.iteration and recs[r.iteration - 1].time_s) == pytest.approx(step)
    assert recs[-1].time_s > free_recs[-1].time_s


def test_overlap_hides_pushes_behind_backward(smoke, prepared):
    """With overlap, shards whose layers backward finishes early push during the rest of it."""
    spec = spec_for(smoke, iterations=4, scenario="dc_10g")  # comm about as long as compute
    # Two layers, so that the second shard holds only later layers (ready before the end).
    spec = dataclasses.replace(spec, workload=dataclasses.replace(spec.workload, hidden=(32, 64)))
    off = dataclasses.replace(spec, scenario=dataclasses.replace(spec.scenario, overlap=False))
    _, on_recs = simulate(spec, prepared)
    _, off_recs = simulate(off, prepared)
    assert on_recs[-1].time_s < off_recs[-1].time_s
    assert sum(r.comm_s for r in on_recs) < sum(r.comm_s for r in off_recs)
    assert [r.bytes_up for r in on_recs] == [r.bytes_up for r in off_recs]


def test_training_learns(smoke, prepared):
    spec = spec_for(smoke, iterations=60)
    _, recs = simulate(spec, prepared)
    accs = [r.test_accuracy for r in recs if r.worker == 0 and not np.isnan(r.test_accuracy)]
    assert accs[-1] > 0.8 > accs[0] - 0.5  # digits MLP: well above 10% chance after 60 steps
    assert [r.iteration for r in recs if r.worker == 0 and not np.isnan(r.test_accuracy)][-1] == 59


def test_slower_network_takes_longer(smoke, prepared):
    _, fast = simulate(spec_for(smoke, scenario="dc_10g"), prepared)
    _, slow = simulate(spec_for(smoke, scenario="slow_100m"), prepared)
    assert max(r.time_s for r in slow) > 10 * max(r.time_s for r in fast)
    # Same gradients either way: time does not change what BSP computes.
    assert [r.loss for r in fast] == [r.loss for r in slow]


def hetero_spec(smoke, sync, multipliers, iterations=24, **params):
    spec = spec_for(smoke, iterations=iterations)
    method = dataclasses.replace(spec.method, sync=BlockSpec(sync, params))
    compute = dataclasses.replace(
        spec.compute, heterogeneity=HeterogeneitySpec(multipliers=tuple(multipliers))
    )
    return dataclasses.replace(spec, method=method, compute=compute)


@pytest.mark.parametrize("s", [0, 1, 3])
def test_ssp_never_exceeds_its_bound(smoke, prepared, s):
    spec = hetero_spec(smoke, "ssp", [1, 1, 1, 6], staleness=s)
    _, recs = simulate(spec, prepared)
    assert max(r.staleness for r in recs) == s  # fast workers do run ahead, up to s
    # Independent check from the records: when worker p starts iteration t (its compute
    # starts after the pull), the slowest worker has pushed at least t - s iterations.
    done = sorted((r.time_s, r.worker) for r in recs)
    for r in recs:
        pushed_before: dict[int, int] = {}
        for time_s, w in done:
            if time_s <= r.time_s - r.compute_s:
                pushed_before[w] = pushed_before.get(w, 0) + 1
        slowest = min(pushed_before.get(w, 0) for w in range(spec.workers))
        assert r.iteration - slowest <= s, (r, slowest)


def test_asp_fast_workers_progress_past_a_stalled_one(smoke, prepared):
    spec = hetero_spec(smoke, "asp", [1, 1, 1, 1000], iterations=20)
    _, recs = simulate(spec, prepared)
    end_fast = max(r.time_s for r in recs if r.worker != 3)
    slow_done = sum(1 for r in recs if r.worker == 3 and r.time_s <= end_fast)
    assert slow_done <= 1  # the stalled worker finished at most one iteration meanwhile
    assert all(r.wait_s == 0 for r in recs)
    assert max(r.staleness for r in recs) >= 15


def test_bsp_fast_workers_wait_for_the_slow_one(smoke, prepared):
    spec = hetero_spec(smoke, "bsp", [1, 1, 1, 4])
    _, recs = simulate(spec, prepared)
    fast_wait = sum(r.wait_s for r in recs if r.worker != 3)
    slow_wait = sum(r.wait_s for r in recs if r.worker == 3)
    assert fast_wait > 10 * max(slow_wait, 1e-12)
    assert all(r.staleness == 0 for r in recs)


def test_heterogeneity_draws_are_seeded_and_redrawn():
    from psml_core.devices.compute import Heterogeneity

    h = Heterogeneity(HeterogeneitySpec(draw_from=(1.0, 1.5, 2.0, 4.0), redraw_every=10), 7)
    a = [h.base(w, t) for w in range(8) for t in range(0, 40, 5)]
    b = [
        Heterogeneity(HeterogeneitySpec(draw_from=(1.0, 1.5, 2.0, 4.0), redraw_every=10), 7).base(
            w, t
        )
        for w in range(8)
        for t in range(0, 40, 5)
    ]
    assert a == b and set(a) <= {1.0, 1.5, 2.0, 4.0} and len(set(a)) > 1
    assert h.base(0, 0) == h.base(0, 9)  # constant within an epoch
    s = Heterogeneity(HeterogeneitySpec(straggler_prob=0.5, straggler_slowdown=3.0), 1)
    factors = [s.factor(0, t) for t in range(400)]
    assert set(factors) == {1.0, 3.0} and 0.4 < factors.count(3.0) / 400 < 0.6


def with_method(spec, **changes):
    return dataclasses.replace(spec, method=dataclasses.replace(spec.method, **changes))


def test_aggregate_mode_with_dense_codec_equals_params_mode(smoke, prepared):
    spec = spec_for(smoke, iterations=8)
    job_p, _ = simulate(spec, prepared)
    job_a, recs = simulate(with_method(spec, pull="aggregate"), prepared)
    np.testing.assert_array_equal(job_a.global_params(), job_p.global_params())
    # Replicas lag the server by the last round; deliver it and they are bit-identical.
    ctx = CodecContext(step=spec.workload.iterations)
    for w in job_a.workers:
        for s, shard in enumerate(job_a.shards):
            w.apply_aggregate(s, shard.decode_pull(shard.pull(w.rank, 8, ctx), ctx))
        np.testing.assert_array_equal(w.params, job_a.global_params())
    first = [r for r in recs if r.iteration == 0]
    assert all(r.bytes_down == 0 for r in first)  # replicas start from the seeded init
    # Later broadcasts are the averaged gradient in its cheapest lossless format: digits has
    # always-blank pixels, whose weights get exact-zero gradients, so a little under dense.
    n = job_a.model.n_params
    assert all(0.5 * 4 * n < r.bytes_down <= 4 * n for r in recs if r.iteration > 0)


def test_aggregate_mode_needs_a_barrier(smoke, prepared):
    spec = with_method(spec_for(smoke), pull="aggregate", sync=BlockSpec("ssp"))
    with pytest.raises(ConfigError, match="pull: aggregate needs a barrier sync policy"):
        simulate(spec, prepared)


def test_delay_process_slows_every_message(smoke, prepared):
    # Codec work off: with it, how much of the server's decode of a push hides behind the next
    # request's flight depends on the latency, which moves the difference by ~80 ns.
    base = spec_for(smoke, iterations=5)
    base = dataclasses.replace(base, compute=dataclasses.replace(base.compute, codec_costs=False))
    sc = dataclasses.replace(base.scenario, delay={"kind": "constant", "ms": 10})
    _, plain = simulate(base, prepared)
    _, slowed = simulate(dataclasses.replace(base, scenario=sc), prepared)
    # Every message gets 10 ms more; an iteration waits for two of them (request, answer):
    # the push's overlaps the next request's, which leaves behind it.
    per_it_plain = max(r.time_s for r in plain) / 5
    per_it_slow = max(r.time_s for r in slowed) / 5
    assert per_it_slow - per_it_plain == pytest.approx(0.020, rel=1e-6)


class _Recorder(Controller):
    """A controller that halves the ratio after every step it observes, and logs what it saw."""

    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[Observation] = []

    def observe(self, obs: Observation) -> None:
        self.seen.append(obs)

    def ratio(self, step: int) -> float:
        return 0.5 ** len(self.seen)


def test_controller_sees_every_step_in_order_a_round_trip_later(smoke, prepared):
    spec = hetero_spec(smoke, "bsp", [1, 1, 1, 3], iterations=6)
    ds = load_prepared(prepared["digits"])
    job = staged_job(spec, ds)
    job.controller = _Recorder()
    recs = SimBackend().run(job)
    # A step is observed once its pushes and every worker's next pull are in: under BSP
    # before the ratio two steps on is fixed. The last step (no pull follows) and the one
    # before it (observed only when step 6's ratio would be asked) are not seen.
    seen = job.controller.seen
    assert [o.step for o in seen] == [0, 1, 2, 3]
    ratios = {}
    for t in range(6):
        (ratios[t],) = {r.ratio for r in recs if r.iteration == t}  # shared by all workers
        assert 0.5**t <= ratios[t] <= 0.5 ** max(t - 1, 0)
    # The observation is the slowest worker's figures (worker 3 computes 3x longer), with
    # the ratio its step ran at.
    slow = {r.iteration: r.compute_s for r in recs if r.worker == 3}
    assert [o.compute_s for o in seen] == [slow[t] for t in range(4)]
    assert [o.ratio for o in seen] == [ratios[t] for t in range(4)]


@pytest.mark.parametrize(
    ("codec", "params"),
    [
        ("topk", {"ratio": 0.1, "error_feedback": True}),
        ("randomk", {"ratio": 0.1, "error_feedback": True}),
        ("dgc", {"ratio": 0.1, "error_feedback": True}),
        ("omnireduce", {}),
        ("dfs", {"ratio": 0.1, "block_size": 64, "dynamic": False, "error_feedback": True}),
        ("value_bounded", {"theta0": 0.001, "warmup": 2}),
        ("qsgd", {}),
        ("efsignsgd", {"error_feedback": True}),
        ("fp16", {}),
    ],
)
def test_compressed_codecs_run_in_aggregate_mode(smoke, prepared, codec, params):
    """Replicas stay bit-identical to the server, bytes shrink, and digits still learns."""
    base = spec_for(smoke, iterations=30)
    spec = with_method(base, pull="aggregate", codec=BlockSpec(codec, params))
    job, recs = simulate(spec, prepared)
    _, dense = simulate(base, prepared)
    ctx = CodecContext(step=spec.workload.iterations)
    for w in job.workers:
        for s, shard in enumerate(job.shards):
            vec = shard.decode_pull(shard.pull(w.rank, 30, ctx), ctx)
            w.apply_aggregate(s, vec)
        np.testing.assert_array_equal(w.params, job.global_params())
    up, dense_up = sum(r.bytes_up for r in recs), sum(r.bytes_up for r in dense)
    if codec == "omnireduce":  # lossless: dense gradients have few all-zero blocks to skip
        assert up <= dense_up * 1.01  # 4 B of block id per (at most) 256 elements
    else:
        assert up < dense_up
    final = [r.test_accuracy for r in recs if r.iteration == 29][0]
    assert final > 0.6, final  # dense reaches ~0.93 in 30 steps; 10 classes: chance is 0.1


def test_bytes_per_shard_add_up(smoke, prepared):
    job, recs = simulate(spec_for(smoke, iterations=3), prepared)
    for r in recs:
        assert len(r.shard_bytes_up) == len(r.shard_bytes_down) == len(job.shards)
        assert sum(r.shard_bytes_up) == r.bytes_up and sum(r.shard_bytes_down) == r.bytes_down
        assert list(r.shard_bytes_down) == [4 * len(s.keys) for s in job.shards]


def test_nic_overrides_slow_the_servers(smoke, prepared):
    from psml_core.config import NicOverride

    base = spec_for(smoke, iterations=4, colocated=False)
    slow = dataclasses.replace(base.scenario, nics=(NicOverride("servers", bandwidth_gbps=0.01),))
    _, fast = simulate(base, prepared)
    _, slowed = simulate(dataclasses.replace(base, scenario=slow), prepared)
    assert max(r.time_s for r in slowed) > 50 * max(r.time_s for r in fast)
    bad = dataclasses.replace(base.scenario, nics=(NicOverride([99], latency_us=1.0),))
    with pytest.raises(ConfigError, match=r"machines \[99\] do not exist"):
        simulate(dataclasses.replace(base, scenario=bad), prepared)
