from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sealing import TRAILER, sealed

from psml_core.codecs import CODECS, CodecContext, KVCodec, Payload, ServerCodec, make_codec
from psml_core.codecs.kv import decode_entries, encode_entries, pack_keys, unpack_keys
from psml_core.config import BlockSpec

finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
# Mostly zeros, as a sparse gradient: the non-zeros are what kv sends.
sparse32 = st.one_of(st.just(0.0), st.just(0.0), finite32)
# Summands whose sum over <= 5 pushes stays finite (an inf aggregate is rightly unencodable).
summable32 = st.one_of(st.just(0.0), st.floats(-(2.0**120), 2.0**120, width=32))
vectors = arrays(np.float32, st.integers(0, 200), elements=sparse32)
CTX = CodecContext()


# ---------------------------------------------------------------- plain references


def ref_entries(idx: list[int], vals: list[float], n: int) -> bytes:
    """The sealed payload (CRC-32C trailer) of :func:`ref_entries_body` for ``n`` elements."""
    return sealed(ref_entries_body(idx, vals), n=n)


def ref_entries_body(idx: list[int], vals: list[float]) -> bytes:
    """PS-lite entries by struct: uint64 keys, then float32 values, little-endian."""
    return b"".join(struct.pack("<Q", i) for i in idx) + b"".join(
        struct.pack("<f", v) for v in vals
    )


def ref_nonzeros(x: np.ndarray) -> list[int]:
    return [i for i in range(x.size) if float(x[i]) != 0.0]


@st.composite
def vector_and_keys(draw):
    x = draw(vectors)
    keys = sorted(draw(st.sets(st.integers(0, max(x.size - 1, 0)), max_size=x.size)))
    return x, keys if x.size else []


# ---------------------------------------------------------------- worker side


@settings(max_examples=150, deadline=None)
@given(vectors)
def test_encode_matches_reference_and_round_trips(x):
    codec = KVCodec()
    idx = ref_nonzeros(x)
    p = codec.encode(x, CTX)
    assert p.buffer == ref_entries(idx, [float(x[i]) for i in idx], x.size)
    assert p.wire_bytes == 12 * len(idx) + TRAILER and p.n == x.size
    out = codec.decode(p, CTX)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, x)  # lossless (a -0.0 decodes as 0.0, equal)
    keys, vals = codec.decode_entries(p, CTX)
    assert keys.tolist() == idx and vals.tolist() == [float(x[i]) for i in idx]


@settings(max_examples=150, deadline=None)
@given(vector_and_keys())
def test_encode_keys_sends_exactly_those_keys_zeros_included(xk):
    x, keys = xk
    p = KVCodec().encode_keys(x, np.array(keys, dtype=np.int64), CTX)
    assert p.buffer == ref_entries(keys, [float(x[i]) for i in keys], x.size)
    assert p.wire_bytes == 12 * len(keys) + TRAILER
    expect = np.zeros(x.size, dtype=np.float32)
    expect[keys] = x[keys]
    np.testing.assert_array_equal(KVCodec().decode(p, CTX), expect)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 10_000).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1))))
)
def test_key_list_round_trip(n_keys):
    n, keys = n_keys
    ks = np.array(sorted(keys), dtype=np.int64)
    buf = pack_keys(ks, n)
    body = b"".join(struct.pack("<Q", k) for k in sorted(keys))
    assert buf == sealed(body, None, n=n)  # a request: no step (see psml_core.codecs.kv)
    assert len(buf) == 8 * len(keys) + TRAILER
    np.testing.assert_array_equal(unpack_keys(memoryview(buf), n), ks)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_a_mutated_key_list_is_refused(data):
    """Cut or extended by any number of bytes (whole keys included), emptied, or one byte
    flipped: never another valid request."""
    n = data.draw(st.integers(1, 5_000), label="n")
    keys = sorted(data.draw(st.sets(st.integers(0, n - 1), max_size=200), label="keys"))
    buf = pack_keys(np.array(keys, dtype=np.int64), n)
    cut = data.draw(st.integers(1, len(buf)), label="cut")
    extra = data.draw(st.binary(min_size=1, max_size=16), label="extra")
    pos = data.draw(st.integers(0, len(buf) - 1), label="pos")
    flipped = bytearray(buf)
    flipped[pos] ^= data.draw(st.integers(1, 255), label="mask")
    for bad in (buf[:-cut], buf + extra, bytes(flipped), b""):
        with pytest.raises(ValueError, match="kv key list"):
            unpack_keys(bad, n)


