"""``pull: touched`` (PS-lite's sparse pull) with the ``kv`` codec on the sim backend.

The jpdc recipes run this way so that the placement shows in the measured bytes; the replayed
prediction of :mod:`psml_core.placement.cost` must equal what the engine measures, exactly.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from psml_core.codecs import CodecContext
from psml_core.codecs.kv import pack_keys
from psml_core.config import BlockSpec, config_root
from psml_core.data.store import load_prepared
from psml_core.engine import SimBackend, staged_job
from psml_core.engine.horovod.backend import check_job
from psml_core.errors import ConfigError
from psml_core.placement import PlacementProblem, predicted_traffic
from psml_core.placement.cost import expected_step_traffic, replayed_traffic
from psml_core.recipes import load_methods

JPDC = ["jpdc", "jpdc_metis", "partition_only", "hashing_only", "random_partition"]


def spec_for(smoke, workload="rcv1_logreg", iterations=8, workers=4, shards=4, **method):
    run = smoke.run(workload, "dense_bsp", "dc_10g", smoke.seeds[0])
    wl = dataclasses.replace(run.workload, iterations=iterations)
    return dataclasses.replace(
        run,
        workload=wl,
        workers=workers,
        shards=shards,
        method=dataclasses.replace(run.method, **method),
    )


def touched(smoke, **kw):
    kw.setdefault("placement", BlockSpec("parsa"))
    return spec_for(smoke, codec=BlockSpec("kv"), pull="touched", **kw)


def simulate(spec, prepared):
    job = staged_job(spec, load_prepared(prepared[spec.dataset.name]))
    return job, SimBackend().run(job)


def problem_of(job):
    ds = job.dataset
    return PlacementProblem(
        len(ds.y_train), job.model.n_params, job.model.incidence(ds.X_train), job.spec.seed
    )


def totals(recs):
    return {
        k: sum(getattr(r, k) for r in recs)
        for k in ("bytes_up", "bytes_down", "remote_bytes_up", "remote_bytes_down")
    }


# --------------------------------------------------------------------------- worker


def test_drawing_ahead_keeps_the_batch_order(smoke, prepared):
    spec = touched(smoke)
    job = staged_job(spec, load_prepared(prepared["zipf_rcv1"]))
    plain_spec = dataclasses.replace(spec, method=smoke.recipes["dense_bsp"])
    plain = staged_job(plain_spec, job.dataset, job.assignment)
    w, ref = job.workers[1], plain.workers[1]
    assert w.touched and not ref.touched
    for _ in range(12):  # more than one epoch of the worker's 800 samples at batch 64
        idx = w.next_batch()
        assert w.next_batch() is idx  # drawn once
        w.touched_keys()
        w.compute()
        ref.compute()
        assert (w.last_batch != ref.last_batch).nnz == 0


def test_touched_keys_are_the_batch_columns_split_by_shard(smoke, prepared):
    job = staged_job(touched(smoke), load_prepared(prepared["zipf_rcv1"]))
    w = job.workers[2]
    idx = w.next_batch()
    per_shard = w.touched_keys()
    cols = np.unique(job.model.incidence(w.X[idx]).indices)
    got = np.sort(np.concatenate([w.shard_keys[s][k] for s, k in enumerate(per_shard)]))
    np.testing.assert_array_equal(got, cols)
    for s, k in enumerate(per_shard):
        assert np.all(np.diff(k) > 0) and np.all(job.assignment.key_owner[w.shard_keys[s][k]] == s)


# --------------------------------------------------------------------------- sim runs


def test_kv_touched_same_parameters_as_dense_params(smoke, prepared):
    """With l2 = 0 an untouched key's gradient is 0: touched + kv is dense BSP, bit for bit."""
    job, recs = simulate(touched(smoke), prepared)
    dense, drecs = simulate(spec_for(smoke, placement=BlockSpec("parsa")), prepared)
    assert job.spec.workload.l2 == 0
    np.testing.assert_array_equal(job.global_params(), dense.global_params())
    assert [r.test_accuracy for r in recs] == [r.test_accuracy for r in drecs]
    # ...for a fraction of the bytes
    assert totals(recs)["remote_bytes_up"] < totals(drecs)["remote_bytes_up"] / 2


