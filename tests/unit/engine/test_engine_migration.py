"""The dynamic partition in the sim run loop: keys moving between shards mid-run.

A move must change nothing but where keys live: every per-key state (values, momentum, the
workers' error-feedback residuals and optimizer replicas) follows its keys, so with a codec whose
selection does not depend on the shard's key set the run is bit-identical to one without moves;
the moved bytes are counted as remote down traffic and the move's transfers as communication.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from psml_core.config import BlockSpec
from psml_core.data.store import load_prepared
from psml_core.engine import SimBackend, staged_job
from psml_core.engine.horovod.backend import check_job
from psml_core.engine.migration import chunk_traffic, move_keys
from psml_core.engine.training import train
from psml_core.errors import ConfigError
from psml_core.placement import DynamicChunkPartition, Reassignment
from psml_core.recipes import load_methods

PERIOD = 4
CHUNK = 256


def spec_for(smoke, recipe="jpdc_dynamic", iterations=13, workers=4, shards=4, **method):
    run = smoke.run("digits_mlp", "dense_bsp", "dc_10g", smoke.seeds[0])
    base = load_methods()[recipe]
    placement = BlockSpec("dynamic", {**base.placement.params, "chunk": CHUNK, "period": PERIOD})
    return dataclasses.replace(
        run,
        workload=dataclasses.replace(run.workload, iterations=iterations),
        workers=workers,
        shards=shards,
        method=dataclasses.replace(base, **{"placement": placement, **method}),
    )


def simulate(spec, prepared):
    job = staged_job(spec, load_prepared(prepared[spec.dataset.name]))
    recs = sorted(SimBackend().run(job), key=lambda r: (r.iteration, r.worker))
    return job, recs


def rotate(monkeypatch):
    """Force a reassignment at every decision step: chunk q moves to shard (owner + 1) mod S."""
    moves: list[Reassignment] = []

    def forced(self: DynamicChunkPartition, step: int) -> Reassignment | None:
        if step <= 0 or step % self.period:
            return None
        new = ((self.chunk_owner + 1) % self.shards).astype(np.int32)
        moved = np.flatnonzero(new != self.chunk_owner)
        self.chunk_owner = new
        move = Reassignment(
            step, new.copy(), self.key_owner, moved, int(4 * self.chunk_sizes[moved].sum()), 0.0
        )
        moves.append(move)
        return move

    monkeypatch.setattr(DynamicChunkPartition, "maybe_reassign", forced)
    return moves


def gathered(job, parts):
    """Per-shard vectors (on each shard's keys) as one vector over all keys."""
    out = np.zeros(job.model.n_params, dtype=np.float64)
    for keys, part in zip([s.keys for s in job.shards], parts, strict=True):
        out[keys] = part
    return out


def state_of(job):
    return {
        "values": job.global_params().astype(np.float64),
        "server_velocity": gathered(job, [s.optimizer.velocity for s in job.shards]),
        **{
            f"residual_{w.rank}": gathered(job, [c.residual for c in w.codecs]) for w in job.workers
        },
        **{
            f"replica_velocity_{w.rank}": gathered(job, [o.velocity for o in w.optimizers])
            for w in job.workers
        },
    }


def test_move_keys_carries_every_per_key_state(smoke, prepared):
    """Values, server momentum, EF residuals and replica momentum survive any regrouping."""
    job, _ = simulate(spec_for(smoke, iterations=3), prepared)  # before any decision
    before = state_of(job)
    assert any(np.any(v != 0) for k, v in before.items() if k.startswith("residual"))
    rng = np.random.default_rng(7)
    owner = rng.integers(0, job.spec.shards, job.model.n_params).astype(np.int32)  # any split
    new = move_keys(job, owner)
    for s, shard in enumerate(job.shards):
        assert np.array_equal(shard.keys, np.flatnonzero(owner == s))
        assert shard.values.size == shard.optimizer.velocity.size == shard.keys.size
        assert new[s] is job.workers[0].shard_keys[s]
    after = state_of(job)
    for name, vec in before.items():
        assert np.array_equal(after[name], vec), name
    assert np.array_equal(job.assignment.key_owner, owner)


def test_forced_moves_change_nothing_under_a_dense_codec(smoke, prepared, monkeypatch):
    """Dense pushes, update broadcast, momentum: moves leave the run bit-identical."""
    spec = spec_for(smoke, codec=BlockSpec("none"))
    still_job, still = simulate(spec, prepared)
    assert still_job.dynamic is not None and not any(r.migration_bytes for r in still)
    moves = rotate(monkeypatch)
    job, recs = simulate(spec, prepared)
    assert [m.step for m in moves] == [4, 8, 12]
    assert job.global_params().tobytes() == still_job.global_params().tobytes()
    assert [r.loss for r in recs] == [r.loss for r in still]
    assert [r.test_accuracy for r in recs] == pytest.approx(
        [r.test_accuracy for r in still], nan_ok=True
    )
    # Every shard ended up where three rotations put it.
    start = np.repeat(np.arange(4), -(-job.dynamic.n_chunks // 4))[: job.dynamic.n_chunks]
    assert np.array_equal(job.dynamic.chunk_owner, (start + 3) % 4)


def test_moved_bytes_are_remote_down_traffic_from_the_old_shard(smoke, prepared, monkeypatch):
    spec = spec_for(smoke, codec=BlockSpec("none"))
    _, still = simulate(spec, prepared)
    moves = rotate(monkeypatch)
    job, recs = simulate(spec, prepared)
    header = spec.scenario.header_bytes
    dyn = job.dynamic
    for move in moves:
        # chunk q went from shard (new - 1) to shard new, i.e. to machine new (colocated).
        want = np.zeros((4, 4), dtype=np.int64)  # receiving worker x old shard
        for q in move.moved_chunks:
            new = int(move.chunk_owner[q])
            want[new, (new - 1) % 4] += 4 * int(dyn.chunk_sizes[q]) + header
        for r, r0 in zip(
            [r for r in recs if r.iteration == move.step],
            [r for r in still if r.iteration == move.step],
            strict=True,
        ):
            assert r.migration_bytes == int(want[r.worker].sum())
            if move is moves[0]:  # later, the pulls before a move already see moved shards
                extra = np.subtract(r.shard_bytes_down, r0.shard_bytes_down)
                assert np.array_equal(extra, want[r.worker])
                assert r.remote_bytes_down - r0.remote_bytes_down == r.migration_bytes
                assert r.bytes_up == r0.bytes_up
    assert sum(r.migration_bytes for r in recs) == sum(
        int(dyn.chunk_sizes[m.moved_chunks].sum()) * 4 + header * m.moved_chunks.size for m in moves
    )
    assert all(r.migration_bytes == 0 for r in recs if r.iteration % PERIOD)


def test_a_move_is_communication_time_and_the_split_stays_exact(smoke, prepared, monkeypatch):
    spec = spec_for(smoke, codec=BlockSpec("none"))
    _, still = simulate(spec, prepared)
    rotate(monkeypatch)
    _, recs = simulate(spec, prepared)
    for p in range(spec.workers):
        prev = 0.0
        for r in [r for r in recs if r.worker == p]:
            step = r.compute_s + r.codec_s + r.comm_s + r.wait_s
            assert step == pytest.approx(r.time_s - prev, rel=1e-9)
            prev = r.time_s
    # The move makes its step longer on every worker, and the run as a whole.
    at = {r.worker: r for r in recs if r.iteration == PERIOD}
    at0 = {r.worker: r for r in still if r.iteration == PERIOD}
    assert all(at[p].comm_s > at0[p].comm_s for p in range(spec.workers))
    assert max(r.time_s for r in recs) > max(r.time_s for r in still)


def test_error_feedback_residuals_follow_their_keys_in_a_run(smoke, prepared, monkeypatch):
    """Top-k with EF: after forced moves the run still converges and nothing is lost.

    Conservation per key: server momentum aside, every worker's pushed mass plus its residual
    is what it computed; here checked as the residual living exactly on the worker's new keys.
    """
    rotate(monkeypatch)
    job, recs = simulate(spec_for(smoke, iterations=30), prepared)
    for w in job.workers:
        for codec, keys in zip(w.codecs, w.shard_keys, strict=True):
            assert codec.residual.shape == keys.shape
    assert np.isfinite(job.global_params()).all()
    first = np.mean([r.loss for r in recs if r.iteration < 3])
    last = np.mean([r.loss for r in recs if r.iteration >= 27])
    assert last < 0.6 * first, (first, last)


def test_decisions_are_made_from_observed_traffic_and_kept_in_the_summary(
    smoke, prepared, tmp_path
):
    """Unforced: the statistics see every worker's bytes; each decision lands in summary.json."""
    spec = spec_for(smoke, iterations=9)
    train(spec, prepared[spec.dataset.name], tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    decisions = summary["placement_decisions"]
    assert [d["step"] for d in decisions] == [4, 8]
    for d in decisions:
        assert d["remote_before"] > 0 and d["remote_after"] <= d["remote_before"]
        assert d["accepted"] == (d["moved_chunks"] > 0 and d["saving_bytes"] > d["migration_bytes"])
    static = spec_for(smoke, iterations=9, placement=BlockSpec("range"))
    train(static, prepared[spec.dataset.name], tmp_path / "static")
    assert "placement_decisions" not in json.loads((tmp_path / "static/summary.json").read_text())


def test_chunk_traffic_shares_a_message_among_the_keys_it_carries():
    keys = np.array([10, 11, 12, 13])
    sent, per_key = chunk_traffic(keys, np.array([0.0, 2.0, 0.0, -1.0], np.float32), 16)
    assert sent.tolist() == [11, 13] and per_key == 8.0
    sent, per_key = chunk_traffic(keys, np.zeros(4, np.float32), 20)
    assert sent.tolist() == [10, 11, 12, 13] and per_key == 5.0


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"sync": BlockSpec("ssp", {"staleness": 2}), "pull": "params"}, "use sync: {name: bsp}"),
        ({"codec": BlockSpec("dfs")}, "codec 'dfs'.*cannot be moved"),
        (
            {"codec": BlockSpec("topk", {"ratio": 0.1, "down_ratio": 0.1})},
            "codec 'topk'.*no down_ratio",
        ),
        ({"pull": "delta"}, "pull: params, aggregate or touched"),
        ({"lossless": "snappy"}, "lossless"),
    ],
)
def test_unmovable_recipes_are_refused_with_the_fix(smoke, prepared, change, match):
    spec = spec_for(smoke, **change)
    with pytest.raises(ConfigError, match=match):
        staged_job(spec, load_prepared(prepared[spec.dataset.name]))


def test_horovod_refuses_a_dynamic_placement(smoke, prepared):
    spec = spec_for(smoke)
    job = staged_job(spec, load_prepared(prepared[spec.dataset.name]))
    with pytest.raises(ConfigError, match="placement 'dynamic'.*sim backend"):
        check_job(job)