@settings(max_examples=60, deadline=None)
@given(st.lists(arrays(np.float32, 50, elements=summable32), min_size=1, max_size=5))
def test_default_server_sums_the_decoded_pushes(xs):
    codec = make_codec(BlockSpec("kv"))
    server = codec.server()
    assert type(server) is ServerCodec
    agg = server.aggregate([codec.encode(x, CTX) for x in xs], CTX)
    expect = np.zeros(50, dtype=np.float32)
    for x in xs:  # float32 sums in the same order
        expect += x
    np.testing.assert_array_equal(agg, expect)
    down = server.encode_down(agg, CTX)
    np.testing.assert_array_equal(server.decode_down(down, CTX), agg)


def test_large_sparse_vector_against_numpy():
    rng = np.random.default_rng(0)
    x = np.zeros(100_000, dtype=np.float32)
    idx = np.sort(rng.choice(x.size, 3000, replace=False))
    x[idx] = rng.standard_normal(idx.size).astype(np.float32)
    p = KVCodec().encode(x, CTX)
    expect = sealed(idx.astype("<u8").tobytes() + x[idx].astype("<f4").tobytes(), n=x.size)
    assert p.buffer == expect and p.wire_bytes == 12 * 3000 + TRAILER
    np.testing.assert_array_equal(KVCodec().decode(p, CTX), x)


def test_empty_and_all_zero_vectors():
    assert KVCodec().encode(np.zeros(0, np.float32), CTX).buffer == sealed(b"", n=0)
    p = KVCodec().encode(np.zeros(7, np.float32), CTX)
    assert p.wire_bytes == TRAILER
    np.testing.assert_array_equal(KVCodec().decode(p, CTX), np.zeros(7))
    q = KVCodec().encode_keys(np.zeros(7, np.float32), np.array([1, 5]), CTX)
    assert q.wire_bytes == 24 + TRAILER  # zeros are sent when asked for


def test_registry_and_memoryview_buffers():
    assert CODECS.get("kv") is KVCodec and isinstance(make_codec(BlockSpec("kv")), KVCodec)
    x = np.array([0, 1.5, 0, -2], dtype=np.float32)
    p = KVCodec().encode(x, CTX)
    mv = Payload("kv", 4, memoryview(bytearray(p.buffer)))
    np.testing.assert_array_equal(KVCodec().decode(mv, CTX), x)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_input_rejected(bad):
    with pytest.raises(ValueError, match="non-finite value .* at index 1"):
        KVCodec().encode(np.array([1.0, bad], dtype=np.float32), CTX)


@pytest.mark.parametrize(
    ("keys", "match"),
    [([2, 1], "strictly ascending"), ([1, 1], "strictly ascending"), ([0, 9], r"\[0, 4\)")],
)
def test_encode_keys_rejects_bad_keys(keys, match):
    with pytest.raises(ValueError, match=match):
        KVCodec().encode_keys(np.ones(4, np.float32), np.array(keys), CTX)
    with pytest.raises(ValueError, match=match):
        pack_keys(np.array(keys), 4)


# ---------------------------------------------------------------- strict decoder


def _good() -> bytes:
    return ref_entries_body([1, 4, 7], [0.5, -1.0, 2.0])


@pytest.mark.parametrize("cut", [1, 4, 8, 11])
def test_length_not_a_multiple_of_12_rejected(cut):
    with pytest.raises(ValueError, match="not a whole number of 12-byte entries"):
        decode_entries(_good()[:-cut], 10)


@pytest.mark.parametrize(
    ("keys", "match"),
    [
        ([4, 1, 7], "strictly ascending"),
        ([1, 1, 7], "strictly ascending"),
        ([1, 4, 10], r"outside \[0, 10\)"),
        ([1, 4, 2**64 - 1], r"outside \[0, 10\)"),  # must not wrap to a negative int64
    ],
)
def test_bad_keys_rejected(keys, match):
    with pytest.raises(ValueError, match=match):
        decode_entries(ref_entries_body(keys, [0.5, -1.0, 2.0]), 10)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_value_rejected(bad):
    with pytest.raises(ValueError, match="non-finite value .* at key 7"):
        KVCodec().decode(Payload("kv", 10, ref_entries([1, 4, 7], [0.5, -1.0, bad], 10)), CTX)


def test_key_list_rejections():
    """A list whose checksum holds is still checked: whole keys, in order, in range."""
    with pytest.raises(ValueError, match="not a whole number of uint64 keys"):
        unpack_keys(sealed(b"\x00" * 12, None, n=10), 10)
    with pytest.raises(ValueError, match="strictly ascending"):
        unpack_keys(sealed(struct.pack("<QQ", 3, 2), None, n=10), 10)
    with pytest.raises(ValueError, match="outside"):
        unpack_keys(sealed(struct.pack("<Q", 10), None, n=10), 10)


def test_encode_entries_checks_lengths():
    with pytest.raises(ValueError, match="2 keys but 1 values"):
        encode_entries(5, np.array([0, 1]), np.array([1.0]))
