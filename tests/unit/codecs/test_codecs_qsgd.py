from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sealing import TRAILER

from psml_core.codecs import CODECS, CodecContext, ErrorFeedback, Payload, make_codec
from psml_core.codecs.qsgd import (
    QSGDCodec,
    pack_codes,
    qsgd_bits,
    qsgd_uniforms,
    qsgd_wire_bytes,
    unpack_codes,
)
from psml_core.config import BlockSpec
from psml_core.errors import ConfigError

LEVELS = [1, 2, 3, 5, 7, 15, 63, 64, 100, 127, 128, 255, 1000, 16383, 16384, 32767]
moderate32 = st.floats(-1e6, 1e6, width=32, allow_subnormal=True)


# ----------------------------------------------------------------------------------------------
# Plain references: one element at a time, straight from the docstring.
# ----------------------------------------------------------------------------------------------


def ref_bits(s: int) -> int:
    b = 1
    while (1 << (b - 1)) - 1 < s:  # the fewest bits whose signed range holds [-s, s]
        b += 1
    return b


def ref_norm(x: np.ndarray) -> np.float32:
    return np.float32(math.sqrt(math.fsum(float(v) * float(v) for v in x)))


def ref_levels(x: np.ndarray, s: int, norm: np.float32, u: np.ndarray) -> list[int]:
    out = []
    for xi, ui in zip(x, u, strict=True):
        if norm == 0:
            out.append(0)
            continue
        t = np.float32(np.float32(np.float32(abs(xi)) / norm) * np.float32(s))
        level = min(s, math.floor(np.float32(t + ui)))
        out.append(-level if xi < 0 else level)
    return out


def ref_pack(q: list[int], b: int) -> bytes:
    bits = []
    for v in q:
        code = v % (1 << b)  # b-bit two's complement
        bits.extend((code >> k) & 1 for k in range(b))
    while len(bits) % 8:
        bits.append(0)
    return bytes(sum(bits[i + k] << k for k in range(8)) for i in range(0, len(bits), 8))


def ref_dequantise(q: list[int], norm: np.float32, s: int) -> np.ndarray:
    step = np.float32(float(norm) / s)
    return np.array([np.float32(v) * step for v in q], dtype=np.float32)


def ref_encode(x: np.ndarray, s: int, norm: np.float32, seed: int, step: int, stream: int):
    u = qsgd_uniforms(x.size, seed, step, stream)
    q = ref_levels(x.astype(np.float32), s, norm, u)
    return np.array([norm], dtype="<f4").tobytes() + ref_pack(q, ref_bits(s)), q


def payload_norm(p: Payload) -> np.float32:
    return np.frombuffer(p.buffer, dtype="<f4", count=1)[0]


# ----------------------------------------------------------------------------------------------
# Against the reference
# ----------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    arrays(np.float32, st.integers(0, 120), elements=moderate32),
    st.sampled_from(LEVELS),
    st.integers(0, 2**32),
    st.integers(0, 10**6),
    st.integers(0, 7),
)
def test_matches_reference(x, s, seed, step, stream):
    codec = QSGDCodec(levels=s, stream=stream)
    ctx = CodecContext(step=step, seed=seed)
    p = codec.encode(x, ctx)
    norm = payload_norm(p)
    want_norm = ref_norm(x)
    assert norm == want_norm or abs(float(norm) - float(want_norm)) <= np.spacing(want_norm)
    want, q = ref_encode(x, s, norm, seed, step, stream)
    assert p.buffer == want
    assert p.wire_bytes == len(p.buffer) == 4 + math.ceil(x.size * ref_bits(s) / 8)
    np.testing.assert_array_equal(codec.decode(p, ctx), ref_dequantise(q, norm, s))
    assert all(-s <= v <= s for v in q)


@pytest.mark.parametrize("s", LEVELS)
def test_bits_and_byte_formula(s):
    assert qsgd_bits(s) == ref_bits(s) == 1 + math.ceil(math.log2(s + 1))
    codec = QSGDCodec(levels=s)
    rng = np.random.default_rng(s)
    for n in [*range(0, 34), 100, 1001]:
        p = codec.encode(rng.standard_normal(n).astype(np.float32), CodecContext(step=n))
        assert p.wire_bytes == qsgd_wire_bytes(n, s) == 4 + math.ceil(n * ref_bits(s) / 8)


