from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sealing import TRAILER, resealed, sealed

from psml_core.codecs import CODECS, CodecContext, Payload, ServerCodec, make_codec
from psml_core.codecs.dgc import DGCCodec
from psml_core.config import BlockSpec
from psml_core.errors import ConfigError

F32_MAX = float(np.finfo(np.float32).max)
finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
contexts = st.builds(
    CodecContext, step=st.integers(0, 1000), ratio=st.floats(0.01, 1.0), seed=st.integers(0, 999)
)


def f32_mul(a: float, b: float) -> float:
    """float32 product: the exact double product of two float32s, rounded once to float32."""
    return float(np.float32(a * b)) if abs(a * b) <= F32_MAX else float("inf")


def ref_dgc(x, ratio, seed, step, sf=0.01, rounds=10, upper=1.3, lower=0.7) -> list[int]:
    """Plain reference of the DGC / GRACE rule, written with Python loops and sorts."""
    n = len(x)
    if n == 0:
        return []
    a = [abs(float(v)) for v in x]
    k = max(1, int(n * ratio))
    s = max(1, int(n * sf))
    sample = sorted(a[i] for i in np.random.default_rng([seed, step]).integers(0, n, s))
    ks = min(s, max(1, int(s * ratio)))
    t = sample[s - ks]  # the ks-th largest sampled magnitude
    up, lo = float(np.float32(upper)), float(np.float32(lower))
    c = sum(v >= t for v in a)
    for _ in range(rounds):
        if c > upper * k:
            new = min(f32_mul(t, up), F32_MAX)
        elif c < lower * k:
            new = f32_mul(t, lo)
        else:
            break
        if new == t:
            break
        t = new
        c = sum(v >= t for v in a)
    return [i for i in range(n) if (a[i] >= t if t > 0 else a[i] > 0)]


def ref_sparse_bytes(n: int, idx: list[int], vals: list[float], step: int = 0) -> bytes:
    """The sealed payload (CRC-32C trailer bound to ``step``) of :func:`ref_sparse_body`."""
    return sealed(ref_sparse_body(n, idx, vals), step, n=n)


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


@settings(max_examples=80, deadline=None)
@given(
    st.one_of(
        arrays(np.float32, st.integers(0, 400), elements=finite32),
        arrays(np.float32, st.integers(0, 400), elements=st.sampled_from([0.0, 0.5, -1.0, 3.0])),
        arrays(np.float32, st.integers(0, 400), elements=st.floats(-1, 1, width=32)),
    ),
    contexts,
    st.sampled_from([0.01, 0.1, 1.0]),
)
def test_dgc_matches_reference(x, ctx, sf):
    codec = DGCCodec(sample_fraction=sf)
    idx = ref_dgc(x, ctx.ratio, ctx.seed, ctx.step, sf=sf)
    p = codec.encode(x, ctx)
    assert p.buffer == ref_sparse_bytes(x.size, idx, [float(x[i]) for i in idx], ctx.step)
    assert p.wire_bytes == ref_size(x.size, len(idx))
    expect = np.zeros(x.size, dtype=np.float32)
    expect[idx] = x[idx]
    np.testing.assert_array_equal(codec.decode(p, ctx), expect)


@pytest.mark.parametrize("dist", ["normal", "laplace", "student_t3"])
@pytest.mark.parametrize("ratio", [0.1, 0.01])
def test_kept_count_within_band_on_typical_gradients(dist, ratio):
    n = 50_000
    k = int(n * ratio)
    for seed in range(5):
        rng = np.random.default_rng(seed)
        if dist == "normal":
            x = rng.standard_normal(n).astype(np.float32)
        elif dist == "laplace":
            x = rng.laplace(size=n).astype(np.float32)
        else:
            x = rng.standard_t(3, n).astype(np.float32)
        p = DGCCodec().encode(x, CodecContext(ratio=ratio, seed=seed))
        kept = np.count_nonzero(DGCCodec().decode(p, CodecContext()))
        assert 0.7 * k <= kept <= 1.3 * k, (seed, kept, k)


def test_kept_count_within_band_at_ratio_0_001_heavy_tails():
    x = np.random.default_rng(9).laplace(size=400_000).astype(np.float32)
    for seed in range(5):
        p = DGCCodec().encode(x, CodecContext(ratio=0.001, seed=seed))
        assert 0.7 * 400 <= np.count_nonzero(DGCCodec().decode(p, CodecContext())) <= 1.3 * 400


def test_non_convergence_sends_the_last_thresholds_set():
    # Uniform magnitudes: the x1.3 / x0.7 steps jump over the band every round; after
    # max_rounds the last threshold (here above every |x|) decides: nothing is sent.
    x = np.random.default_rng(0).uniform(-1, 1, 10_000).astype(np.float32)
    p = DGCCodec().encode(x, CodecContext(ratio=0.01))
    assert ref_dgc(x, 0.01, 0, 0) == [] and p.buffer == sealed(b"", n=x.size)
    # max_rounds=0: the sampled threshold as is
    p0 = DGCCodec(max_rounds=0).encode(x, CodecContext(ratio=0.01))
    assert p0.wire_bytes == ref_size(10_000, len(ref_dgc(x, 0.01, 0, 0, rounds=0))) > 0


def test_mostly_zero_vector_sends_all_non_zeros():
    # 1% non-zeros, ratio 0.1: the sampled threshold is 0, so every non-zero goes (never zeros)
    x = np.zeros(10_000, dtype=np.float32)
    x[::100] = np.arange(1, 101, dtype=np.float32)
    p = DGCCodec().encode(x, CodecContext(ratio=0.1))
    np.testing.assert_array_equal(DGCCodec().decode(p, CodecContext()), x)
    assert p.wire_bytes == 8 * 100 + TRAILER


