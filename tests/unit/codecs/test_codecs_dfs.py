from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sealing import TRAILER, body_of, sealed

from psml_core.codecs import CODECS, CodecContext, ErrorFeedback, Payload, make_codec
from psml_core.codecs.blocks import block_budget
from psml_core.codecs.dfs import CostReport, DFSCodec, DFSServer, remap_mask
from psml_core.config import BlockSpec
from psml_core.errors import ConfigError

# ---------------------------------------------------------------- plain references


def blocks_of(n: int, b: int) -> list[tuple[int, int, int]]:
    """(block id, start, stop) of every block, one after another."""
    out, bid, start = [], 0, 0
    while start < n:
        out.append((bid, start, min(start + b, n)))
        bid, start = bid + 1, start + b
    return out


def reference_energy(v: np.ndarray, b: int) -> list[float]:
    return [sum(float(t) ** 2 for t in v[s:e]) for _, s, e in blocks_of(v.size, b)]


def reference_budget(rho: float, n: int, b: int) -> int:
    nblk = len(blocks_of(n, b))
    if nblk == 0:
        return 0
    k = 0
    while k * b < rho * n:
        k += 1
    return max(1, min(k, nblk))


def reference_select(v, b, rho, mask=None, lam=1.0, eta=None) -> list[int]:
    """Blocks by decreasing score (ties: lower id) until |S| B >= rho n or the energy is reached."""
    e = reference_energy(v, b)
    score = [e[i] * (1 + lam) if mask is not None and mask[i] else e[i] for i in range(len(e))]
    order = sorted(range(len(e)), key=lambda i: (-score[i], i))
    k = reference_budget(rho, v.size, b)
    chosen, kept = [], 0.0
    for i in order[:k]:
        chosen.append(i)
        kept += e[i]
        if eta is not None and kept >= eta * sum(e):
            break
    return sorted(chosen)


def reference_records(
    v: np.ndarray, b: int, ids: list[int], step: int = 0, down: bool = False
) -> bytes:
    """The sealed payload (CRC-32C trailer, bound to ``step``) of the block records."""
    return sealed(reference_body(v, b, ids), step, down, n=v.size)


def reference_body(v: np.ndarray, b: int, ids: list[int]) -> bytes:
    out = b""
    for bid, s, e in blocks_of(v.size, b):
        if bid in ids:
            out += struct.pack("<I", bid) + b"".join(struct.pack("<f", float(t)) for t in v[s:e])
    return out


def reference_kept(v: np.ndarray, b: int, ids) -> np.ndarray:
    out = np.zeros(v.size, dtype=np.float32)
    for bid, s, e in blocks_of(v.size, b):
        if bid in ids:
            out[s:e] = v[s:e]
    return out


def reference_bytes(n: int, b: int, ids) -> int:
    """|S| (4B + 4), with 4r + 4 for a short last block, plus the CRC-32C trailer."""
    return TRAILER + sum(4 + 4 * (e - s) for bid, s, e in blocks_of(n, b) if bid in ids)


def reference_remap(mask, old_b: int, new_b: int, n: int) -> np.ndarray:
    old = blocks_of(n, old_b)
    out = []
    for _, s, e in blocks_of(n, new_b):
        out.append(any(mask[i] and s < oe and os < e for i, os, oe in old))
    return np.array(out, dtype=bool)


def ctx_for(ratio: float, b: int | None = None, mask=None) -> CodecContext:
    extra = {}
    if b is not None:
        extra["dfs_block_size"] = b
    if mask is not None:
        extra["dfs_mask"] = mask
    return CodecContext(ratio=ratio, extra=extra)


# ---------------------------------------------------------------- selection and records


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("eta", [None, 0.3])
def test_matches_reference(seed, eta):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    b = int(rng.choice([4, 8, 16, 32]))
    rho = float(rng.choice([0.05, 0.1, 0.3, 1.0]))
    v = (rng.standard_normal(n) * rng.exponential(1.0, n)).astype(np.float32)
    nblk = len(blocks_of(n, b))
    mask = rng.random(nblk) < 0.3
    codec = DFSCodec(lam=1.0, energy=eta)
    ctx = ctx_for(rho, b, mask)
    ids = reference_select(v, b, rho, mask, 1.0, eta)
    p = codec.encode(v, ctx)
    assert p.buffer == reference_records(v, b, ids)
    assert p.wire_bytes == reference_bytes(n, b, ids)
    np.testing.assert_array_equal(codec.decode(p, ctx), reference_kept(v, b, ids))