@pytest.mark.parametrize("header", [0, 64])
@pytest.mark.parametrize("placement", ["parsa", "random"])
def test_replayed_prediction_equals_measured_bytes(smoke, prepared, placement, header):
    spec = touched(smoke, placement=BlockSpec(placement), iterations=12)
    spec = dataclasses.replace(
        spec, scenario=dataclasses.replace(spec.scenario, header_bytes=header)
    )
    job, recs = simulate(spec, prepared)
    rep = replayed_traffic(
        problem_of(job), job.assignment, 4, 4, True, spec.workload.batch_size, 12, spec.seed,
        header_bytes=header,
    )  # fmt: skip
    assert {k: rep[k] for k in totals(recs)} == totals(recs)
    per_iter = [sum(r.remote_bytes_up for r in recs if r.iteration == t) for t in range(12)]
    assert rep["remote_bytes_up_per_iteration"] == per_iter


def test_record_bytes_follow_the_wire_format(smoke, prepared):
    job, recs = simulate(touched(smoke, iterations=3), prepared)
    # Replay worker 0's batches: request 8 B + push 12 B per key up, answer 12 B down, and the
    # 4-byte CRC-32 trailer on the request's key list, the push and the answer.
    w = staged_job(job.spec, job.dataset).workers[0]
    for r in sorted((r for r in recs if r.worker == 0), key=lambda r: r.iteration):
        counts = [k.size for k in w.touched_keys()]
        w.compute()
        assert r.shard_bytes_up == tuple(20 * m + 8 for m in counts)
        assert r.shard_bytes_down == tuple(12 * m + 4 for m in counts)
        # Colocated: shard 0 is on worker 0's machine, its traffic is local.
        assert r.remote_bytes_up == r.bytes_up - r.shard_bytes_up[0]
        assert r.remote_bytes_down == r.bytes_down - r.shard_bytes_down[0]
        assert r.shard_bytes_up[0] > 0


def test_dedicated_servers_make_every_byte_remote(smoke, prepared):
    spec = dataclasses.replace(touched(smoke, iterations=3), colocated=False)
    job, recs = simulate(spec, prepared)
    t = totals(recs)
    assert (t["remote_bytes_up"], t["remote_bytes_down"]) == (t["bytes_up"], t["bytes_down"])
    rep = replayed_traffic(problem_of(job), job.assignment, 4, 4, False, 64, 3, spec.seed)
    assert {k: rep[k] for k in t} == t


def test_expected_step_traffic_matches_the_replay_mean(smoke, prepared):
    job = staged_job(touched(smoke), load_prepared(prepared["zipf_rcv1"]))
    prob = problem_of(job)
    exp = expected_step_traffic(prob, job.assignment, 4, 4, True, 64)
    rep = replayed_traffic(prob, job.assignment, 4, 4, True, 64, 200, job.spec.seed)
    for k in ("remote_bytes_up", "remote_bytes_down", "bytes_up"):
        assert exp[k] == pytest.approx(rep[k] / 200, rel=0.01)
    full = predicted_traffic(prob, job.assignment, 4, 4, True, batch_size=64)
    assert full["per_step"] == exp
    # A batch covers the whole data set: every key of N_p, as in the full-pass prediction.
    whole = expected_step_traffic(prob, job.assignment, 4, 4, True, 10**6)
    assert whole["remote_per_worker"] == pytest.approx(full["remote_per_worker"])


def test_dense_model_touches_every_key_like_params(smoke, prepared):
    spec = touched(smoke, workload="digits_mlp", placement=BlockSpec("range"), iterations=4)
    job, recs = simulate(spec, prepared)
    dense, drecs = simulate(spec_for(smoke, "digits_mlp", iterations=4), prepared)
    np.testing.assert_array_equal(job.global_params(), dense.global_params())

    def order(rs):  # completion order differs: kv and dense codecs cost different times
        return [r.loss for r in sorted(rs, key=lambda r: (r.iteration, r.worker))]

    assert order(recs) == order(drecs)
    sizes = [len(s.keys) for s in job.shards]
    assert all(r.shard_bytes_down == tuple(12 * n + 4 for n in sizes) for r in recs)
    assert all(r.shard_bytes_up == tuple(20 * n + 8 for n in sizes) for r in recs)
    rep = replayed_traffic(problem_of(job), job.assignment, 4, 4, True, 32, 4, spec.seed)
    assert rep["bytes_down"] == totals(recs)["bytes_down"]


