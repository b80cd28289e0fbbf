from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from psml_core.codecs import CODECS, CodecContext, Payload, make_codec
from psml_core.codecs.fp16 import FP16_MAX, FP16Codec, FP16Server
from psml_core.config import BlockSpec

finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
half_range = st.floats(-70000, 70000, width=32)
tiny = st.floats(-(2.0**-10), 2.0**-10, width=32)  # fp16 subnormals and underflow to zero


def ref_encode(x: np.ndarray) -> bytes:
    """Plain reference: saturate to +-65504, then Python's IEEE half packing (ties to even)."""
    return b"".join(struct.pack("<e", min(max(float(v), -65504.0), 65504.0)) for v in x)


def ref_decode(buf: bytes) -> list[float]:
    return [struct.unpack("<e", buf[i : i + 2])[0] for i in range(0, len(buf), 2)]


@settings(max_examples=100, deadline=None)
@given(
    st.one_of(
        arrays(np.float32, st.integers(0, 200), elements=finite32),
        arrays(np.float32, st.integers(0, 200), elements=half_range),
        arrays(np.float32, st.integers(0, 200), elements=tiny),
    )
)
def test_fp16_matches_reference(x):
    codec = FP16Codec()
    p = codec.encode(x, CodecContext())
    assert p.buffer == ref_encode(x)
    assert p.wire_bytes == 2 * x.size
    out = codec.decode(p, CodecContext())
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array(ref_decode(p.buffer), dtype=np.float32))


def test_saturates_instead_of_inf():
    x = np.array([1e5, -1e9, 65504, 65519.9, 65520, -65520, 3e38], dtype=np.float32)
    out = FP16Codec().decode(FP16Codec().encode(x, CodecContext()), CodecContext())
    np.testing.assert_array_equal(
        out, [FP16_MAX, -FP16_MAX, *([FP16_MAX] * 3), -FP16_MAX, FP16_MAX]
    )
    assert np.isfinite(out).all()


def test_rounding_is_to_nearest_even_and_relative_error_bounded():
    # 2049 lies halfway between fp16 neighbours 2048 and 2050: ties to the even mantissa (2048)
    x = np.array([2049.0, 2051.0, 1.0 + 2.0**-11, 0.1], dtype=np.float32)
    out = FP16Codec().decode(FP16Codec().encode(x, CodecContext()), CodecContext())
    np.testing.assert_array_equal(out[:3], [2048.0, 2052.0, 1.0])
    xs = np.random.default_rng(0).uniform(-60000, 60000, 10_000).astype(np.float32)
    xs = xs[np.abs(xs) > 2.0**-14]
    back = FP16Codec().decode(FP16Codec().encode(xs, CodecContext()), CodecContext())
    assert np.all(np.abs(back - xs) <= np.abs(xs) * 2.0**-11)


def test_all_zeros_and_one_huge_value():
    z = np.zeros(33, dtype=np.float32)
    p = FP16Codec().encode(z, CodecContext())
    assert p.buffer == bytes(66)
    x = np.full(10, 0.5, dtype=np.float32)
    x[4] = 3e38
    out = FP16Codec().decode(FP16Codec().encode(x, CodecContext()), CodecContext())
    np.testing.assert_array_equal(out, [0.5] * 4 + [FP16_MAX] + [0.5] * 5)


def test_empty_vector():
    p = FP16Codec().encode(np.zeros(0, dtype=np.float32), CodecContext())
    assert p.buffer == b""
    assert FP16Codec().decode(p, CodecContext()).size == 0


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_dtypes(dtype):
    x = np.array([0.5, -3.0, 1e-4, 70000.0 if dtype == np.float64 else 1.0], dtype=dtype)
    p = FP16Codec().encode(x, CodecContext())
    assert p.buffer == ref_encode(x.astype(np.float32))
    if dtype == np.float16:  # fp16 input round-trips exactly
        assert p.buffer == x.astype("<f2").tobytes()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rejected(bad):
    with pytest.raises(ValueError, match="non-finite value .* at index 2"):
        FP16Codec().encode(np.array([0.0, 1.0, bad], dtype=np.float32), CodecContext())


def test_read_only_input():
    x = np.frombuffer(np.arange(5, dtype=np.float32).tobytes(), dtype=np.float32)
    assert FP16Codec().encode(x, CodecContext()).buffer == ref_encode(x)


def test_deterministic():
    x = np.random.default_rng(3).standard_normal(1000).astype(np.float32)
    assert (
        FP16Codec().encode(x, CodecContext()).buffer
        == FP16Codec().encode(x, CodecContext(step=5)).buffer
    )


@pytest.mark.parametrize("cut", [1, 2])
def test_truncated_payload_rejected(cut):
    p = FP16Codec().encode(np.ones(4, dtype=np.float32), CodecContext())
    with pytest.raises(ValueError, match="cannot hold 4 fp16"):
        FP16Codec().decode(Payload("fp16", 4, p.buffer[:-cut]), CodecContext())


@pytest.mark.parametrize("pattern", [0x7C00, 0xFC00, 0x7E00, 0xFFFF])
def test_inf_or_nan_payload_rejected(pattern):
    buf = struct.pack("<HHH", 0x3C00, pattern, 0x3C00)  # 1.0, inf / nan, 1.0
    with pytest.raises(ValueError, match="inf or NaN"):
        FP16Codec().decode(Payload("fp16", 3, buf), CodecContext())


def test_registry_and_make_codec():
    assert CODECS.get("fp16") is FP16Codec
    assert isinstance(make_codec(BlockSpec("fp16", {})), FP16Codec)


def test_server_sums_and_broadcasts_fp16():
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(100).astype(np.float32) for _ in range(3)]
    xs[0][7] = 60000.0
    xs[1][7] = 60000.0  # the sum saturates on the way down
    codec, ctx = FP16Codec(), CodecContext()
    server = codec.server()
    assert isinstance(server, FP16Server)
    pays = [codec.encode(x, ctx) for x in xs]
    agg = server.aggregate(pays, ctx)
    expect = sum(codec.decode(p, ctx) for p in pays)
    np.testing.assert_array_equal(agg, expect)
    down = server.encode_down(agg, ctx)
    assert down.wire_bytes == 200 and down.buffer == ref_encode(agg)
    out = server.decode_down(down, ctx)
    assert out[7] == FP16_MAX
    with pytest.raises(ValueError, match="codec .fp16/down.: payload"):
        server.decode_down(Payload(down.codec, 100, down.buffer[:-2]), ctx)