@st.composite
def vectors(draw, max_n=300):
    n = draw(st.integers(0, max_n))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    v = rng.standard_normal(n).astype(np.float32)
    if n and draw(st.booleans()):
        v[rng.random(n) < 0.5] = 0.0  # many zeros: ties between zero-energy blocks
    return v


@settings(max_examples=60, deadline=None)
@given(vectors(), st.sampled_from([1, 3, 8, 16, 64]), st.floats(0.001, 1.0), st.data())
def test_properties(v, b, rho, data):
    n = v.size
    nblk = len(blocks_of(n, b))
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=nblk, max_size=nblk)), dtype=bool)
    lam = data.draw(st.sampled_from([0.0, 1.0, 3.0]))
    codec = DFSCodec(lam=lam)
    ctx = ctx_for(rho, b, mask)
    p = codec.encode(v, ctx)
    ids, dense = codec.decode_records(p, ctx)
    # ratio honoured: |S| B >= rho n, and the last block was needed (or it is the minimum 1)
    assert ids.size == reference_budget(rho, n, b)
    if n:
        assert ids.size * b >= rho * n or ids.size == nblk
        assert (ids.size - 1) * b < rho * n or ids.size == 1
    # exact kept part and wire bytes
    np.testing.assert_array_equal(dense, reference_kept(v, b, set(ids.tolist())))
    assert p.wire_bytes == reference_bytes(n, b, set(ids.tolist()))
    # a valid top selection: no unselected block scores above a selected one
    e = np.array(reference_energy(v, b))
    s = np.where(mask, e * (1 + lam), e)
    chosen = np.zeros(nblk, dtype=bool)
    chosen[ids] = True
    if chosen.any() and (~chosen).any():
        assert s[chosen].min() >= s[~chosen].max() * (1 - 1e-5)
        ties = np.flatnonzero(~chosen & (s == s[chosen].min()))
        assert ties.size == 0 or ties.min() > ids[s[ids] == s[chosen].min()].max()


def test_byte_formula_exact():
    # n = 1000, B = 256: three full blocks and a last block of r = 232 elements.
    x = np.zeros(1000, dtype=np.float32)
    x[999] = 5.0
    x[300] = 1.0
    codec = DFSCodec()
    p = codec.encode(x, ctx_for(0.5, 256))  # k = 2 blocks: the short block 3 and block 1
    assert p.wire_bytes == (4 * 256 + 4) + (4 * 232 + 4) + TRAILER
    p = codec.encode(x, ctx_for(0.001, 256))  # k = 1: the short block
    assert p.wire_bytes == 4 * 232 + 4 + TRAILER


def test_ratio_param_overrides_ctx_and_default_block():
    x = np.arange(1024, dtype=np.float32)
    p = DFSCodec(ratio=0.5).encode(x, CodecContext(ratio=0.01))
    assert p.wire_bytes == 2 * (4 * 256 + 4) + TRAILER  # default B = 256, k = 2 (blocks 2, 3)
    np.testing.assert_array_equal(DFSCodec(ratio=0.5).decode(p, CodecContext())[512:], x[512:])


def test_energy_rule_stops_first():
    x = np.zeros(64, dtype=np.float32)
    x[40] = 10.0
    x[3] = 1.0
    codec = DFSCodec(energy=0.9)
    ctx = ctx_for(0.5, 8)  # the ratio alone would keep 4 blocks
    p = codec.encode(x, ctx)
    assert p.wire_bytes == 4 + 4 * 8 + TRAILER  # block 5 holds 100 / 101 of the energy
    np.testing.assert_array_equal(np.flatnonzero(codec.decode(p, ctx)), [40])
    assert DFSCodec(energy=1.0).encode(x, ctx).wire_bytes == 2 * 36 + TRAILER  # blocks 0, 5


