"""DFS dynamic block size, wired end to end: reports in the pushes, B and mask in shared()."""

from __future__ import annotations

import dataclasses
import math
import struct
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sealing import TRAILER, body_of, sealed

from psml_core.codecs import CodecContext, ErrorFeedback, Payload, make_codec
from psml_core.codecs.dfs import DEFAULT_CANDIDATES, DFSCodec
from psml_core.codecs.dfs_cost import (
    KEY_BLOCK,
    KEY_MASK,
    KEY_REPORT,
    CostReport,
    cost_word,
    word_cost,
)
from psml_core.config import BlockSpec
from psml_core.engine.optim import SGD
from psml_core.engine.server import ServerShard
from psml_core.sync import SYNC_POLICIES

# ---------------------------------------------------------------- plain references


def blocks_of(n: int, b: int) -> list[tuple[int, int, int]]:
    """(block id, start, stop) of every block, one after another."""
    out, bid, start = [], 0, 0
    while start < n:
        out.append((bid, start, min(start + b, n)))
        bid, start = bid + 1, start + b
    return out


def ref_energy(v: np.ndarray, b: int) -> list[float]:
    return [sum(float(t) ** 2 for t in v[s:e]) for _, s, e in blocks_of(v.size, b)]


def ref_budget(rho: float, n: int, b: int) -> int:
    nblk = len(blocks_of(n, b))
    if nblk == 0:
        return 0
    k = 0
    while k * b < rho * n:
        k += 1
    return max(1, min(k, nblk))


def ref_remap(mask, old_b: int, new_b: int, n: int) -> list[bool]:
    """A new block is in when it shares an element with an old block that is in."""
    old = blocks_of(n, old_b)
    return [
        any(mask[i] and s < oe and os < e for i, os, oe in old) for _, s, e in blocks_of(n, new_b)
    ]


def ref_select(v, b, rho, mask=None, lam=1.0, eta=None) -> list[int]:
    e = ref_energy(v, b)
    score = [e[i] * (1 + lam) if mask is not None and mask[i] else e[i] for i in range(len(e))]
    order = sorted(range(len(e)), key=lambda i: (-score[i], i))
    chosen, kept = [], 0.0
    for i in order[: ref_budget(rho, v.size, b)]:
        chosen.append(i)
        kept += e[i]
        if eta is not None and kept >= eta * sum(e):
            break
    return sorted(chosen)


def ref_bytes(n: int, b: int, ids) -> int:
    """|S| (4B + 4), with 4r + 4 for a short last block."""
    ids = set(ids)
    return sum(4 + 4 * (e - s) for bid, s, e in blocks_of(n, b) if bid in ids)


def ref_records(v: np.ndarray, b: int, ids) -> bytes:
    out = b""
    for bid, s, e in blocks_of(v.size, b):
        if bid in ids:
            out += struct.pack("<I", bid) + b"".join(struct.pack("<f", float(t)) for t in v[s:e])
    return out


def ref_kept(v: np.ndarray, b: int, ids) -> np.ndarray:
    out = np.zeros(v.size, dtype=np.float32)
    for bid, s, e in blocks_of(v.size, b):
        if bid in ids:
            out[s:e] = v[s:e]
    return out


def ref_word(n: int, b: int, ids) -> int:
    """Count of kept blocks; bit 31 when the short last block is one of them."""
    last = blocks_of(n, b)[-1] if n else None
    short = last is not None and last[2] - last[1] < b and last[0] in set(ids)
    return len(ids) + (2**31 if short else 0)


def ref_report_ids(v, cur_b, prev, rho, candidates, lam=1.0, eta=None) -> dict[int, list[int]]:
    """The worker's selection at every candidate, by brute force (bonus mask remapped)."""
    out = {}
    for b in candidates:
        mask = None if prev is None else ref_remap(prev, cur_b, b, v.size)
        out[b] = ref_select(v, b, rho, mask, lam, eta)
    return out


