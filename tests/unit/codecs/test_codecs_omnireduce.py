from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sealing import TRAILER, body_of, sealed

from psml_core.codecs import CODECS, CodecContext, ErrorFeedback, Payload, make_codec
from psml_core.codecs.omnireduce import OmniReduceCodec, OmniReduceServer
from psml_core.config import BlockSpec
from psml_core.errors import ConfigError

CTX = CodecContext()


# ---------------------------------------------------------------- plain references


def blocks_of(n: int, b: int) -> list[tuple[int, int, int]]:
    """(block id, start, stop) of every block, one after another."""
    out, bid, start = [], 0, 0
    while start < n:
        out.append((bid, start, min(start + b, n)))
        bid, start = bid + 1, start + b
    return out


def reference_kept_blocks(x: np.ndarray, b: int, threshold: float) -> list[int]:
    kept = []
    for bid, start, stop in blocks_of(x.size, b):
        if any(abs(float(v)) > threshold for v in x[start:stop]):
            kept.append(bid)
    return kept


def reference_records(x: np.ndarray, b: int, ids: list[int], down: bool = False) -> bytes:
    """The sealed payload (CRC-32C trailer, bound to step 0) of the block records."""
    return sealed(reference_body(x, b, ids), 0, down, n=x.size)


def reference_body(x: np.ndarray, b: int, ids: list[int]) -> bytes:
    out = b""
    for bid, start, stop in blocks_of(x.size, b):
        if bid in ids:
            out += struct.pack("<I", bid)
            for v in x[start:stop]:
                out += struct.pack("<f", float(v))
    return out


def reference_kept(x: np.ndarray, b: int, ids: list[int]) -> np.ndarray:
    out = np.zeros(x.size, dtype=np.float32)
    for bid, start, stop in blocks_of(x.size, b):
        if bid in ids:
            out[start:stop] = x[start:stop]
    return out


def reference_bytes(n: int, b: int, ids: list[int]) -> int:
    """nz_blocks (4B + 4), with 4r + 4 for a short last block, plus the CRC-32C trailer."""
    return TRAILER + sum(
        4 + 4 * (stop - start) for bid, start, stop in blocks_of(n, b) if bid in ids
    )


def reference_topk(x: np.ndarray, k: int) -> np.ndarray:
    order = sorted(range(x.size), key=lambda i: (-abs(float(x[i])), i))[:k]
    out = np.zeros(x.size, dtype=np.float32)
    out[order] = x[order]
    return out