def test_adversarial_inputs():
    codec = DFSCodec()
    empty = codec.encode(np.zeros(0, dtype=np.float32), ctx_for(0.1, 4))
    assert empty.wire_bytes == TRAILER
    assert codec.decode(empty, ctx_for(0.1, 4)).size == 0
    zeros = codec.encode(np.zeros(10, dtype=np.float32), ctx_for(0.1, 4))
    assert zeros.buffer == reference_records(np.zeros(10, np.float32), 4, [0])  # ties: lowest id
    huge = np.zeros(10, dtype=np.float32)
    huge[1], huge[9] = 3e38, -3.2e38  # squares overflow float32: energies redone in float64
    p = codec.encode(huge, ctx_for(0.1, 4))
    assert p.buffer == reference_records(huge, 4, [2])
    p = codec.encode(huge, ctx_for(0.5, 4))
    assert p.buffer == reference_records(huge, 4, [0, 2])


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_dtypes_are_cast(dtype):
    x = np.array([0, 0, 1.5, -2.25, 0, 0, 0], dtype=dtype)
    codec = DFSCodec()
    ctx = ctx_for(0.2, 2)
    p = codec.encode(x, ctx)
    assert p.wire_bytes == 4 + 8 + TRAILER
    np.testing.assert_array_equal(codec.decode(p, ctx), x.astype(np.float32))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rejected(bad):
    with pytest.raises(ValueError, match="non-finite value .* at index 1"):
        DFSCodec().encode(np.array([0.0, bad], dtype=np.float32), ctx_for(0.5, 2))


def test_deterministic():
    x = np.random.default_rng(5).standard_normal(500).astype(np.float32)
    ctx = ctx_for(0.1, 16, np.arange(32) % 3 == 0)
    assert DFSCodec().encode(x, ctx).buffer == DFSCodec().encode(x.copy(), ctx).buffer


def test_alignment_bonus_shrinks_the_union():
    """Correlated workers (a common signal plus noise) agree more with the bonus."""
    rng = np.random.default_rng(11)
    n, b, workers = 4096, 32, 4
    common = rng.standard_normal(n).astype(np.float32)
    prev = common + rng.standard_normal(n).astype(np.float32)
    ctx0 = ctx_for(0.0625, b)  # 8 of 128 blocks
    mask = np.zeros(128, dtype=bool)
    mask[DFSCodec().decode_records(DFSCodec().encode(prev, ctx0), ctx0)[0]] = True
    xs = [common + rng.standard_normal(n).astype(np.float32) for _ in range(workers)]

    def union(lam: float) -> int:
        codec, ctx = DFSCodec(lam=lam), ctx_for(0.0625, b, mask)
        return len({int(i) for x in xs for i in codec.decode_records(codec.encode(x, ctx), ctx)[0]})

    assert union(1.0) < union(0.0)
    assert union(1.0) <= 10  # nearly everyone sends M_{t-1}


# ---------------------------------------------------------------- bad buffers and contexts


def test_truncated_and_corrupted_rejected():
    codec = DFSCodec()
    ctx = ctx_for(0.5, 4)
    x = np.arange(1, 11, dtype=np.float32)
    sent = codec.encode(x, ctx).buffer  # blocks 1 and 2 (short): 20 + 12 bytes, + 4
    for cut in (1, 3, 4, 7, 12):
        with pytest.raises(ValueError, match="CRC-32C"):
            codec.decode(Payload("dfs", 10, sent[:-cut]), ctx)
    buf = body_of(sent, n=10)
    with pytest.raises(ValueError):
        codec.decode(Payload("dfs", 10, sealed(struct.pack("<I", 9) + buf[4:], n=10)), ctx)
    with pytest.raises(ValueError, match="budget"):
        codec.decode(Payload("dfs", 10, sent), ctx_for(0.1, 4))  # one block expected
    with pytest.raises(ValueError, match="budget"):
        codec.decode(Payload("dfs", 10, sealed(b"", n=10)), ctx)
    with pytest.raises(ValueError, match="checksum"):
        codec.decode(Payload("dfs", 10, b""), ctx)


def test_bad_mask_rejected():
    with pytest.raises(ValueError, match="dfs_mask"):
        DFSCodec().encode(np.ones(10, np.float32), ctx_for(0.5, 4, np.ones(2, dtype=bool)))
    with pytest.raises(ValueError, match="dfs_mask"):
        DFSCodec().encode(np.ones(10, np.float32), ctx_for(0.5, 4, np.ones(3, dtype=int)))


