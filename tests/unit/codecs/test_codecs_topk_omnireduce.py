"""The "top-k + OmniReduce blocks" baseline (DFS spec): element top-k with EF, then B-blocks."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sealing import TRAILER, sealed

from psml_core.codecs import CodecContext, ErrorFeedback, make_codec
from psml_core.codecs.omnireduce import OmniReduceCodec
from psml_core.codecs.topk import TopKCodec
from psml_core.config import BlockSpec

RECIPE = BlockSpec(
    "omnireduce", {"block_size": 256, "topk": True, "ratio": 0.01, "error_feedback": True}
)

# ---------------------------------------------------------------- plain references


def blocks_of(n: int, b: int) -> list[tuple[int, int, int]]:
    out, bid, start = [], 0, 0
    while start < n:
        out.append((bid, start, min(start + b, n)))
        bid, start = bid + 1, start + b
    return out


def ref_topk(v: np.ndarray, k: int) -> np.ndarray:
    """The k largest |v| (ties to the lower index), the rest zeroed."""
    order = sorted(range(v.size), key=lambda i: (-abs(float(v[i])), i))
    out = np.zeros(v.size, dtype=np.float32)
    for i in order[:k]:
        out[i] = v[i]
    return out


def ref_records(x: np.ndarray, b: int, step: int = 0) -> tuple[bytes, list[int]]:
    """Records of the blocks with a non-zero value, and their ids."""
    out, ids = b"", []
    for bid, s, e in blocks_of(x.size, b):
        if any(float(t) != 0.0 for t in x[s:e]):
            ids.append(bid)
            out += struct.pack("<I", bid) + b"".join(struct.pack("<f", float(t)) for t in x[s:e])
    return sealed(out, step, n=x.size), ids


def ref_bytes(n: int, b: int, ids) -> int:
    """The records' bytes plus the CRC-32C trailer."""
    ids = set(ids)
    return TRAILER + sum(4 + 4 * (e - s) for bid, s, e in blocks_of(n, b) if bid in ids)


# ---------------------------------------------------------------- tests


def test_recipe_codec_matches_reference_with_error_feedback():
    """Several steps of the recipe's codec: buffers, residual and bytes equal the reference."""
    rng = np.random.default_rng(0)
    n, rho, b = 3000, 0.01, 256
    codec = make_codec(RECIPE)
    assert isinstance(codec, ErrorFeedback)
    residual = np.zeros(n)
    k = math.ceil(rho * n)
    for step in range(6):
        x = (rng.standard_normal(n) * rng.exponential(1, n)).astype(np.float32)
        ctx = CodecContext(step=step, ratio=0.5)  # the recipe's ratio param wins over ctx
        v64 = x.astype(np.float64) + residual
        sparse = ref_topk(v64.astype(np.float32), k)
        buf, ids = ref_records(sparse, b, step)
        p = codec.encode(x, ctx)
        assert p.buffer == buf
        assert (
            p.wire_bytes
            == ref_bytes(n, b, ids)
            <= min(k, len(blocks_of(n, b))) * (4 * b + 4) + TRAILER
        )
        residual = v64 - sparse.astype(np.float64)
        np.testing.assert_array_equal(codec.residual, residual)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 2000), st.sampled_from([8, 64, 256]), st.integers(0, 2**32 - 1))
def test_server_down_bytes_are_the_union(n, b, seed):
    """down = P |U_p blocks_p| (4B + 4), with 4r + 4 for a short last block."""
    rng = np.random.default_rng(seed)
    P = 4
    codec = OmniReduceCodec(block_size=b, topk=True, ratio=0.01)
    server = codec.server()
    ctx = CodecContext(ratio=0.01)
    xs = [rng.standard_normal(n).astype(np.float32) for _ in range(P)]
    pls = [codec.encode(x, ctx) for x in xs]
    union: set[int] = set()
    for x, p in zip(xs, pls, strict=True):
        sparse = ref_topk(x, math.ceil(0.01 * n))
        buf, ids = ref_records(sparse, b)
        assert p.buffer == buf
        union |= set(ids)
    agg = server.aggregate(pls, ctx)
    down = server.encode_down(agg / np.float32(P), ctx)
    assert down.wire_bytes == ref_bytes(n, b, union)
    np.testing.assert_array_equal(
        np.flatnonzero(server.union), np.array(sorted(union), dtype=np.int64)
    )


@pytest.mark.parametrize("n", [99, 100, 2405, 10**5 + 7])
def test_same_density_as_the_topk_baseline(n):
    """Both keep about rho n elements: ceil here, floor (at least 1) in the top-k codec."""
    ctx = CodecContext(ratio=0.01)
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    ours = OmniReduceCodec(topk=True, ratio=0.01)
    kept = np.count_nonzero(ours.decode(ours.encode(x, ctx), ctx))
    theirs = TopKCodec(ratio=0.01).keep_count(n, ctx)
    assert kept == ours.kept_elements(n, ctx) == math.ceil(0.01 * n)
    assert 0 <= kept - theirs <= 1


def test_plain_omnireduce_skips_nothing_on_a_dense_gradient():
    """Our design's OmniReduce baseline (threshold 0, B = 256): 4n + 4 nblk on a dense vector."""
    n = 10_000
    codec = make_codec(BlockSpec("omnireduce", {"block_size": 256, "threshold": 0.0}))
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    assert (
        codec.encode(x, CodecContext()).wire_bytes == 4 * n + 4 * len(blocks_of(n, 256)) + TRAILER
    )
