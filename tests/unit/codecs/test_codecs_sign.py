from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from psml_core.codecs import CODECS, CodecContext, ErrorFeedback, Payload, make_codec
from psml_core.codecs.sign import (
    MajorityVoteServer,
    ScaledSignCodec,
    SignSGDCodec,
    decode_signs,
    l1_norm,
)
from psml_core.config import BlockSpec
from psml_core.errors import ConfigError

finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
CTX = CodecContext()


# ----------------------------------------------------------------------------------------------
# Plain references
# ----------------------------------------------------------------------------------------------


def ref_sign_bits(x: np.ndarray) -> bytes:
    """Bit i % 8 of byte i // 8 is set iff x_i >= 0 (sign(0) = +1, also for -0.0)."""
    out = bytearray((len(x) + 7) // 8)
    for i, v in enumerate(x):
        if v >= 0:
            out[i // 8] |= 1 << (i % 8)
    return bytes(out)


def ref_signs(x: np.ndarray) -> np.ndarray:
    return np.array([1.0 if v >= 0 else -1.0 for v in x], dtype=np.float32)


def ref_scale(x: np.ndarray) -> np.float32:
    return np.float32(math.fsum(abs(float(v)) for v in x) / len(x)) if len(x) else np.float32(0)


def scale_of(p: Payload) -> np.float32:
    return np.frombuffer(p.buffer, dtype="<f4", count=1)[0]


def close_f32(a: np.float32, b: np.float32) -> bool:
    return a == b or abs(float(a) - float(b)) <= np.spacing(np.float32(b))


# ----------------------------------------------------------------------------------------------
# signsgd
# ----------------------------------------------------------------------------------------------


@given(arrays(np.float32, st.integers(0, 300), elements=finite32))
def test_signsgd_matches_reference(x):
    codec = SignSGDCodec()
    p = codec.encode(x, CTX)
    assert p.buffer == ref_sign_bits(x)
    assert p.wire_bytes == math.ceil(x.size / 8)
    out = codec.decode(p, CTX)
    assert out.dtype == np.float32 and out.shape == x.shape
    np.testing.assert_array_equal(out, ref_signs(x))


def test_signsgd_sign_of_zero_is_plus_one():
    x = np.array([0.0, -0.0, -1e-45, 1e-45, -3e38, 3e38], dtype=np.float32)
    out = SignSGDCodec().decode(SignSGDCodec().encode(x, CTX), CTX)
    np.testing.assert_array_equal(out, [1, 1, -1, 1, -1, 1])


def test_signsgd_adversarial_inputs():
    codec = SignSGDCodec()
    assert codec.encode(np.zeros(0, dtype=np.float32), CTX).buffer == b""
    assert codec.decode(Payload("signsgd", 0, b""), CTX).shape == (0,)
    p = codec.encode(np.zeros(13, dtype=np.float32), CTX)
    assert p.buffer == b"\xff\x1f"
    np.testing.assert_array_equal(codec.decode(p, CTX), np.ones(13))
    for n in range(0, 70):
        assert codec.encode(np.ones(n, dtype=np.float32), CTX).wire_bytes == -(-n // 8)


@pytest.mark.parametrize("codec", [SignSGDCodec(), ScaledSignCodec()])
@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_dtypes_are_cast(codec, dtype):
    x = np.random.default_rng(1).standard_normal(29).astype(dtype)
    assert codec.encode(x, CTX).buffer == codec.encode(x.astype(np.float32), CTX).buffer


@pytest.mark.parametrize("codec", [SignSGDCodec(), ScaledSignCodec()])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rejected(codec, bad):
    with pytest.raises(ValueError, match="non-finite value .* at index 3"):
        codec.encode(np.array([0.0, 1.0, 2.0, bad], dtype=np.float32), CTX)


def test_signsgd_malformed_buffers_rejected():
    codec = SignSGDCodec()
    p = codec.encode(np.ones(11, dtype=np.float32), CTX)
    with pytest.raises(ValueError, match="not the 2-byte sign bits of 11"):
        codec.decode(Payload("signsgd", 11, p.buffer[:-1]), CTX)
    with pytest.raises(ValueError, match="not the 2-byte sign bits of 11"):
        codec.decode(Payload("signsgd", 11, p.buffer + b"\0"), CTX)
    with pytest.raises(ValueError, match="past the vector's end"):
        codec.decode(Payload("signsgd", 11, p.buffer[:1] + b"\x08"), CTX)
    with pytest.raises(ValueError, match="past the vector's end"):
        codec.decode(Payload("signsgd", 10, p.buffer), CTX)


def ref_majority(votes: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    total = np.array([sum(float(v[i]) for v in votes) for i in range(votes[0].size)])
    return total, np.array([1.0 if t >= 0 else -1.0 for t in total], dtype=np.float32)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 6), st.integers(0, 90), st.integers(0, 2**32 - 1))
def test_majority_vote_server(workers, n, seed):
    rng = np.random.default_rng(seed)
    xs = [rng.integers(-2, 3, n).astype(np.float32) for _ in range(workers)]  # many zeros, ties
    codec = SignSGDCodec()
    server = codec.server()
    assert isinstance(server, MajorityVoteServer)
    agg = server.aggregate([codec.encode(x, CTX) for x in xs], CTX)
    total, vote = ref_majority([ref_signs(x) for x in xs])
    assert agg.dtype == np.float32
    np.testing.assert_array_equal(agg, total)
    for scaled in (agg, agg / workers):  # the engine may pass the sum or the mean
        down = server.encode_down(scaled, CTX)
        assert down.wire_bytes == math.ceil(n / 8)
        assert down.buffer == ref_sign_bits(vote)
        np.testing.assert_array_equal(server.decode_down(down, CTX), vote)


def test_majority_vote_ties_go_to_plus_one():
    codec = SignSGDCodec()
    server = codec.server()
    a = np.array([1.0, -1.0, -1.0, 1.0], dtype=np.float32)
    b = np.array([-1.0, 1.0, -1.0, 1.0], dtype=np.float32)
    agg = server.aggregate([codec.encode(a, CTX), codec.encode(b, CTX)], CTX)
    np.testing.assert_array_equal(agg, [0, 0, -2, 2])
    down = server.decode_down(server.encode_down(agg, CTX), CTX)
    np.testing.assert_array_equal(down, [1, 1, -1, 1])
    with pytest.raises(ValueError, match="no payloads"):
        server.aggregate([], CTX)


# ----------------------------------------------------------------------------------------------
# efsignsgd (scaled sign)
# ----------------------------------------------------------------------------------------------


@given(arrays(np.float32, st.integers(0, 300), elements=finite32))
def test_scaled_sign_matches_reference(x):
    codec = ScaledSignCodec()
    p = codec.encode(x, CTX)
    scale = scale_of(p)
    assert close_f32(scale, ref_scale(x))
    assert p.buffer[4:] == ref_sign_bits(x)
    assert p.wire_bytes == 4 + math.ceil(x.size / 8)
    np.testing.assert_array_equal(codec.decode(p, CTX), ref_signs(x) * scale)


def test_scaled_sign_adversarial_inputs():
    codec = ScaledSignCodec()
    p = codec.encode(np.zeros(0, dtype=np.float32), CTX)
    assert p.buffer == bytes(4) and codec.decode(p, CTX).shape == (0,)
    p = codec.encode(np.zeros(9, dtype=np.float32), CTX)
    assert scale_of(p) == 0 and p.wire_bytes == 4 + 2
    assert not codec.decode(p, CTX).any()
    x = np.zeros(100, dtype=np.float32)
    x[7] = -3e38  # one huge value: scale = 3e36, no overflow
    p = codec.encode(x, CTX)
    assert scale_of(p) == np.float32(3e36)
    out = codec.decode(p, CTX)
    assert out[7] == -np.float32(3e36) and np.all(np.delete(out, 7) == np.float32(3e36))
    big = np.full(8, 3e38, dtype=np.float32)  # l1 beyond float32, the mean is not
    assert scale_of(codec.encode(big, CTX)) == np.float32(3e38)


def test_scaled_sign_malformed_buffers_rejected():
    codec = ScaledSignCodec()
    p = codec.encode(np.arange(-5, 6, dtype=np.float32), CTX)
    with pytest.raises(ValueError, match="is not 4 \\+ ceil\\(11/8\\) = 6"):
        codec.decode(Payload("efsignsgd", 11, p.buffer[:-1]), CTX)
    with pytest.raises(ValueError, match="is not 4 \\+ ceil"):
        codec.decode(Payload("efsignsgd", 11, p.buffer[4:]), CTX)
    for bad in (-1.0, np.nan, np.inf, -0.0):
        buf = np.array([bad], dtype="<f4").tobytes() + p.buffer[4:]
        with pytest.raises(ValueError, match="invalid scale"):
            codec.decode(Payload("efsignsgd", 11, buf), CTX)
    with pytest.raises(ValueError, match="past the vector's end"):
        codec.decode(Payload("efsignsgd", 11, p.buffer[:5] + b"\xf0"), CTX)


def _contraction(v: np.ndarray) -> float:
    """1 - delta(v) for the scaled sign: ||C(v) - v||^2 = (1 - delta) ||v||^2, exactly."""
    return 1.0 - np.abs(v).sum() ** 2 / (v.size * (v**2).sum())


def test_error_feedback_scaled_sign_over_50_steps():
    """EF-signSGD (Karimireddy et al. 2019): nothing is lost, and the residual stays bounded."""
    n, steps = 200, 50
    rng = np.random.default_rng(0)
    ef = make_codec(BlockSpec("efsignsgd", {"error_feedback": True}))
    assert isinstance(ef, ErrorFeedback) and ef.name == "efsignsgd"
    sent = np.zeros(n)
    total = np.zeros(n)
    gmax, worst, residuals = 0.0, 0.0, []
    for step in range(steps):
        g = (rng.standard_normal(n) * rng.uniform(0.1, 10)).astype(np.float32)
        g[rng.random(n) < 0.3] = 0  # sparse-ish, with exact zeros
        v = g.astype(np.float64) + (ef.residual if ef.residual is not None else 0.0)
        p = ef.encode(g, CodecContext(step=step))
        assert p.wire_bytes == 4 + 25
        sent += ef.decode(p, CTX)
        total += g
        gmax = max(gmax, float(np.linalg.norm(g)))
        worst = max(worst, _contraction(v))
        # one step: ||r'||^2 = (1 - delta(v)) ||v||^2 up to float32 rounding of v and the scale
        np.testing.assert_allclose(
            (ef.residual**2).sum(), _contraction(v) * (v**2).sum(), rtol=1e-5
        )
        residuals.append(float(np.linalg.norm(ef.residual)))
    # the invariant: sum of inputs == sum of what was sent + the final residual (float64 rounding)
    np.testing.assert_allclose(sent + ef.residual, total, rtol=0, atol=1e-9 * np.abs(total).max())
    # bounded: ||r|| <= sqrt(1-d) / (1 - sqrt(1-d)) max ||g||, d the smallest delta seen
    q = math.sqrt(worst)
    assert max(residuals) <= q / (1 - q) * gmax
    assert max(residuals) <= 5 * gmax  # delta ~ 2/pi for these inputs: far from the 1/n case


def test_error_feedback_signsgd_invariant():
    rng = np.random.default_rng(1)
    ef = ErrorFeedback(SignSGDCodec())
    total = np.zeros(30)
    sent = np.zeros(30)
    for step in range(40):
        x = rng.uniform(-1, 1, 30).astype(np.float32)
        sent += ef.decode(ef.encode(x, CodecContext(step=step)), CTX)
        total += x
    np.testing.assert_allclose(sent + ef.residual, total, rtol=0, atol=1e-9)


def test_scaled_sign_server_is_the_lossless_sum():
    codec = ScaledSignCodec()
    rng = np.random.default_rng(2)
    pays = [codec.encode(rng.standard_normal(20).astype(np.float32), CTX) for _ in range(3)]
    server = codec.server()
    agg = server.aggregate(pays, CTX)
    np.testing.assert_array_equal(agg, sum(codec.decode(p, CTX) for p in pays))
    np.testing.assert_array_equal(server.decode_down(server.encode_down(agg, CTX), CTX), agg)


# ----------------------------------------------------------------------------------------------
# Registry and helpers
# ----------------------------------------------------------------------------------------------


def test_registered_and_take_no_params():
    assert CODECS.get("signsgd") is SignSGDCodec
    assert CODECS.get("efsignsgd") is ScaledSignCodec
    for name in ("signsgd", "efsignsgd"):
        with pytest.raises(ConfigError, match="bad params"):
            make_codec(BlockSpec(name, {"ratio": 0.1}))


@settings(max_examples=50)
@given(arrays(np.float32, st.integers(0, 100), elements=finite32), st.integers(1, 17))
def test_l1_norm_tiles(x, tile):
    assert l1_norm(x, tile) == pytest.approx(math.fsum(abs(float(v)) for v in x), rel=1e-12)


@given(
    st.integers(0, 40), st.floats(0, float(np.float32(1e30)), width=32), st.integers(0, 2**32 - 1)
)
def test_decode_signs_scale(n, scale, seed):
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    out = decode_signs(ref_sign_bits(x), n, scale)
    np.testing.assert_array_equal(out, ref_signs(x) * np.float32(scale))