# ---------------------------------------------------------------- remapping and block size


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 300), st.integers(1, 70), st.integers(1, 70), st.data())
def test_remap_mask_matches_loop(n, old_b, new_b, data):
    nblk = len(blocks_of(n, old_b))
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=nblk, max_size=nblk)), dtype=bool)
    np.testing.assert_array_equal(
        remap_mask(mask, old_b, new_b, n), reference_remap(mask, old_b, new_b, n)
    )


def test_remap_mask_rejects_wrong_length():
    with pytest.raises(ValueError, match="does not match"):
        remap_mask(np.ones(3, dtype=bool), 4, 8, 20)


def test_block_budget_matches_reference():
    for n in range(0, 200, 7):
        for b in (1, 3, 32):
            for rho in (0.001, 0.01, 0.1, 0.3, 1 / 3, 1.0):
                assert block_budget(rho, n, b) == reference_budget(rho, n, b)


def test_predicted_costs_are_exact():
    rng = np.random.default_rng(2)
    n = 3000
    v = rng.standard_normal(n).astype(np.float32)
    prev = rng.random(len(blocks_of(n, 128))) < 0.2
    codec = DFSCodec(candidates=[32, 100, 128, 512])
    ctx = ctx_for(0.05, 128, prev)
    report = codec.predicted_costs(v, ctx)
    assert report.wire_bytes == codec.cost_report_bytes == 16
    for b in (32, 100, 128, 512):
        ctx_b = ctx_for(0.05, b, reference_remap(prev, 128, b, n))
        p = codec.encode(v, ctx_b)
        assert report.costs[b] + TRAILER == p.wire_bytes  # the records, then the checksum
        ids = codec.decode_records(p, ctx_b)[0]
        np.testing.assert_array_equal(np.flatnonzero(report.masks[b]), ids)


def reference_choice(reports: list[CostReport], candidates) -> int:
    best = None
    for b in sorted(candidates):
        n = reports[0].n
        up = sum(r.costs[b] for r in reports)
        union = [i for i in range(len(blocks_of(n, b))) if any(r.masks[b][i] for r in reports)]
        total = up + len(reports) * reference_bytes(n, b, union)
        if best is None or total < best[0]:
            best = (total, b)
    return best[1]


@pytest.mark.parametrize("seed", range(6))
def test_choose_block_size_minimises_predicted_cost(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(100, 5000))
    rho = float(rng.choice([0.01, 0.05, 0.2]))
    codec = DFSCodec()
    common = rng.standard_normal(n).astype(np.float32) * rng.exponential(1, n).astype(np.float32)
    xs = [
        common + rng.standard_normal(n).astype(np.float32) for _ in range(int(rng.integers(1, 5)))
    ]
    reports = [codec.predicted_costs(x, ctx_for(rho)) for x in xs]
    server = codec.server()
    chosen = server.choose_block_size(reports)
    assert chosen == reference_choice(reports, codec.candidates) == server.block_size
    assert server.last_costs[chosen] == min(server.last_costs.values())


def test_constructed_block_size_choices():
    n = 4096
    same = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    codec = DFSCodec()
    # rho n = 40 elements: B = 64 sends one 260-byte block, B = 32 needs two (264 bytes).
    reports = [codec.predicted_costs(same, ctx_for(40 / n)) for _ in range(3)]
    assert codec.server().choose_block_size(reports) == 64
    # rho n = 1024 with identical workers: one 1024-block (4100 B) beats 32 blocks of 32 (4224 B)
    reports = [codec.predicted_costs(same, ctx_for(1024 / n)) for _ in range(3)]
    dynamic = codec.server()
    assert dynamic.choose_block_size(reports) == 1024
    assert dynamic.last_costs[1024] == 3 * 4100 + 3 * 4100
    # the fixed-B codec keeps its block size whatever the reports say
    fixed = DFSCodec(dynamic=False).server()
    assert fixed.choose_block_size(reports) == 256
    assert dynamic.last_costs[1024] < dynamic.predicted_total(reports, 256)
    assert not fixed.reselect_due(0)


