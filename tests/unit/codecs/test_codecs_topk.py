from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sealing import TRAILER, resealed, sealed

from psml_core.codecs import CODECS, CodecContext, ErrorFeedback, Payload, ServerCodec, make_codec
from psml_core.codecs.topk import TopKCodec, TopKDownServer
from psml_core.config import BlockSpec
from psml_core.errors import ConfigError

finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
ratios = st.floats(0.001, 1.0)


# ---------------------------------------------------------------- plain references


def ref_k(n: int, ratio: float) -> int:
    """GRACE: max(1, int(n * ratio)); nothing for an empty vector."""
    return 0 if n == 0 else max(1, int(n * ratio))


def ref_topk(x: np.ndarray, k: int) -> list[int]:
    """The k largest |x|, ties to the lower index, by a full sort; ascending indices."""
    order = sorted(range(len(x)), key=lambda i: (-abs(float(x[i])), i))
    return sorted(order[:k])


def ref_sparse_bytes(n: int, idx: list[int], vals: list[float]) -> bytes:
    """The sealed payload (CRC-32C trailer) of :func:`ref_sparse_body`."""
    return sealed(ref_sparse_body(n, idx, vals), n=n)


def ref_sparse_body(n: int, idx: list[int], vals: list[float]) -> bytes:
    """COO (8k) / bitmap (ceil(n/8) + 4k) / dense (4n): the cheapest, COO on a tie with bitmap."""
    k = len(idx)
    coo, bitmap, dense = 8 * k, -(-n // 8) + 4 * k, 4 * n
    values = b"".join(struct.pack("<f", v) for v in vals)
    if coo <= bitmap:
        return b"".join(struct.pack("<i", i) for i in idx) + values
    if bitmap < dense:
        bits = bytearray(-(-n // 8))
        for i in idx:
            bits[i // 8] |= 1 << (i % 8)
        return bytes(bits) + values
    full = [0.0] * n
    for i, v in zip(idx, vals, strict=True):
        full[i] = v
    return b"".join(struct.pack("<f", v) for v in full)


def ref_size(n: int, k: int) -> int:
    """Wire bytes: the cheapest format's, plus the 4-byte CRC-32C trailer."""
    coo, bitmap, dense = 8 * k, -(-n // 8) + 4 * k, 4 * n
    return (coo if coo <= bitmap else min(bitmap, dense)) + TRAILER


def kept(x: np.ndarray, idx: list[int]) -> np.ndarray:
    out = np.zeros(x.size, dtype=np.float32)
    out[idx] = x[idx]
    return out


# ---------------------------------------------------------------- worker side


@settings(max_examples=100, deadline=None)
@given(
    st.one_of(
        arrays(np.float32, st.integers(0, 120), elements=finite32),
        # few distinct magnitudes: many ties, which must go to the lower indices
        arrays(np.float32, st.integers(0, 120), elements=st.sampled_from([0.0, 1.0, -1.0, 2.0])),
    ),
    ratios,
)
def test_topk_matches_reference(x, ratio):
    codec, ctx = TopKCodec(), CodecContext(ratio=ratio)
    k = ref_k(x.size, ratio)
    idx = ref_topk(x, k)
    p = codec.encode(x, ctx)
    assert p.buffer == ref_sparse_bytes(x.size, idx, [float(x[i]) for i in idx])
    assert p.wire_bytes == ref_size(x.size, k)
    np.testing.assert_array_equal(codec.decode(p, ctx), kept(x, idx))


@settings(deadline=None)
@given(st.integers(0, 5000), ratios)
def test_keep_count_rule(n, ratio):
    assert TopKCodec().keep_count(n, CodecContext(ratio=ratio)) == ref_k(n, ratio)
    assert TopKCodec(ratio=ratio).keep_count(n, CodecContext(ratio=1.0)) == ref_k(n, ratio)


@pytest.mark.parametrize("n", [1, 7, 100, 257, 1000, 4096])
@pytest.mark.parametrize("ratio", [0.001, 0.03, 0.1, 0.2, 0.5, 0.97, 1.0])
def test_wire_bytes_formula_exact(n, ratio):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    p = TopKCodec(ratio=ratio).encode(x, CodecContext())
    k = max(1, math.floor(n * ratio))
    assert p.wire_bytes == len(p.buffer) == ref_size(n, k)


def test_large_vector_against_argsort():
    # Long enough for select.topk_indices' sampled fast path.
    rng = np.random.default_rng(1)
    x = rng.standard_normal(400_000).astype(np.float32)
    ctx = CodecContext(ratio=0.01)
    out = TopKCodec().decode(TopKCodec().encode(x, ctx), ctx)
    expect = np.sort(np.argsort(-np.abs(x), kind="stable")[:4000])
    np.testing.assert_array_equal(np.flatnonzero(out), expect)
    np.testing.assert_array_equal(out[expect], x[expect])


def test_constructor_ratio_overrides_ctx():
    x = np.arange(1, 1001, dtype=np.float32)  # COO up to k = 31
    fixed = TopKCodec(ratio=0.01).encode(x, CodecContext(ratio=0.5))
    assert fixed.wire_bytes == 8 * 10 + TRAILER
    follows = TopKCodec().encode(x, CodecContext(ratio=0.005))
    assert follows.wire_bytes == 8 * 5 + TRAILER


def test_all_zeros_sends_k_zero_entries():
    x = np.zeros(100, dtype=np.float32)
    ctx = CodecContext(ratio=0.05)
    p = TopKCodec().encode(x, ctx)
    assert p.buffer == ref_sparse_bytes(100, [0, 1, 2, 3, 4], [0.0] * 5)
    np.testing.assert_array_equal(TopKCodec().decode(p, ctx), x)


def test_one_huge_value():
    x = np.full(64, 1e-3, dtype=np.float32)
    x[37] = 3e38
    ctx = CodecContext(ratio=0.01)
    out = TopKCodec().decode(TopKCodec().encode(x, ctx), ctx)
    assert np.flatnonzero(out).tolist() == [37]
    assert out[37] == np.float32(3e38)


def test_empty_vector():
    p = TopKCodec().encode(np.zeros(0, dtype=np.float32), CodecContext(ratio=0.1))
    assert p.buffer == sealed(b"", n=0) and p.n == 0
    assert TopKCodec().decode(p, CodecContext(ratio=0.1)).size == 0


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_dtypes(dtype):
    x = np.array([0.5, -3.0, 1.25, 0.0, 2.0], dtype=dtype)
    ctx = CodecContext(ratio=0.4)
    out = TopKCodec().decode(TopKCodec().encode(x, ctx), ctx)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [0, -3.0, 0, 0, 2.0])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rejected(bad):
    with pytest.raises(ValueError, match="non-finite value .* at index 2"):
        TopKCodec().encode(np.array([1.0, 2.0, bad], dtype=np.float32), CodecContext())


@pytest.mark.parametrize("ratio", [0.0, -0.1, 1.5, float("nan"), "x"])
def test_invalid_ratio(ratio):
    with pytest.raises(ValueError, match=r"ratio must be .*\(0, 1\]"):
        TopKCodec(ratio=ratio)
    with pytest.raises(ValueError, match=r"down_ratio must be .*\(0, 1\]"):
        TopKCodec(down_ratio=ratio)
    with pytest.raises(ValueError, match=r"ctx.ratio must be .*\(0, 1\]"):
        TopKCodec().encode(np.ones(4, dtype=np.float32), CodecContext(ratio=ratio))


def test_registry_and_make_codec():
    assert CODECS.get("topk") is TopKCodec
    codec = make_codec(BlockSpec("topk", {"ratio": 0.1, "error_feedback": True}))
    assert isinstance(codec, ErrorFeedback) and codec.name == "topk"
    with pytest.raises(ConfigError, match="ratio"):
        make_codec(BlockSpec("topk", {"ratio": 2.0}))


# ---------------------------------------------------------------- rejected payloads


def _payload(n=1000, ratio=0.005):
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    ctx = CodecContext(ratio=ratio)
    return TopKCodec().encode(x, ctx), ctx


@pytest.mark.parametrize("cut", [1, 4, 8])
def test_truncated_payload_rejected(cut):
    p, ctx = _payload()
    with pytest.raises(ValueError, match="codec 'topk': payload of"):
        TopKCodec().decode(Payload("topk", p.n, p.buffer[:-cut]), ctx)


def test_payload_for_another_ratio_rejected():
    p, _ = _payload(ratio=0.005)
    with pytest.raises(ValueError, match="3 of 1000 elements take 28"):
        TopKCodec().decode(p, CodecContext(ratio=0.003))


def test_corrupted_indices_rejected():
    p, ctx = _payload()
    # out of range, order
    buf = resealed(p.buffer, lambda b: struct.pack("<i", 5000) + b[4:], n=p.n)
    with pytest.raises(ValueError, match="ascending"):
        TopKCodec().decode(Payload("topk", 1000, buf), ctx)


def test_non_finite_value_in_payload_rejected():
    p, ctx = _payload()
    buf = resealed(p.buffer, lambda b: b[:-4] + struct.pack("<f", float("nan")), n=p.n)
    with pytest.raises(ValueError, match="cannot send"):
        TopKCodec().decode(Payload("topk", 1000, buf), ctx)


def test_dense_payload_with_too_many_nonzeros_rejected():
    ctx = CodecContext(ratio=1.0)
    p = TopKCodec().encode(np.arange(1, 9, dtype=np.float32), ctx)
    assert p.wire_bytes == 32 + TRAILER
    np.testing.assert_array_equal(TopKCodec().decode(p, ctx), np.arange(1, 9))
    n = 1000  # k = 990 takes min(125 + 3960, 4000) = 4000: dense, so at most 990 non-zeros
    ctx = CodecContext(ratio=0.99)
    ok = TopKCodec().encode(np.ones(n, dtype=np.float32), ctx)
    assert ok.wire_bytes == 4 * n + TRAILER
    with pytest.raises(ValueError, match="cannot send"):
        TopKCodec().decode(Payload("topk", n, sealed(np.ones(n, dtype="<f4").tobytes(), n=n)), ctx)


# ---------------------------------------------------------------- server side


def test_default_server_sends_the_union():
    rng = np.random.default_rng(3)
    codec, ctx = TopKCodec(), CodecContext(ratio=0.02)
    xs = [rng.standard_normal(1000).astype(np.float32) for _ in range(4)]
    server = codec.server()
    assert type(server) is ServerCodec
    agg = server.aggregate([codec.encode(x, ctx) for x in xs], ctx)
    union = set()
    for x in xs:
        union |= set(ref_topk(x, 20))
    assert set(np.flatnonzero(agg).tolist()) == union
    down = server.encode_down(agg, ctx)
    assert down.wire_bytes == ref_size(1000, len(union)) <= 8 * 4 * 20 + TRAILER
    np.testing.assert_array_equal(server.decode_down(down, ctx), agg)


def test_down_ratio_server_matches_reference_and_keeps_residual():
    rng = np.random.default_rng(4)
    n, down_ratio = 1000, 0.01
    server = TopKCodec(ratio=0.1, down_ratio=down_ratio).server()
    assert isinstance(server, TopKDownServer)
    ref_r = np.zeros(n)
    total_in, total_out = np.zeros(n), np.zeros(n)
    for _ in range(30):
        # dyadic values: every float64 sum below is exact
        agg = (rng.integers(-4096, 4096, n) / 256.0).astype(np.float32)
        p = server.encode_down(agg, CodecContext())
        out = server.decode_down(p, CodecContext())
        # reference: top-k of agg + residual (float64), the rest stays
        v = ref_r + agg.astype(np.float64)
        k = ref_k(n, down_ratio)
        idx = ref_topk(v, k)
        assert p.wire_bytes == ref_size(n, k) == 8 * k + TRAILER
        expect = np.zeros(n)
        expect[idx] = v[idx]
        np.testing.assert_array_equal(out, expect)
        ref_r = v - expect
        np.testing.assert_array_equal(server.residual, ref_r)
        total_in += agg
        total_out += out
    # residual invariant: everything aggregated was broadcast or is still held
    np.testing.assert_array_equal(total_in, total_out + server.residual)


def test_down_ratio_residual_invariant_per_step_on_gaussian_data():
    rng = np.random.default_rng(5)
    server = TopKCodec(down_ratio=0.01).server()
    old = np.zeros(2000)
    for _ in range(10):
        agg = rng.standard_normal(2000).astype(np.float32)
        v = old + agg.astype(np.float64)
        out = server.decode_down(server.encode_down(agg, CodecContext()), CodecContext())
        np.testing.assert_array_equal(out.astype(np.float64) + server.residual, v)
        old = server.residual.copy()


def test_down_payload_checked():
    server = TopKCodec(down_ratio=0.1).server()
    p = server.encode_down(np.arange(50, dtype=np.float32), CodecContext())
    with pytest.raises(ValueError, match=r"codec 'topk' \(down\): payload"):
        server.decode_down(Payload(p.codec, 50, p.buffer[:-8]), CodecContext())


def test_error_feedback_round_trip_through_server():
    codec = ErrorFeedback(TopKCodec(ratio=0.1, down_ratio=0.1))
    assert isinstance(codec.server(), TopKDownServer)