def test_default_is_grace_127_levels_one_int8_per_element():
    codec = QSGDCodec()
    assert codec.levels == 127 and codec.bits == 8
    x = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    p = codec.encode(x, CodecContext(seed=5, step=9))
    assert p.wire_bytes == 4 + 1000
    q = np.frombuffer(p.buffer, dtype=np.int8, offset=4)
    np.testing.assert_array_equal(q, ref_encode(x, 127, payload_norm(p), 5, 9, 0)[1])
    codec16 = QSGDCodec(levels=32767)
    assert codec16.encode(x, CodecContext()).wire_bytes == 4 + 2000


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 16), st.integers(0, 70), st.integers(0, 2**32 - 1))
def test_pack_codes_matches_reference(b, n, seed):
    codes = np.random.default_rng(seed).integers(0, 1 << b, n)
    signed = [int(c) - (1 << b) if c >= 1 << (b - 1) else int(c) for c in codes]
    buf = pack_codes(codes, b)
    assert buf == ref_pack(signed, b)
    assert len(buf) == math.ceil(n * b / 8)
    np.testing.assert_array_equal(unpack_codes(buf, n, b), codes)


# ----------------------------------------------------------------------------------------------
# Adversarial inputs
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("s", [1, 7, 127, 1000, 32767])
def test_all_zeros_and_empty(s):
    codec = QSGDCodec(levels=s)
    for n in (0, 1, 13, 64):
        p = codec.encode(np.zeros(n, dtype=np.float32), CodecContext(step=3))
        assert p.buffer == bytes(qsgd_wire_bytes(n, s))  # norm 0.0, all codes 0
        out = codec.decode(p, CodecContext())
        assert out.dtype == np.float32 and out.shape == (n,)
        assert not out.any()


@pytest.mark.parametrize("s", [1, 5, 127, 32767])
def test_one_huge_value(s):
    x = np.zeros(37, dtype=np.float32)
    x[11] = -3e38
    x[20] = 1e-3
    codec = QSGDCodec(levels=s)
    p = codec.encode(x, CodecContext(seed=1))
    assert payload_norm(p) == np.float32(3e38)
    out = codec.decode(p, CodecContext())
    want, q = ref_encode(x, s, payload_norm(p), 1, 0, 0)
    assert p.buffer == want
    assert q[11] == -s
    np.testing.assert_allclose(out[11], -3e38, rtol=1e-6)
    assert not np.delete(out, [11, 20]).any()


def test_norm_beyond_float32_rejected():
    with pytest.raises(ValueError, match="norm .* exceeds float32 range"):
        QSGDCodec().encode(np.full(4, 3e38, dtype=np.float32), CodecContext())


def test_tiny_values_do_not_underflow_the_norm():
    x = np.array([1e-45, -3e-44, 0.0, 2e-40], dtype=np.float32)  # subnormals
    codec = QSGDCodec(levels=3)
    p = codec.encode(x, CodecContext(step=2))
    assert payload_norm(p) == ref_norm(x) > 0
    assert p.buffer == ref_encode(x, 3, payload_norm(p), 0, 2, 0)[0]


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_dtypes_are_cast(dtype):
    x = np.random.default_rng(3).standard_normal(50).astype(dtype)
    codec = QSGDCodec(levels=15)
    ctx = CodecContext(seed=4, step=1)
    assert codec.encode(x, ctx).buffer == codec.encode(x.astype(np.float32), ctx).buffer


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rejected(bad):
    with pytest.raises(ValueError, match="non-finite value .* at index 2"):
        QSGDCodec().encode(np.array([0.0, 1.0, bad], dtype=np.float32), CodecContext())


def test_two_dim_and_integer_input_rejected():
    with pytest.raises(ValueError, match="1-D"):
        QSGDCodec().encode(np.ones((2, 2), dtype=np.float32), CodecContext())
    with pytest.raises(TypeError, match="floating"):
        QSGDCodec().encode(np.ones(3, dtype=np.int32), CodecContext())


# ----------------------------------------------------------------------------------------------
# Statistics: unbiased, and the paper's variance bound
# ----------------------------------------------------------------------------------------------


def _draws(x: np.ndarray, s: int, k: int) -> np.ndarray:
    codec = QSGDCodec(levels=s, stream=1)
    return np.stack(
        [
            codec.decode(codec.encode(x, CodecContext(seed=7, step=t)), CodecContext())
            for t in range(k)
        ]
    ).astype(np.float64)


def _exact_variance(x: np.ndarray, s: int) -> np.ndarray:
    """Per-element variance of QSGD: (norm/s)^2 f(1-f), f the fractional part of |x_i| s/norm."""
    norm = float(ref_norm(x))
    t = np.abs(x.astype(np.float64)) / norm * s
    f = t - np.floor(t)
    return (norm / s) ** 2 * f * (1 - f)