def test_reselect_every():
    server = DFSCodec(reselect_every=50).server()
    assert [s for s in range(120) if server.reselect_due(s)] == [0, 50, 100]


# ---------------------------------------------------------------- server


def test_server_aggregate_union_down_and_shared():
    rng = np.random.default_rng(4)
    n, b = 70, 8  # 9 blocks, the last of 6 elements
    codec = DFSCodec()
    server = codec.server()
    assert isinstance(server, DFSServer)
    assert server.shared() == ({"dfs_block_size": 256}, 4)  # no mask before the first step
    ctx = ctx_for(0.2, b)
    xs = [rng.standard_normal(n).astype(np.float32) for _ in range(3)]
    payloads = [codec.encode(x, ctx) for x in xs]
    agg = server.aggregate(payloads, ctx)
    sets = [reference_select(x, b, 0.2) for x in xs]
    np.testing.assert_array_equal(
        agg, sum(reference_kept(x, b, s) for x, s in zip(xs, sets, strict=True))
    )
    union = sorted(set().union(*sets))
    down = server.encode_down(agg, ctx)
    assert down.buffer == reference_records(agg, b, union, down=True)
    assert down.wire_bytes == reference_bytes(n, b, union)  # per worker: P times in all
    np.testing.assert_array_equal(server.decode_down(down, ctx), reference_kept(agg, b, union))
    server.block_size = b  # as if chosen
    extra, nbytes = server.shared()
    assert extra["dfs_block_size"] == b
    np.testing.assert_array_equal(np.flatnonzero(extra["dfs_mask"]), union)
    assert nbytes == 4 + 2  # the uint32 word of B, then ceil(9 / 8)
    server.block_size = 32  # B changes: the mask moves to the new grid
    extra, nbytes = server.shared()
    np.testing.assert_array_equal(
        extra["dfs_mask"], reference_remap(np.isin(range(9), union), b, 32, n)
    )
    assert nbytes == 4 + 1


def test_server_residual_invariant():
    rng = np.random.default_rng(8)
    n, b = 203, 16
    codec = DFSCodec(down_ratio=0.15)
    server = codec.server()
    for step in range(6):
        ctx = ctx_for(0.3, b)
        payloads = [codec.encode(rng.standard_normal(n).astype(np.float32), ctx) for _ in range(3)]
        old = np.zeros(n) if server.residual is None else server.residual.copy()
        agg = server.aggregate(payloads, ctx)
        down = server.encode_down(agg, ctx)
        sent = server.decode_down(down, ctx)
        np.testing.assert_array_equal(
            agg.astype(np.float64) + old, sent.astype(np.float64) + server.residual
        )
        ids = np.flatnonzero(server.mask)
        assert ids.size == block_budget(0.15, n, b) == 2
        assert down.wire_bytes == reference_bytes(n, b, ids)
        np.testing.assert_array_equal(sent, reference_kept(sent, b, ids))
        # the blocks sent are the top-energy blocks of aggregate + residual
        u = reference_energy(agg.astype(np.float64) + old, b)
        assert min(u[i] for i in ids) >= max(u[i] for i in range(len(u)) if i not in ids), step


def test_server_down_ratio_rejects_too_many_blocks():
    codec = DFSCodec(down_ratio=0.1)
    ctx = ctx_for(1.0, 4)
    full = codec.encode(np.ones(40, np.float32), ctx)
    as_down = sealed(body_of(full.buffer, n=40), down=True, n=40)
    with pytest.raises(ValueError, match="down_ratio"):
        codec.server().decode_down(Payload("dfs/down", 40, as_down), ctx)


def test_server_needs_the_shared_context():
    codec = DFSCodec()
    server = codec.server()
    server.block_size = 64
    payload = codec.encode(np.ones(300, np.float32), CodecContext(ratio=0.5))
    with pytest.raises(ValueError, match="shared"):
        server.aggregate([payload], CodecContext(ratio=0.5))