def ref_totals(per_worker, union_prev, prev_b, pushed: int, n: int) -> dict[int, int]:
    """sum_p up_p(B) + P |U(B)| (4B + 4); U estimated from the last union and its overlap.

    U = min(ceil(|G| sum_p c_p(B) / pushed), |cover of G on B's grid|), clamped to
    [max_p c_p(B), min(nblk, sum_p c_p(B))]; ``pushed`` = sum_p |S_p| at the last B.
    """
    out = {}
    for b in per_worker[0]:
        nblk = len(blocks_of(n, b))
        counts = [len(w[b]) for w in per_worker]
        up = sum(ref_bytes(n, b, w[b]) for w in per_worker)
        cover = sum(ref_remap(union_prev, prev_b, b, n))
        overlap = math.ceil(Fraction(sum(union_prev) * sum(counts), pushed))
        est = min(max(min(cover, overlap), max(counts)), min(nblk, sum(counts)))
        last_in = any(nblk - 1 in w[b] for w in per_worker)
        last_len = n - (nblk - 1) * b if nblk else b
        down = est * (4 * b + 4) - (4 * (b - last_len) if last_in and est else 0)
        out[b] = up + len(per_worker) * down
    return out


def ctx_with(step=0, ratio=0.01, b=None, mask=None, report=False) -> CodecContext:
    extra = {}
    if b is not None:
        extra[KEY_BLOCK] = b
    if mask is not None:
        extra[KEY_MASK] = np.asarray(mask, dtype=bool)
    if report:
        extra[KEY_REPORT] = True
    return CodecContext(step=step, ratio=ratio, extra=extra)


def next_ctx(server, step: int, ratio: float) -> CodecContext:
    """What the engine hands the workers: nothing at step 0, then the server's shared()."""
    extra = server.shared()[0] if step else {}
    return CodecContext(step=step, ratio=ratio, extra=extra)


# ---------------------------------------------------------------- the report on the wire


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("eta", [None, 0.5])
def test_push_with_report_matches_reference(seed, eta):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 700))
    cands = (4, 8, 16, 64)
    b = int(rng.choice([4, 16, 20]))  # 20: an initial B outside the candidate set
    rho = float(rng.choice([0.02, 0.1, 0.4]))
    v = (rng.standard_normal(n) * rng.exponential(1.0, n)).astype(np.float32)
    prev = rng.random(len(blocks_of(n, b))) < 0.3
    codec = DFSCodec(energy=eta, candidates=cands)
    ctx = ctx_with(ratio=rho, b=b, mask=prev, report=True)
    p = codec.encode(v, ctx)
    per_b = ref_report_ids(v, b, prev, rho, cands, eta=eta)
    ids = ref_select(v, b, rho, prev, eta=eta)
    words = struct.pack("<4I", *(ref_word(n, c, per_b[c]) for c in cands))
    assert p.buffer == sealed(words + ref_records(v, b, ids), n=n)
    assert p.wire_bytes == 16 + ref_bytes(n, b, ids) + TRAILER
    report, got_ids, dense = codec.parse(p, ctx)
    assert report.costs == {c: ref_bytes(n, c, per_b[c]) for c in cands}
    assert got_ids.tolist() == ids
    np.testing.assert_array_equal(dense, ref_kept(v, b, ids))
    np.testing.assert_array_equal(codec.decode(p, ctx), dense)
    # Without the request the same push has no report: the ctx alone decides the layout.
    plain = codec.encode(v, ctx_with(ratio=rho, b=b, mask=prev))
    assert body_of(plain.buffer, n=n) == body_of(p.buffer, n=n)[16:]


@st.composite
def report_cases(draw):
    n = draw(st.integers(0, 400))
    cands = tuple(sorted(draw(st.sets(st.integers(1, 70), min_size=1, max_size=5))))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    v = rng.standard_normal(n).astype(np.float32)
    if n and draw(st.booleans()):
        v[rng.random(n) < 0.7] = 0.0
    rho = draw(st.sampled_from([0.01, 0.1, 0.5, 1.0]))
    eta = draw(st.sampled_from([None, 0.3, 0.9]))
    return n, cands, v, rho, eta