@pytest.mark.parametrize("s", [1, 3, 127])
def test_unbiased(s):
    # 50 copies of a 48-element vector in one 2400-vector: each copy's elements are rounded with
    # their own draws, so 40 encodes give 2000 independent draws per element.
    copies, k = 50, 40
    x = np.random.default_rng(s).standard_normal(48).astype(np.float32)
    big = np.tile(x, copies)
    mean = _draws(big, s, k).reshape(k * copies, x.size).mean(axis=0)
    sigma = np.sqrt(_exact_variance(big, s)[: x.size] / (k * copies))  # standard errors
    # 5 standard errors (+ float32 resolution); seeded, so the outcome is fixed.
    tol = 5 * sigma + 1e-6 * float(ref_norm(big))
    assert np.all(np.abs(mean - x) <= tol), np.max(np.abs(mean - x) / tol)


@pytest.mark.parametrize(
    ("s", "x"),
    [
        (1, np.random.default_rng(0).standard_normal(64)),
        (3, np.random.default_rng(1).standard_normal(64)),
        (1, np.ones(16)),  # every t_i = 1/4: near the sqrt(n)/s bound (3 vs 4, in ||x||^2)
        (2, np.r_[np.ones(9), -np.ones(7)] * 0.7),
        (127, np.random.default_rng(2).standard_normal(300)),
    ],
)
def test_variance_bound(s, x):
    x = np.asarray(x, dtype=np.float32)
    n, k = x.size, 400
    err = ((_draws(x, s, k) - x) ** 2).sum(axis=1)  # ||Q(x) - x||^2 per draw
    exact = _exact_variance(x, s).sum()
    sq = float(ref_norm(x)) ** 2
    bound = min(n / s**2, math.sqrt(n) / s) * sq
    assert exact <= bound * (1 + 1e-6)
    # the empirical mean is within 5 standard errors of the exact variance, hence of the bound
    se = err.std() / math.sqrt(k)
    assert abs(err.mean() - exact) <= 5 * se + 1e-9 * sq
    assert err.mean() <= bound + 5 * se


# ----------------------------------------------------------------------------------------------
# Seeds and streams
# ----------------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**40), st.integers(0, 10**9), st.integers(0, 100))
def test_deterministic_for_seed_step_stream(seed, step, stream):
    x = np.random.default_rng(0).standard_normal(200).astype(np.float32)
    ctx = CodecContext(seed=seed, step=step)
    a = QSGDCodec(levels=7, stream=stream).encode(x, ctx)
    b = QSGDCodec(levels=7, stream=stream).encode(x, CodecContext(seed=seed, step=step))
    assert a.buffer == b.buffer
    other_stream = QSGDCodec(levels=7, stream=stream + 1).encode(x, ctx)
    other_step = QSGDCodec(levels=7, stream=stream).encode(
        x, CodecContext(seed=seed, step=step + 1)
    )
    other_seed = QSGDCodec(levels=7, stream=stream).encode(
        x, CodecContext(seed=seed + 1, step=step)
    )
    assert len({a.buffer, other_stream.buffer, other_step.buffer, other_seed.buffer}) == 4


def test_uniforms_are_float32_in_unit_interval_and_reproducible():
    u = qsgd_uniforms(10_000, 3, 4, 5)
    assert u.dtype == np.float32 and u.min() >= 0 and u.max() < 1
    np.testing.assert_array_equal(u, qsgd_uniforms(10_000, 3, 4, 5))
    np.testing.assert_array_equal(u * 2**24, np.floor(u * 2**24))  # multiples of 2**-24
    with pytest.raises(ValueError, match="ctx.seed must be a non-negative"):
        QSGDCodec().encode(np.ones(3, dtype=np.float32), CodecContext(seed=-1))


# ----------------------------------------------------------------------------------------------
# Parameters, registry, malformed buffers
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"levels": 0}, "levels must be in \\[1, 32767\\]"),
        ({"levels": 32768}, "levels must be in \\[1, 32767\\]"),
        ({"levels": 2.5}, "levels must be an integer"),
        ({"levels": True}, "levels must be an integer"),
        ({"stream": -1}, "stream must be an integer >= 0"),
        ({"stream": 0.5}, "stream must be an integer >= 0"),
    ],
)
def test_bad_params_rejected(params, match):
    with pytest.raises(ValueError, match=match):
        QSGDCodec(**params)
    with pytest.raises(ConfigError, match=match):
        make_codec(BlockSpec("qsgd", params))


