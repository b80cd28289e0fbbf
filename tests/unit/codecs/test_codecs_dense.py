from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from psml_core.codecs import CODECS, CodecContext, DenseCodec, Payload

finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


def reference_encode(x: np.ndarray) -> bytes:
    """Plain reference: little-endian float32 bytes, one value after another."""
    return b"".join(np.array([v], dtype="<f4").tobytes() for v in x)


@given(arrays(np.float32, st.integers(0, 300), elements=finite32))
def test_dense_matches_reference_and_round_trips(x):
    codec = DenseCodec()
    p = codec.encode(x, CodecContext())
    assert p.buffer == reference_encode(x)
    assert p.wire_bytes == 4 * x.size
    np.testing.assert_array_equal(codec.decode(p, CodecContext()), x)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_dtypes_are_cast(dtype):
    x = np.array([1.5, -2.25, 0.0], dtype=dtype)
    p = DenseCodec().encode(x, CodecContext())
    assert p.wire_bytes == 12
    np.testing.assert_array_equal(DenseCodec().decode(p, CodecContext()), x.astype(np.float32))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rejected(bad):
    with pytest.raises(ValueError, match="non-finite value .* at index 1"):
        DenseCodec().encode(np.array([0.0, bad], dtype=np.float32), CodecContext())


def test_truncated_payload_rejected():
    p = DenseCodec().encode(np.ones(4, dtype=np.float32), CodecContext())
    with pytest.raises(ValueError, match="payload of 15 bytes; 4 float32 take 16"):
        DenseCodec().decode(Payload("none", 4, p.buffer[:-1]), CodecContext())


@pytest.mark.parametrize("bad", [b"\xff\xff\xff\xff", b"\x00\x00\x80\x7f"])
def test_a_non_finite_value_in_a_payload_is_rejected(bad):
    """Four 0xFF bytes are a NaN: a value the encoder never sends (as is infinity)."""
    with pytest.raises(ValueError, match="at index 0 is not finite"):
        DenseCodec().decode(Payload("none", 1, bad), CodecContext())


def test_aggregate_is_the_sum():
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(50).astype(np.float32) for _ in range(3)]
    codec = CODECS.get("none")()
    agg = codec.server().aggregate([codec.encode(x, CodecContext()) for x in xs], CodecContext())
    np.testing.assert_allclose(agg, xs[0] + xs[1] + xs[2], rtol=1e-6)


def test_two_dim_input_rejected():
    with pytest.raises(ValueError, match="1-D"):
        DenseCodec().encode(np.ones((2, 2), dtype=np.float32), CodecContext())