def test_other_codecs_push_only_the_batch_keys(smoke, prepared):
    """A dense codec under touched pulls: same model, the push is the masked shard vector."""
    spec = spec_for(smoke, iterations=4, pull="touched", placement=BlockSpec("parsa"))
    job, recs = simulate(spec, prepared)
    ref, _ = simulate(touched(smoke, iterations=4), prepared)
    np.testing.assert_array_equal(job.global_params(), ref.global_params())
    sizes = [len(s.keys) for s in job.shards]
    for r in recs:
        # Up: the key list (8 B per key + its 4-byte CRC-32) and the push; down: 12 B per key.
        pushes = [
            u - d // 12 * 8 - 4 for u, d in zip(r.shard_bytes_up, r.shard_bytes_down, strict=True)
        ]
        assert pushes == [4 * n for n in sizes]


def test_asynchronous_touched_runs(smoke, prepared):
    spec = touched(smoke, sync=BlockSpec("ssp", {"staleness": 2}), iterations=6)
    _, recs = simulate(spec, prepared)
    assert len(recs) == 24 and max(r.staleness for r in recs) <= 2


def test_shipped_jpdc_recipes_pull_touched_keys(smoke, prepared):
    recipes = load_methods(config_root() / "methods.yaml")
    for name in JPDC:
        assert recipes[name].pull == "touched" and recipes[name].codec.name == "kv"
    spec = dataclasses.replace(spec_for(smoke, iterations=2), method=recipes["random_partition"])
    job, recs = simulate(spec, prepared)
    rep = replayed_traffic(problem_of(job), job.assignment, 4, 4, True, 64, 2, spec.seed)
    assert {k: rep[k] for k in totals(recs)} == totals(recs)


# --------------------------------------------------------------------------- refusals


def test_touched_refuses_codec_down(smoke, prepared):
    spec = touched(smoke, codec_down=BlockSpec("fp16"))
    with pytest.raises(ConfigError, match="pull: touched .* remove codec_down"):
        staged_job(spec, load_prepared(prepared["zipf_rcv1"]))


def test_touched_refuses_round_policies(smoke, prepared):
    spec = touched(smoke, sync=BlockSpec("pcp"))
    with pytest.raises(ConfigError, match="needs pull: params, not 'touched'"):
        staged_job(spec, load_prepared(prepared["zipf_rcv1"]))


def test_horovod_refuses_touched(smoke, prepared):
    job = staged_job(touched(smoke), load_prepared(prepared["zipf_rcv1"]))
    with pytest.raises(ConfigError, match="method 'dense_bsp' sets pull: touched"):
        check_job(job)


def test_shard_checks_touched_requests_and_answers(smoke, prepared):
    job = staged_job(touched(smoke), load_prepared(prepared["zipf_rcv1"]))
    shard, ctx = job.shards[1], CodecContext()
    with pytest.raises(ValueError, match="needs the requested keys"):
        shard.pull(0, 0, ctx)
    keys = np.array([0, 3, 5])
    answer = shard.pull(0, 0, ctx, keys=keys)
    assert answer.wire_bytes == 36 + 4 and len(pack_keys(keys, len(shard.keys))) == 24 + 4
    np.testing.assert_array_equal(shard.decode_touched(answer, keys), shard.values[keys])
    with pytest.raises(ValueError, match="answered 3 keys, not the 2 requested"):
        shard.decode_touched(answer, keys[:2])


def test_build_job_hashes_once(smoke, prepared):
    """A job's (hashed) data set builds the same job again, as every dist rank does."""
    recipes = load_methods(config_root() / "methods.yaml")
    spec = dataclasses.replace(spec_for(smoke, iterations=2), method=recipes["hashing_only"])
    job = staged_job(spec, load_prepared(prepared["zipf_rcv1"]))
    again = staged_job(spec, job.dataset, job.assignment)
    assert again.dataset.n_features == job.dataset.n_features < 47236 / 8
    other = dataclasses.replace(spec, seed=spec.seed + 1)
    with pytest.raises(ConfigError, match="already hashed .* pass the raw data set"):
        staged_job(other, job.dataset)