@settings(max_examples=60, deadline=None)
@given(report_cases())
def test_report_round_trip_and_brute_force_costs(case):
    n, cands, v, rho, eta = case
    codec = DFSCodec(candidates=cands, energy=eta)
    ctx = ctx_with(ratio=rho, b=cands[0], report=True)
    report = codec.predicted_costs(v, ctx)
    wire = report.to_bytes()
    assert len(wire) == report.wire_bytes == codec.cost_report_bytes == 4 * len(cands)
    back = CostReport.from_bytes(wire, n, cands)
    assert back == report and back.masks == {}  # masks never travel
    codec.check_report(back, ctx)
    per_b = ref_report_ids(v, cands[0], None, rho, cands, eta=eta)
    assert report.costs == {b: ref_bytes(n, b, per_b[b]) for b in cands}
    assert struct.unpack(f"<{len(cands)}I", wire) == tuple(ref_word(n, b, per_b[b]) for b in cands)
    assert report.counts == {b: len(per_b[b]) for b in cands}
    # the push carries exactly this report
    assert codec.encode(v, ctx).buffer[: len(wire)] == wire


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 300), st.integers(1, 64), st.data())
def test_cost_word_is_the_exact_inverse(n, b, data):
    nblk = len(blocks_of(n, b))
    short = n % b != 0
    count = data.draw(st.integers(0, nblk))
    last = short and count > 0 and (count == nblk or data.draw(st.booleans()))
    ids = list(range(count - 1)) + [nblk - 1] if last else list(range(count))
    cost = ref_bytes(n, b, ids)
    word = cost_word(n, b, cost)
    assert word == ref_word(n, b, ids)
    assert word_cost(n, b, word) == cost
    with pytest.raises(ValueError):
        word_cost(n, b, nblk + 1)  # more blocks than the vector has
    if not short and nblk:
        with pytest.raises(ValueError, match="short last block"):
            word_cost(n, b, max(count, 1) | 2**31)


def test_tampered_reports_rejected():
    rng = np.random.default_rng(3)
    n, rho = 1024, 0.05
    codec = DFSCodec(candidates=(16, 64, 256))
    ctx = ctx_with(ratio=rho, b=64, report=True)
    good = body_of(codec.encode(rng.standard_normal(n).astype(np.float32), ctx).buffer, n=n)
    words = list(struct.unpack("<3I", good[:12]))

    def with_words(ws):
        return Payload("dfs", n, sealed(struct.pack("<3I", *ws) + good[12:], n=n))

    with pytest.raises(ValueError, match="budget"):
        codec.decode(with_words([words[0] + 1, words[1], words[2]]), ctx)
    with pytest.raises(ValueError, match="short last block"):  # 256 divides 1024
        codec.decode(with_words([words[0], words[1], words[2] | 2**31]), ctx)
    n = 1000  # 1000 = 15 * 64 + 40: the flag is possible, but the records disagree with it
    good = body_of(codec.encode(rng.standard_normal(n).astype(np.float32), ctx).buffer, n=n)
    words = list(struct.unpack("<3I", good[:12]))
    assert not words[1] & 2**31
    with pytest.raises(ValueError, match="follow"):
        codec.decode(with_words([words[0], words[1] | 2**31, words[2]]), ctx)
    with pytest.raises(ValueError):  # the report is missing though the ctx asks for one
        codec.decode(Payload("dfs", n, sealed(good[12:], n=n)), ctx)
    with pytest.raises(ValueError, match="cost report"):
        codec.decode(Payload("dfs", n, sealed(good[:8], n=n)), ctx)
    # a report where none is due is not taken for records
    with pytest.raises(ValueError):
        codec.decode(Payload("dfs", n, sealed(good, n=n)), ctx_with(ratio=rho, b=64))


# ---------------------------------------------------------------- the server's choice


def run_rounds(codec_kw, grads_per_step, ratio, workers=None, ef=False):
    """Drive P worker codecs and one server by hand; returns (server, payloads per step, ctxs)."""
    P = len(grads_per_step[0])
    make = (lambda: ErrorFeedback(DFSCodec(**codec_kw))) if ef else (lambda: DFSCodec(**codec_kw))
    workers = workers or [make() for _ in range(P)]
    server = DFSCodec(**codec_kw).server()
    log = []
    for t, grads in enumerate(grads_per_step):
        ctx = next_ctx(server, t, ratio)
        pls = [w.encode(g, ctx) for w, g in zip(workers, grads, strict=True)]
        agg = server.aggregate(pls, ctx) / np.float32(P)
        server.encode_down(agg, ctx)
        log.append((ctx, pls))
    return server, log