def test_registered_with_defaults():
    assert CODECS.get("qsgd") is QSGDCodec
    codec = make_codec(BlockSpec("qsgd", {"levels": 15, "stream": 3}))
    assert isinstance(codec, QSGDCodec) and (codec.levels, codec.stream) == (15, 3)
    assert isinstance(make_codec(BlockSpec("qsgd", {"error_feedback": True})), ErrorFeedback)


def _payload(s: int, n: int, norm: float, codes: list[int]) -> Payload:
    body = ref_pack(codes, ref_bits(s))
    return Payload("qsgd", n, np.array([norm], dtype="<f4").tobytes() + body)


@pytest.mark.parametrize("s", [1, 5, 100, 127, 1000, 20000, 32767])
def test_malformed_buffers_rejected(s):
    codec = QSGDCodec(levels=s)
    x = np.random.default_rng(0).standard_normal(21).astype(np.float32)
    good = codec.encode(x, CodecContext(seed=2))
    assert np.isfinite(codec.decode(good, CodecContext())).all()
    with pytest.raises(ValueError, match="cannot encode 21 elements"):
        codec.decode(Payload("qsgd", 21, good.buffer[:-1]), CodecContext())
    with pytest.raises(ValueError, match="cannot encode 21 elements"):
        codec.decode(Payload("qsgd", 21, good.buffer + b"\0"), CodecContext())
    other_n = next(m for m in range(22, 60) if qsgd_wire_bytes(m, s) != good.wire_bytes)
    with pytest.raises(ValueError, match=f"cannot encode {other_n} elements"):
        codec.decode(Payload("qsgd", other_n, good.buffer), CodecContext())
    for bad_norm in (-1.0, np.nan, np.inf, -0.0):
        with pytest.raises(ValueError, match="invalid norm"):
            codec.decode(_payload(s, 3, bad_norm, [0, 1, 0]), CodecContext())
    b = ref_bits(s)
    over = [s + 1] if s < (1 << (b - 1)) - 1 else []
    for bad in [*over, -s - 1]:
        with pytest.raises(ValueError, match="level outside"):
            codec.decode(_payload(s, 3, 1.0, [0, bad, 0]), CodecContext())
    with pytest.raises(ValueError, match="non-zero levels under a zero norm"):
        codec.decode(_payload(s, 3, 0.0, [0, 1, 0]), CodecContext())


@pytest.mark.parametrize(("s", "n"), [(1, 3), (3, 5), (7, 1), (1000, 3), (16383, 7)])
def test_padding_bits_rejected(s, n):
    b = ref_bits(s)
    assert (n * b) % 8  # a partial last byte
    codec = QSGDCodec(levels=s)
    buf = bytearray(_payload(s, n, 1.0, [1] * n).buffer)
    codec.decode(Payload("qsgd", n, bytes(buf)), CodecContext())
    buf[-1] |= 0x80
    with pytest.raises(ValueError, match="padding bits"):
        codec.decode(Payload("qsgd", n, bytes(buf)), CodecContext())


# ----------------------------------------------------------------------------------------------
# Error feedback and the server side
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("s", [1, 7, 127])
def test_error_feedback_loses_nothing(s):
    rng = np.random.default_rng(s)
    ef = ErrorFeedback(QSGDCodec(levels=s, stream=2))
    total_in = np.zeros(40)
    total_out = np.zeros(40)
    for step in range(60):
        x = rng.standard_normal(40).astype(np.float32)
        p = ef.encode(x, CodecContext(seed=1, step=step))
        total_in += x
        total_out += ef.decode(p, CodecContext()).astype(np.float64)
        # the residual is at most one level of the compensated vector's norm per element
        assert np.all(np.abs(ef.residual) <= float(payload_norm(p)) / s * (1 + 1e-6))
    np.testing.assert_allclose(total_out + ef.residual, total_in, rtol=0, atol=1e-9)


def test_server_side_is_the_lossless_sum():
    codecs = [QSGDCodec(levels=15, stream=w) for w in range(3)]
    rng = np.random.default_rng(0)
    ctx = CodecContext(seed=9, step=4)
    pays = [c.encode(rng.standard_normal(30).astype(np.float32), ctx) for c in codecs]
    server = codecs[0].server()
    agg = server.aggregate(pays, ctx)
    want = sum(c.decode(p, ctx) for c, p in zip(codecs, pays, strict=True))
    np.testing.assert_array_equal(agg, want)
    down = server.encode_down(agg, ctx)
    np.testing.assert_array_equal(server.decode_down(down, ctx), agg)
    assert down.wire_bytes <= 4 * 30 + TRAILER  # the default down format, sealed