def test_all_zeros_send_nothing():
    p = DGCCodec().encode(np.zeros(5000, dtype=np.float32), CodecContext(ratio=0.01))
    assert p.buffer == sealed(b"", n=5000)
    np.testing.assert_array_equal(DGCCodec().decode(p, CodecContext()), np.zeros(5000))


def test_one_huge_value():
    x = np.full(1000, 1e-3, dtype=np.float32)
    x[123] = 3e38
    p = DGCCodec().encode(x, CodecContext(ratio=0.001))
    out = DGCCodec().decode(p, CodecContext())
    assert np.flatnonzero(out).tolist() == [123] and out[123] == np.float32(3e38)


def test_empty_vector():
    p = DGCCodec().encode(np.zeros(0, dtype=np.float32), CodecContext(ratio=0.1))
    assert p.buffer == sealed(b"", n=0)
    assert DGCCodec().decode(p, CodecContext()).size == 0


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_dtypes(dtype):
    x = np.array([0.5, -3.0, 1.25, 0.0, 2.0], dtype=dtype)
    ctx = CodecContext(ratio=0.2)
    out = DGCCodec(sample_fraction=1.0).decode(DGCCodec().encode(x, ctx), ctx)
    assert out.dtype == np.float32
    idx = ref_dgc(x.astype(np.float32), 0.2, 0, 0)
    expect = np.zeros(5, dtype=np.float32)
    expect[idx] = x[idx]
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rejected(bad):
    with pytest.raises(ValueError, match="non-finite value .* at index 1"):
        DGCCodec().encode(np.array([1.0, bad], dtype=np.float32), CodecContext())


def test_deterministic_given_seed_and_step():
    x = np.random.default_rng(1).standard_normal(20_000).astype(np.float32)
    ctx = CodecContext(ratio=0.01, seed=5, step=17)
    assert DGCCodec().encode(x, ctx).buffer == DGCCodec().encode(x, ctx).buffer


def test_constructor_ratio_overrides_ctx():
    x = np.random.default_rng(1).standard_normal(20_000).astype(np.float32)
    a = DGCCodec(ratio=0.01).encode(x, CodecContext(ratio=0.5, seed=2))
    b = DGCCodec().encode(x, CodecContext(ratio=0.01, seed=2))
    assert a.buffer == b.buffer


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"ratio": 0}, r"ratio must be .*\(0, 1\]"),
        ({"sample_fraction": 0}, r"sample_fraction must be .*\(0, 1\]"),
        ({"sample_fraction": 2}, r"sample_fraction must be .*\(0, 1\]"),
        ({"max_rounds": -1}, "max_rounds must be an integer >= 0"),
        ({"max_rounds": 2.5}, "max_rounds must be an integer >= 0"),
        ({"upper": 1.0}, "upper must be a finite number > 1"),
        ({"lower": 1.0}, r"lower must be in \(0, 1\)"),
        ({"lower": 0}, r"lower must be in \(0, 1\)"),
    ],
)
def test_invalid_params(params, match):
    with pytest.raises(ValueError, match=match):
        DGCCodec(**params)
    with pytest.raises(ConfigError, match=match.split()[0]):
        make_codec(BlockSpec("dgc", params))


def test_registry_and_defaults():
    assert CODECS.get("dgc") is DGCCodec
    c = make_codec(BlockSpec("dgc", {}))
    assert (c.ratio, c.sample_fraction, c.max_rounds, c.upper, c.lower) == (
        None,
        0.01,
        10,
        1.3,
        0.7,
    )


def _payload():
    x = np.zeros(1000, dtype=np.float32)
    x[[3, 50, 700]] = [0.5, -0.25, 2.0]
    return DGCCodec(sample_fraction=1.0).encode(x, CodecContext(ratio=0.003))


@pytest.mark.parametrize("cut", [1, 4, 8, 12])
def test_truncated_payload_rejected(cut):
    # DGC's length is data dependent: without its CRC-32C trailer a cut of exactly one COO
    # entry (8 bytes) would parse as a valid shorter list.
    p = _payload()
    assert p.wire_bytes == 24 + TRAILER
    with pytest.raises(ValueError):
        DGCCodec().decode(Payload("dgc", 1000, p.buffer[:-cut]), CodecContext())


@pytest.mark.parametrize("value", [0.0, float("nan"), float("-inf")])
def test_value_the_codec_cannot_send_rejected(value):
    p = _payload()
    buf = resealed(p.buffer, lambda b: b[:-4] + struct.pack("<f", value), n=p.n)
    with pytest.raises(ValueError, match="cannot send"):
        DGCCodec().decode(Payload("dgc", 1000, buf), CodecContext())


def test_server_sends_the_union():
    rng = np.random.default_rng(6)
    codec, ctx = DGCCodec(), CodecContext(ratio=0.01, seed=1)
    xs = [rng.standard_normal(10_000).astype(np.float32) for _ in range(3)]
    server = codec.server()
    assert type(server) is ServerCodec
    pays = [codec.encode(x, ctx) for x in xs]
    agg = server.aggregate(pays, ctx)
    union = set()
    for p in pays:
        union |= set(np.flatnonzero(codec.decode(p, ctx)).tolist())
    down = server.encode_down(agg, ctx)
    assert down.wire_bytes == ref_size(10_000, len(union))
    np.testing.assert_array_equal(server.decode_down(down, ctx), agg)