@st.composite
def blocky(draw, max_n=200):
    """A vector with some all-zero blocks, some small-valued blocks, some large ones."""
    n = draw(st.integers(0, max_n))
    b = draw(st.sampled_from([1, 3, 4, 8, 16, 64]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal(n).astype(np.float32)
    for _, start, stop in blocks_of(n, b):
        kind = rng.integers(3)
        if kind == 0:
            x[start:stop] = 0.0
        elif kind == 1:
            x[start:stop] *= np.float32(0.01)
    return x, b


# ---------------------------------------------------------------- encode / decode


@settings(max_examples=60, deadline=None)
@given(blocky(), st.sampled_from([0.0, 0.005, 0.5]))
def test_matches_reference(case, threshold):
    x, b = case
    codec = OmniReduceCodec(block_size=b, threshold=threshold)
    p = codec.encode(x, CTX)
    ids = reference_kept_blocks(x, b, threshold)
    assert p.buffer == reference_records(x, b, ids)
    assert p.wire_bytes == reference_bytes(x.size, b, ids)
    np.testing.assert_array_equal(codec.decode(p, CTX), reference_kept(x, b, ids))


@settings(max_examples=40, deadline=None)
@given(blocky())
def test_threshold_zero_is_lossless(case):
    x, b = case
    codec = OmniReduceCodec(block_size=b)
    np.testing.assert_array_equal(codec.decode(codec.encode(x, CTX), CTX), x)


def test_byte_formula_exact():
    # n = 1000, B = 256: blocks 0..2 full, block 3 has r = 232 elements.
    x = np.zeros(1000, dtype=np.float32)
    x[[5, 600, 999]] = 1.0  # blocks 0, 2 and 3 (the short one)
    p = OmniReduceCodec().encode(x, CTX)
    assert p.wire_bytes == 2 * (4 * 256 + 4) + (4 * 232 + 4) + TRAILER
    x[999] = 0.0
    assert OmniReduceCodec().encode(x, CTX).wire_bytes == 2 * (4 * 256 + 4) + TRAILER


def test_threshold_boundary_is_skipped():
    x = np.array([0.5, -0.5, 0.25, 0.0, 0.5, 0.75], dtype=np.float32)
    codec = OmniReduceCodec(block_size=2, threshold=0.5)
    p = codec.encode(x, CTX)
    # block 0: |x| <= 0.5 everywhere -> skipped; block 1 too; block 2 has 0.75 -> sent whole.
    np.testing.assert_array_equal(codec.decode(p, CTX), [0, 0, 0, 0, 0.5, 0.75])
    assert p.wire_bytes == 4 + 8 + TRAILER


def test_adversarial_inputs():
    codec = OmniReduceCodec(block_size=4)
    assert codec.encode(np.zeros(10, dtype=np.float32), CTX).wire_bytes == TRAILER
    assert codec.encode(np.zeros(0, dtype=np.float32), CTX).wire_bytes == TRAILER
    assert codec.decode(Payload("omnireduce", 0, sealed(b"", n=0)), CTX).size == 0
    with pytest.raises(ValueError, match="cannot hold its 4-byte checksum"):
        codec.decode(Payload("omnireduce", 0, b""), CTX)  # an empty buffer is no message
    huge = np.zeros(10, dtype=np.float32)
    huge[9] = 3e38  # in the short last block (r = 2)
    p = codec.encode(huge, CTX)
    assert p.wire_bytes == 4 + 8 + TRAILER
    np.testing.assert_array_equal(codec.decode(p, CTX), huge)
    neg_zero = np.full(8, -0.0, dtype=np.float32)
    assert codec.encode(neg_zero, CTX).wire_bytes == TRAILER


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_dtypes_are_cast(dtype):
    x = np.array([0, 0, 1.5, 0, 0, -2.25, 0], dtype=dtype)
    codec = OmniReduceCodec(block_size=2)
    p = codec.encode(x, CTX)
    assert p.wire_bytes == 2 * (4 + 8) + TRAILER
    np.testing.assert_array_equal(codec.decode(p, CTX), x.astype(np.float32))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rejected(bad):
    with pytest.raises(ValueError, match="non-finite value .* at index 1"):
        OmniReduceCodec().encode(np.array([0.0, bad], dtype=np.float32), CTX)


@settings(max_examples=40, deadline=None)
@given(blocky(), st.floats(0.01, 1.0))
def test_topk_then_blocks_matches_reference(case, ratio):
    x, b = case
    codec = OmniReduceCodec(block_size=b, topk=True)
    ctx = CodecContext(ratio=ratio)
    k = int(np.ceil(ratio * x.size))
    sparse = reference_topk(x, k)
    ids = reference_kept_blocks(sparse, b, 0.0)
    p = codec.encode(x, ctx)
    assert p.buffer == reference_records(sparse, b, ids)
    np.testing.assert_array_equal(codec.decode(p, ctx), sparse)
    assert np.count_nonzero(codec.decode(p, ctx)) <= k


def test_topk_ratio_param_overrides_ctx():
    x = np.arange(1, 101, dtype=np.float32)
    codec = OmniReduceCodec(block_size=10, topk=True, ratio=0.05)
    out = codec.decode(codec.encode(x, CodecContext(ratio=1.0)), CodecContext(ratio=1.0))
    np.testing.assert_array_equal(np.flatnonzero(out), np.arange(95, 100))


# ---------------------------------------------------------------- rejection of bad buffers


def test_truncated_and_corrupted_rejected():
    codec = OmniReduceCodec(block_size=4)
    x = np.arange(1, 11, dtype=np.float32)  # blocks 0, 1 and the short block 2
    sent = codec.encode(x, CTX).buffer
    # Cutting whole records (the last 12 bytes) would leave a valid shorter message without
    # the CRC-32C trailer; with it, every cut is refused.
    for cut in (1, 3, 4, 7, 12, 13):
        with pytest.raises(ValueError, match="CRC-32C|checksum"):
            codec.decode(Payload("omnireduce", 10, sent[:-cut]), CTX)
    buf = body_of(sent, n=10)  # behind the checksum, the records' own checks
    swapped = buf[20:40] + buf[:20] + buf[40:]  # records out of order
    with pytest.raises(ValueError, match="ascending"):
        codec.decode(Payload("omnireduce", 10, sealed(swapped, n=10)), CTX)
    bad_id = struct.pack("<I", 7) + buf[4:]
    with pytest.raises(ValueError):
        codec.decode(Payload("omnireduce", 10, sealed(bad_id, n=10)), CTX)
    zero_block = struct.pack("<I", 0) + bytes(16)
    with pytest.raises(ValueError, match="never sends"):
        codec.decode(Payload("omnireduce", 10, sealed(zero_block, n=10)), CTX)


def test_small_block_rejected_under_threshold():
    codec = OmniReduceCodec(block_size=2, threshold=1.0)
    rec = sealed(struct.pack("<I", 0) + np.array([0.5, -1.0], dtype="<f4").tobytes(), n=4)
    with pytest.raises(ValueError, match="threshold"):
        codec.decode(Payload("omnireduce", 4, rec), CTX)


def test_topk_too_many_nonzeros_rejected():
    full = OmniReduceCodec(block_size=4).encode(np.ones(8, dtype=np.float32), CTX)
    with pytest.raises(ValueError, match="non-zeros"):
        OmniReduceCodec(block_size=4, topk=True).decode(full, CodecContext(ratio=0.25))


# ---------------------------------------------------------------- error feedback


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0.5, 2.0]), st.booleans())
def test_error_feedback_loses_nothing(seed, threshold, topk):
    rng = np.random.default_rng(seed)
    ef = ErrorFeedback(OmniReduceCodec(block_size=4, threshold=threshold, topk=topk))
    ctx = CodecContext(ratio=0.3)
    total_in = np.zeros(37)
    total_out = np.zeros(37)
    for _ in range(12):
        x = (rng.integers(-64, 64, 37) / 8).astype(np.float32)  # dyadic: sums are exact
        total_in += x
        total_out += ef.decode(ef.encode(x, ctx), ctx)
    np.testing.assert_array_equal(total_in, total_out + ef.residual)