@pytest.mark.parametrize("seed", range(6))
def test_choice_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(300, 3000))
    P = int(rng.integers(1, 5))
    rho = float(rng.choice([0.01, 0.05, 0.2]))
    eta = [None, 0.6][seed % 2]
    cands = (16, 32, 128, 512)
    common = (rng.standard_normal(n) * rng.exponential(1, n)).astype(np.float32)
    steps = [[common + rng.standard_normal(n).astype(np.float32) for _ in range(P)] for _ in "ab"]
    server, log = run_rounds({"candidates": cands, "energy": eta, "block_size": 64}, steps, rho)
    ctx1, pls1 = log[1]
    assert ctx1.extra == {KEY_BLOCK: 64, KEY_REPORT: True, KEY_MASK: ctx1.extra[KEY_MASK]}
    # brute force: each worker's selection at every candidate, the union of this step's pushes
    per_worker = [
        ref_report_ids(g, 64, ctx1.extra[KEY_MASK], rho, cands, eta=eta) for g in steps[1]
    ]
    union = [False] * len(blocks_of(n, 64))
    pushed = 0
    for g in steps[1]:
        for i in ref_select(g, 64, rho, ctx1.extra[KEY_MASK], eta=eta):
            union[i] = True
            pushed += 1
    totals = ref_totals(per_worker, union, 64, pushed, n)
    assert server.last_costs == totals
    assert server.block_size == min(cands, key=lambda b: (totals[b], b))
    assert server.history == [(1, server.block_size)]


def test_union_estimate_is_exact_at_the_current_block_size():
    rng = np.random.default_rng(5)
    n, P, rho = 5000, 3, 0.05
    steps = [[rng.standard_normal(n).astype(np.float32) for _ in range(P)] for _ in range(2)]
    server, _ = run_rounds({"block_size": 128}, steps, rho)
    reports = server.last_reports
    assert all(r.masks == {} for r in reports)  # parsed from the wire: counts only
    assert server.union_estimate(reports, 128)[0] == int(server.union.sum())


# ---------------------------------------------------------------- structure drives B


def spiky(rng, n, P, pos):
    xs = []
    for _ in range(P):
        x = np.zeros(n, np.float32)
        x[pos] = rng.choice([-10.0, 10.0], pos.size)
        xs.append(x)
    return xs


def clustered(rng, n, P, start=8192, size=2048):
    xs = []
    for _ in range(P):
        x = np.zeros(n, np.float32)
        x[start : start + size] = rng.choice([-1.0, 1.0], size)
        xs.append(x)
    return xs


