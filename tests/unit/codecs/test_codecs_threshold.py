from __future__ import annotations

import struct
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sealing import TRAILER, resealed, sealed

from psml_core.codecs import CODECS, CodecContext, Payload, ServerCodec, make_codec
from psml_core.codecs.threshold import ThresholdCodec
from psml_core.config import BlockSpec
from psml_core.errors import ConfigError

finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
small32 = st.floats(-0.0625, 0.0625, width=32)
thresholds = st.one_of(st.just(0.01), st.just(0.0), st.floats(0.0, 0.05), st.floats(0.0, 1e30))


def ref_kept(x: np.ndarray, t: float) -> list[int]:
    """Plain reference: |x_i| > t as exact rationals."""
    return [i for i in range(len(x)) if abs(Fraction(float(x[i]))) > Fraction(t)]


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


@settings(max_examples=100, deadline=None)
@given(
    st.one_of(
        arrays(np.float32, st.integers(0, 150), elements=small32),
        arrays(np.float32, st.integers(0, 150), elements=finite32),
    ),
    thresholds,
)
def test_threshold_matches_reference(x, t):
    codec, ctx = ThresholdCodec(threshold=t), CodecContext()
    idx = ref_kept(x, t)
    p = codec.encode(x, ctx)
    assert p.buffer == ref_sparse_bytes(x.size, idx, [float(x[i]) for i in idx])
    assert p.wire_bytes == ref_size(x.size, len(idx))
    expect = np.zeros(x.size, dtype=np.float32)
    expect[idx] = x[idx]
    np.testing.assert_array_equal(codec.decode(p, ctx), expect)


@pytest.mark.parametrize("t", [0.01, 0.1, 1 / 3, 1.0, 2.0**-20, 1e-45, 3.4e38, 1e39])
def test_boundary_values_compare_exactly(t):
    # float32 neighbours of t: only those strictly above t (as real numbers) are kept
    t32 = np.float32(min(t, 3.4028234663852886e38))
    with np.errstate(over="ignore"):
        cands = [np.nextafter(t32, np.float32(0)), t32, np.nextafter(t32, np.float32(np.inf))]
    x = np.array([c for c in cands if np.isfinite(c)], dtype=np.float32)
    x = np.concatenate([x, -x])
    codec = ThresholdCodec(threshold=t)
    out = codec.decode(codec.encode(x, CodecContext()), CodecContext())
    assert np.flatnonzero(out).tolist() == ref_kept(x, t)


def test_default_is_grace_0_01_and_ignores_ratio():
    codec = ThresholdCodec()
    assert codec.threshold == 0.01
    x = np.array([0.02, 0.01, -0.011, 0.005, 0.0], dtype=np.float32)
    for ratio in (0.001, 1.0):
        ctx = CodecContext(ratio=ratio)
        np.testing.assert_array_equal(
            codec.decode(codec.encode(x, ctx), ctx), x * np.array([1, 0, 1, 0, 0], np.float32)
        )


def test_all_zeros_send_nothing():
    p = ThresholdCodec().encode(np.zeros(1000, dtype=np.float32), CodecContext())
    assert p.buffer == sealed(b"", n=1000)
    np.testing.assert_array_equal(ThresholdCodec().decode(p, CodecContext()), np.zeros(1000))


def test_zero_threshold_sends_non_zeros():
    x = np.array([0.0, 1e-40, -2.0, 0.0], dtype=np.float32)
    codec = ThresholdCodec(threshold=0)
    out = codec.decode(codec.encode(x, CodecContext()), CodecContext())
    np.testing.assert_array_equal(out, x)


def test_one_huge_value_and_dense_output():
    x = np.full(64, 0.5, dtype=np.float32)
    x[5] = 3e38
    p = ThresholdCodec().encode(x, CodecContext())
    assert p.wire_bytes == 4 * 64 + TRAILER  # everything kept: dense
    np.testing.assert_array_equal(ThresholdCodec().decode(p, CodecContext()), x)
    p = ThresholdCodec(threshold=1.0).encode(x, CodecContext())
    assert p.wire_bytes == 8 + TRAILER
    assert ThresholdCodec(threshold=1.0).decode(p, CodecContext())[5] == np.float32(3e38)


def test_empty_vector():
    p = ThresholdCodec().encode(np.zeros(0, dtype=np.float32), CodecContext())
    assert p.buffer == sealed(b"", n=0)
    assert ThresholdCodec().decode(p, CodecContext()).size == 0


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_dtypes(dtype):
    x = np.array([0.5, -0.001, 0.25, 0.0], dtype=dtype)
    out = ThresholdCodec().decode(ThresholdCodec().encode(x, CodecContext()), CodecContext())
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array([0.5, 0, 0.25, 0], dtype=dtype))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rejected(bad):
    with pytest.raises(ValueError, match="non-finite value .* at index 1"):
        ThresholdCodec().encode(np.array([1.0, bad], dtype=np.float32), CodecContext())


@pytest.mark.parametrize("t", [-0.1, float("inf"), float("nan"), "a"])
def test_invalid_threshold(t):
    with pytest.raises(ValueError, match="threshold must be a finite number >= 0"):
        ThresholdCodec(threshold=t)
    with pytest.raises(ConfigError, match="threshold"):
        make_codec(BlockSpec("threshold", {"threshold": t}))


def test_registry():
    assert CODECS.get("threshold") is ThresholdCodec
    assert make_codec(BlockSpec("threshold", {"threshold": 0.5})).threshold == 0.5


def _payload():
    x = np.zeros(1000, dtype=np.float32)
    x[[3, 50, 700]] = [0.5, -0.25, 2.0]
    return ThresholdCodec().encode(x, CodecContext())


@pytest.mark.parametrize("cut", [1, 4, 8])
def test_truncated_payload_rejected(cut):
    p = _payload()
    with pytest.raises(ValueError):
        ThresholdCodec().decode(Payload("threshold", 1000, p.buffer[:-cut]), CodecContext())


@pytest.mark.parametrize("value", [0.005, 0.0, -0.01, float("nan"), float("inf")])
def test_value_the_codec_cannot_send_rejected(value):
    p = _payload()
    buf = resealed(p.buffer, lambda b: b[:-4] + struct.pack("<f", value), n=1000)
    with pytest.raises(ValueError, match="cannot send"):
        ThresholdCodec().decode(Payload("threshold", 1000, buf), CodecContext())


def test_dense_payload_below_threshold_rejected():
    buf = sealed(np.array([0.5, 0.0, 0.001, 1.0], dtype="<f4").tobytes(), n=4)
    with pytest.raises(ValueError, match="cannot send"):
        ThresholdCodec().decode(Payload("threshold", 4, buf), CodecContext())


def test_server_sends_the_union():
    codec, ctx = ThresholdCodec(threshold=1.0), CodecContext()
    xs = [np.zeros(1000, dtype=np.float32) for _ in range(3)]
    xs[0][[1, 2]] = 5.0
    xs[1][[2, 3]] = -5.0
    xs[2][[900]] = 2.0
    server = codec.server()
    assert type(server) is ServerCodec
    agg = server.aggregate([codec.encode(x, ctx) for x in xs], ctx)
    down = server.encode_down(agg, ctx)
    assert down.wire_bytes == 8 * 3 + TRAILER  # 1, 3 and 900; index 2 cancelled to 0
    np.testing.assert_array_equal(server.decode_down(down, ctx), xs[0] + xs[1] + xs[2])