# ---------------------------------------------------------------- server


def test_server_sums_and_returns_the_union():
    rng = np.random.default_rng(3)
    b, n = 8, 61  # 8 blocks, the last one of 5 elements
    xs = []
    for _ in range(3):
        x = np.zeros(n, dtype=np.float32)
        for bid in rng.choice(8, 3, replace=False):
            x[bid * b : (bid + 1) * b] = rng.standard_normal(min(b, n - bid * b))
        xs.append(x)
    xs[1][:8] = -xs[0][:8]  # a block that sums to zero is still in the union and sent
    codec = OmniReduceCodec(block_size=b)
    server = codec.server()
    assert isinstance(server, OmniReduceServer)
    agg = server.aggregate([codec.encode(x, CTX) for x in xs], CTX)
    np.testing.assert_array_equal(agg, xs[0] + xs[1] + xs[2])
    union = sorted({bid for x in xs for bid in reference_kept_blocks(x, b, 0.0)})
    down = server.encode_down(agg, CTX)
    assert down.buffer == reference_records(agg, b, union, down=True)
    assert down.wire_bytes == reference_bytes(n, b, union)  # per worker
    np.testing.assert_array_equal(server.decode_down(down, CTX), reference_kept(agg, b, union))


def test_server_without_aggregate_sends_non_zero_blocks():
    server = OmniReduceCodec(block_size=2).server()
    agg = np.array([0, 0, 1, 0, 0, 0, 0, 2], dtype=np.float32)
    down = server.encode_down(agg, CTX)
    assert down.wire_bytes == 2 * 12 + TRAILER
    np.testing.assert_array_equal(server.decode_down(down, CTX), agg)


def test_server_rejects_mixed_lengths():
    codec = OmniReduceCodec(block_size=2)
    ps = [codec.encode(np.ones(4, np.float32), CTX), codec.encode(np.ones(6, np.float32), CTX)]
    with pytest.raises(ValueError, match="different lengths"):
        codec.server().aggregate(ps, CTX)


# ---------------------------------------------------------------- registry and params


def test_registered_and_params():
    assert CODECS.get("omnireduce") is OmniReduceCodec
    codec = make_codec(BlockSpec("omnireduce", {"block_size": 64, "threshold": 0.1}))
    assert (codec.block_size, codec.threshold, codec.topk) == (64, 0.1, False)
    assert OmniReduceCodec().block_size == 256 and OmniReduceCodec().threshold == 0.0


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"block_size": 0}, "block_size"),
        ({"block_size": 2.5}, "block_size"),
        ({"block_size": True}, "block_size"),
        ({"threshold": -1.0}, "threshold"),
        ({"threshold": float("nan")}, "threshold"),
        ({"topk": "yes"}, "topk"),
        ({"ratio": 0.0}, "ratio"),
        ({"ratio": 1.5}, "ratio"),
    ],
)
def test_bad_params_rejected(params, match):
    with pytest.raises(ValueError, match=match):
        OmniReduceCodec(**params)
    with pytest.raises(ConfigError, match=match):
        make_codec(BlockSpec("omnireduce", params))