def test_end_to_end_with_error_feedback_and_dynamic_block_size():
    """Several steps of P workers with error feedback: nothing is lost, bytes are as predicted.

    The cost reports travel inside the pushes (``dfs_report``); the server picks ``B`` itself.
    """
    rng = np.random.default_rng(9)
    n, workers, rho = 1000, 3, 0.05
    codec = DFSCodec(candidates=(16, 64, 256))
    efs = [ErrorFeedback(DFSCodec(candidates=(16, 64, 256))) for _ in range(workers)]
    server = codec.server()
    sum_in = [np.zeros(n) for _ in range(workers)]
    sum_out = [np.zeros(n) for _ in range(workers)]
    seen = set()
    for step in range(8):
        extra, nbytes = server.shared()
        ctx = CodecContext(step=step, ratio=rho, extra=extra)
        b = extra["dfs_block_size"]
        seen.add(b)
        if "dfs_mask" in extra:
            assert extra["dfs_mask"].size == len(blocks_of(n, b))
            assert nbytes == 4 + -(-extra["dfs_mask"].size // 8)
        due = bool(extra.get("dfs_report"))
        grads = [(rng.integers(-64, 64, n) / 8).astype(np.float32) for _ in range(workers)]
        payloads = []
        for p, (ef, g) in enumerate(zip(efs, grads, strict=True)):
            report = ef.inner.predicted_costs(ef.compensated(g), ctx)
            payloads.append(ef.encode(g, ctx))
            sum_in[p] += g
            sum_out[p] += ef.decode(payloads[-1], ctx)
            if due:  # the report leads the buffer and is counted
                assert payloads[-1].buffer[:12] == report.to_bytes()
                assert payloads[-1].wire_bytes == 12 + report.costs[b] + TRAILER
            else:
                assert payloads[-1].wire_bytes == report.costs[b] + TRAILER
        agg = server.aggregate(payloads, ctx)
        down = server.encode_down(agg, ctx)
        assert down.wire_bytes == reference_bytes(n, b, np.flatnonzero(server.union))
    for p, ef in enumerate(efs):
        np.testing.assert_array_equal(sum_in[p], sum_out[p] + ef.residual)
    assert len(seen) >= 2  # the block size did move off the initial 256


# ---------------------------------------------------------------- registry and params


def test_registered_and_defaults():
    assert CODECS.get("dfs") is DFSCodec
    c = DFSCodec()
    assert (c.ratio, c.energy, c.lam, c.block_size, c.dynamic) == (None, None, 1.0, 256, True)
    assert (c.candidates, c.reselect_every, c.down_ratio) == (
        (32, 64, 128, 256, 512, 1024),
        1,
        None,
    )
    assert c.cost_report_bytes == 24
    ef = make_codec(
        BlockSpec("dfs", {"error_feedback": True, "block_size": 64, "candidates": [64, 32]})
    )
    assert isinstance(ef, ErrorFeedback) and ef.inner.candidates == (32, 64)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"ratio": 0}, "ratio"),
        ({"ratio": 2.0}, "ratio"),
        ({"energy": -0.5}, "energy"),
        ({"lam": -1}, "lam"),
        ({"lam": float("inf")}, "lam"),
        ({"block_size": 0}, "block_size"),
        ({"dynamic": 1}, "dynamic"),
        ({"candidates": []}, "candidates"),
        ({"candidates": [32, 0]}, "candidates"),
        ({"candidates": "32"}, "candidates"),
        ({"reselect_every": 0}, "reselect_every"),
        ({"down_ratio": 1.5}, "down_ratio"),
    ],
)
def test_bad_params_rejected(params, match):
    with pytest.raises(ValueError, match=match):
        DFSCodec(**params)
    with pytest.raises(ConfigError, match=match):
        make_codec(BlockSpec("dfs", params))


def test_bad_ctx_ratio_rejected():
    with pytest.raises(ValueError, match="ctx.ratio"):
        DFSCodec().encode(np.ones(4, np.float32), CodecContext(ratio=0.0))


def test_choose_block_size_ties_go_to_the_smaller_block():
    masks = {8: np.eye(8, dtype=bool)[0], 16: np.eye(4, dtype=bool)[0]}
    report = CostReport(64, {8: 68, 16: 36}, masks)  # 68 + 36 == 36 + 68
    server = DFSCodec(candidates=(16, 8)).server()
    assert server.choose_block_size([report]) == 8
    assert server.last_costs == {8: 104, 16: 104}