def test_block_size_follows_the_gradient_structure():
    """Isolated spikes -> the smallest B; a dense contiguous region -> the largest; and back.

    With ``energy`` the kept counts (hence the reports) depend on the layout: 16 spikes cost
    16 small blocks at B = 32 but 16 blocks of 4 KiB at B = 1024; a dense, uniform 2048-element
    region needs all 64 blocks of 32 (64 ids) but only 2 blocks of 1024.
    """
    rng = np.random.default_rng(0)
    n, P = 65536, 4
    pos = np.random.default_rng(1).choice(n, 16, replace=False)
    grads = (
        [spiky(rng, n, P, pos) for _ in range(5)]
        + [clustered(rng, n, P) for _ in range(5)]
        + [spiky(rng, n, P, pos) for _ in range(5)]
    )
    server, log = run_rounds({"ratio": 0.05, "energy": 0.999}, grads, 0.05)
    used = [ctx.extra.get(KEY_BLOCK, 256) for ctx, _ in log]
    # reports from step 1 on; the choice made on step t's pushes is used from step t + 1
    assert used == [256, 256] + [32] * 3 + [32] + [1024] * 4 + [1024] + [32] * 4
    assert server.history[:4] == [(1, 32), (2, 32), (3, 32), (4, 32)]
    assert all(b in DEFAULT_CANDIDATES for _, b in server.history)
    # the dynamic B pays off: a spike step at B = 32 is a record of 132 B per spike plus the
    # report; at the fixed B = 256 the budget (ceil(0.05 n / 256) = 13 blocks of 1028 B) is
    # exhausted before the energy target (16 spikes, in 16 different blocks)
    fixed, flog = run_rounds({"ratio": 0.05, "energy": 0.999, "dynamic": False}, grads, 0.05)
    assert len({i // 32 for i in pos}) == len({i // 256 for i in pos}) == 16
    assert all(p.wire_bytes == 16 * 132 + 24 + TRAILER for p in log[3][1])
    assert all(p.wire_bytes == 13 * 1028 + TRAILER for p in flog[3][1])
    dyn_up = sum(p.wire_bytes for _, pls in log for p in pls)
    assert dyn_up < sum(p.wire_bytes for _, pls in flog for p in pls)


def test_rho_budget_alone_moves_b_to_the_cluster_grid():
    """Spec default (no eta): every worker keeps one aligned 2048-element region -> B = 1024."""
    rng = np.random.default_rng(0)
    n, P = 65536, 4
    grads = [clustered(rng, n, P) for _ in range(4)]
    server, log = run_rounds({}, grads, 2048 / n)
    assert [ctx.extra.get(KEY_BLOCK, 256) for ctx, _ in log] == [256, 256, 1024, 1024]
    # up 4 x 2 x 4100, down 4 x 2 x 4100 (the workers agree on the region)
    assert server.last_costs[1024] == 2 * 4 * 2 * 4100 == min(server.last_costs.values())


# ---------------------------------------------------------------- published state


def test_mask_is_remapped_to_the_new_grid():
    rng = np.random.default_rng(2)
    n, P = 65536, 4
    pos = np.random.default_rng(1).choice(n, 16, replace=False)
    grads = [spiky(rng, n, P, pos) for _ in range(2)]
    server, log = run_rounds({"ratio": 0.05, "energy": 0.999}, grads, 0.05)
    assert server.block_size == 32 and server.mask_block == 256  # chosen, not yet used
    # the workers share the spikes: overlap as at B = 256 (13 blocks of 4 x 13 pushed) puts the
    # union at 32 near the 16 spike blocks each worker reports (the cover alone says 104)
    assert server.union_estimate(server.last_reports, 32) == (16, False)
    extra, nbytes = server.shared()
    expected = ref_remap(server.mask.tolist(), 256, 32, n)
    assert extra[KEY_MASK].tolist() == expected
    assert extra[KEY_BLOCK] == 32 and extra[KEY_REPORT] is True
    assert nbytes == 4 + (len(blocks_of(n, 32)) + 7) // 8
    # 32 divides 256: the new mask is exactly the 8 children of every block of M_t
    assert sum(expected) == 8 * int(server.mask.sum()) and server.mask.sum() == 13
    assert all(expected[i // 32] == server.mask[i // 256] for i in pos)
    # the workers read B and the mask from ctx alone and encode on the new grid
    ctx = CodecContext(step=2, ratio=0.05, extra=extra)
    p = DFSCodec(ratio=0.05, energy=0.999).encode(grads[1][0], ctx)
    ids = DFSCodec(ratio=0.05, energy=0.999).decode_records(p, ctx)[0]
    assert sorted(ids.tolist()) == sorted({int(i) // 32 for i in pos})


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 3000),
    st.integers(1, 4),
    st.integers(1, 4),
    st.sampled_from([0.0, 1.0]),
    st.sampled_from([None, 0.8]),
    st.integers(0, 2**32 - 1),
)
def test_invariants_over_random_runs(n, P, K, lam, eta, seed):
    """B in the B-set after every choice; exact up, report and shared-state bytes; determinism."""
    rng = np.random.default_rng(seed)
    cands = (8, 32, 100)
    kw = {"candidates": cands, "reselect_every": K, "lam": lam, "energy": eta, "block_size": 50}
    grads = [
        [(rng.standard_normal(n) * rng.exponential(1, n)).astype(np.float32) for _ in range(P)]
        for _ in range(7)
    ]
    server, log = run_rounds(kw, grads, 0.1)
    for t, (ctx, pls) in enumerate(log):
        b = ctx.extra.get(KEY_BLOCK, 50)
        due = t >= 1 and (t - 1) % K == 0
        assert bool(ctx.extra.get(KEY_REPORT)) == due
        assert (KEY_MASK in ctx.extra) == (t >= 1 and lam > 0)
        for p in pls:
            ids = DFSCodec(**kw).decode_records(p, ctx)[0]
            assert p.wire_bytes == 12 * due + ref_bytes(n, b, ids.tolist()) + TRAILER
    assert [s for s, _ in server.history] == [t for t in range(1, 7) if (t - 1) % K == 0]
    assert all(b in cands for _, b in server.history)
    extra, nbytes = server.shared()
    assert extra[KEY_BLOCK] in cands
    assert nbytes == 4 + (lam > 0) * ((len(blocks_of(n, extra[KEY_BLOCK])) + 7) // 8)
    again, log2 = run_rounds(kw, grads, 0.1)
    assert again.history == server.history
    assert [p.buffer for _, pls in log2 for p in pls] == [p.buffer for _, pls in log for p in pls]


def test_fixed_block_size_publishes_only_the_mask():
    rng = np.random.default_rng(4)
    n = 1000
    grads = [[rng.standard_normal(n).astype(np.float32) for _ in range(3)] for _ in range(3)]
    server, log = run_rounds({"block_size": 64, "dynamic": False}, grads, 0.05)
    extra, nbytes = server.shared()
    assert set(extra) == {KEY_MASK} and nbytes == (16 + 7) // 8
    assert all(KEY_REPORT not in ctx.extra for ctx, _ in log)
    assert server.history == [] and server.block_size == 64
    no_bonus, _ = run_rounds({"block_size": 64, "lam": 0.0}, grads, 0.05)
    assert no_bonus.shared()[1] == 4 and KEY_MASK not in no_bonus.shared()[0]


def test_without_shared_state_nothing_is_reported():
    """As in ``pull: params`` mode (no shared() reaches the workers): B and layout stay put."""
    rng = np.random.default_rng(6)
    codec, server = DFSCodec(), DFSCodec().server()
    for t in range(3):
        ctx = CodecContext(step=t, ratio=0.05)
        xs = [rng.standard_normal(2000).astype(np.float32) for _ in range(2)]
        pls = [codec.encode(x, ctx) for x in xs]
        assert all((p.wire_bytes - TRAILER) % (4 * 256 + 4) in (0, 4 * 208 + 4) for p in pls)
        server.aggregate(pls, ctx)
    assert server.history == [] and server.block_size == 256


# ---------------------------------------------------------------- replicas stay bit-identical


def test_server_shards_and_replicas_stay_bit_identical():
    """Two ServerShards (own key slices, own codec state), four workers, 20 BSP steps, pull:
    aggregate. The structure changes mid-run so B moves; every replica equals its shard bitwise
    after every step, and every answer's bytes are the payload plus 4 + ceil(nblk / 8)."""
    rng = np.random.default_rng(7)
    P, n = 4, 9000
    keys = [np.arange(0, 5000), np.arange(5000, n)]  # uneven shards
    init = rng.standard_normal(n).astype(np.float32)
    spec = BlockSpec("dfs", {"ratio": 0.02, "energy": 0.95, "error_feedback": True})
    shards = [
        ServerShard(
            rank=s,
            keys=k,
            init_values=init[k],
            workers=P,
            policy=SYNC_POLICIES.build(BlockSpec("bsp")),
            codec_up=make_codec(spec),
            codec_down=make_codec(BlockSpec("none")),
            optimizer=SGD(k.size, lr=0.05, momentum=0.9),
            pull_mode="aggregate",
        )
        for s, k in enumerate(keys)
    ]
    codecs = [[make_codec(spec) for _ in keys] for _ in range(P)]
    replicas = [init.copy() for _ in range(P)]
    optims = [[SGD(k.size, lr=0.05, momentum=0.9) for k in keys] for _ in range(P)]
    extra = [[{} for _ in keys] for _ in range(P)]
    spikes = rng.choice(n, 12, replace=False)
    used = set()
    for t in range(20):
        for p in range(P):
            g = 0.01 * rng.standard_normal(n).astype(np.float32)
            if t < 10:
                g[spikes] += rng.standard_normal(spikes.size).astype(np.float32) * 5
            else:
                g[2048:4096] += rng.choice([-1.0, 1.0], 2048).astype(np.float32)
            for s, k in enumerate(keys):
                ctx = CodecContext(step=t, ratio=0.02, extra=extra[p][s])
                used.add((s, extra[p][s].get(KEY_BLOCK, 256)))
                shards[s].push(p, t, codecs[p][s].encode(g[k], ctx), ctx)
        for p in range(P):
            for s, k in enumerate(keys):
                assert shards[s].may_serve(p, t + 1)
                answer = shards[s].pull(p, t + 1, CodecContext(step=t + 1))
                b = answer.extra[KEY_BLOCK]
                nblk = -(-k.size // b)
                assert (
                    answer.extra_bytes
                    == 4 + (nblk + 7) // 8
                    == answer.wire_bytes - answer.payload.wire_bytes
                )
                vec = shards[s].decode_pull(answer, CodecContext(step=t + 1))
                values = replicas[p][k]
                optims[p][s].step(values, vec)
                replicas[p][k] = values
                extra[p][s] = answer.extra
        for p in range(P):
            for s, k in enumerate(keys):
                np.testing.assert_array_equal(replicas[p][k], shards[s].values)
    for s in range(2):
        assert len({b for sh, b in used if sh == s}) >= 2, used  # B did change on every shard


def test_sim_backend_runs_dynamic_dfs(smoke, prepared):
    """The real engine (sim backend, P = 4, S = 2, digits MLP): replicas bit-identical to the
    servers after 20 steps, B chosen from the candidates, and the model learns."""
    from psml_core.data.store import load_prepared
    from psml_core.engine import SimBackend, staged_job

    run = smoke.run("digits_mlp", "dense_bsp", "dc_10g", smoke.seeds[0])
    wl = dataclasses.replace(run.workload, iterations=20)
    method = dataclasses.replace(
        run.method,
        pull="aggregate",
        codec=BlockSpec("dfs", {"ratio": 0.01, "error_feedback": True}),
    )
    spec = dataclasses.replace(run, workload=wl, method=method)
    job = staged_job(spec, load_prepared(prepared["digits"]))
    recs = SimBackend().run(job)
    ctx = CodecContext(step=20)
    for w in job.workers:
        for s, shard in enumerate(job.shards):
            w.apply_aggregate(s, shard.decode_pull(shard.pull(w.rank, 20, ctx), ctx))
        np.testing.assert_array_equal(w.params, job.global_params())
    for shard in job.shards:
        hist = shard.server_codec.history
        assert [t for t, _ in hist] == list(range(1, 20))
        assert all(b in DEFAULT_CANDIDATES for _, b in hist)
    losses = [r.loss for r in sorted(recs, key=lambda r: r.iteration)]
    assert np.mean(losses[-8:]) < np.mean(losses[:8])


# ---------------------------------------------------------------- recipes


@pytest.mark.parametrize(
    ("name", "codec", "checks"),
    [
        (
            "dfs",
            "dfs",
            {"dynamic": True, "ratio": 0.01, "energy": None, "lam": 0.0, "candidates": (2, 4, 8)},
        ),
        (
            "dfs_fixed_b",
            "dfs",
            {"dynamic": False, "block_size": 4, "ratio": 0.01, "energy": None, "lam": 0.0},
        ),
        ("omnireduce", "omnireduce", {"block_size": 256, "threshold": 0.0, "topk": False}),
        ("topk_omnireduce", "omnireduce", {"block_size": 256, "topk": True, "ratio": 0.01}),
        ("topk_mc", "topk", {"ratio": 0.01, "down_ratio": None}),
    ],
)
def test_recipes_build_the_intended_codecs(name, codec, checks):
    """Every sparsifier of the dfs experiment runs at 1% with DGC's momentum correction."""
    from psml_core.codecs import MomentumCorrection
    from psml_core.recipes import load_methods

    recipe = load_methods()[name]
    assert recipe.codec.name == codec and recipe.pull == "aggregate"
    built = make_codec(recipe.codec, momentum=0.9)
    inner = built.inner if isinstance(built, MomentumCorrection) else built
    assert {k: getattr(inner, k) for k in checks} == checks
    assert isinstance(built, MomentumCorrection) == (name != "omnireduce")
    assert not isinstance(built, ErrorFeedback)
    assert recipe.role == ("method" if name == "dfs" else "baseline")
