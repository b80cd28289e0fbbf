from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psml_core.codecs import formats as F


@st.composite
def sparse_vectors(draw, max_n=300):
    n = draw(st.integers(0, max_n))
    k = draw(st.integers(0, n))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    idx = np.sort(rng.choice(n, k, replace=False)) if n else np.empty(0, dtype=np.int64)
    vals = rng.standard_normal(k).astype(np.float32)
    vals[vals == 0] = 1.0
    return n, idx.astype(np.int64), vals


def reference_size(n: int, k: int) -> int:
    """Our design's rule, written out: COO 8k, bitmap ceil(n/8)+4k, dense 4n; the cheapest."""
    coo, bitmap, dense = 8 * k, -(-n // 8) + 4 * k, 4 * n
    if coo <= bitmap:
        return coo
    return bitmap if bitmap < dense else dense


@given(sparse_vectors())
def test_sparse_round_trip_and_size(v):
    n, idx, vals = v
    buf = F.encode_sparse(n, idx, vals)
    assert len(buf) == F.sparse_size(n, idx.size) == reference_size(n, idx.size)
    got_idx, got_vals = F.decode_sparse(buf, n)
    np.testing.assert_array_equal(got_idx, idx)
    np.testing.assert_array_equal(got_vals, vals)
    dense = np.zeros(n, dtype=np.float32)
    dense[idx] = vals
    np.testing.assert_array_equal(F.decode_auto(F.encode_auto(dense), n), dense)


def test_length_ranges_do_not_overlap():
    for n in range(0, 400):
        lengths = [F.sparse_size(n, k) for k in range(n + 1)]
        fmt = [
            "coo" if k <= F.coo_max_k(n) else ("dense" if ln == 4 * n else "bitmap")
            for k, ln in enumerate(lengths)
        ]
        seen: dict[int, str] = {}
        for ln, f in zip(lengths, fmt, strict=True):
            assert seen.setdefault(ln, f) == f or (f == "dense" and seen[ln] == "dense")


@settings(max_examples=50)
@given(st.integers(1, 700), st.integers(1, 64), st.data())
def test_blocks_round_trip(n, block, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal(n).astype(np.float32)
    nblk = F.block_count(n, block)
    blocks = np.sort(rng.choice(nblk, data.draw(st.integers(0, nblk)), replace=False))
    buf = F.encode_blocks(x, blocks, block)
    sizes = [min(block, n - b * block) for b in blocks]
    assert len(buf) == sum(4 + 4 * s for s in sizes)
    ids, dense = F.decode_blocks(buf, n, block)
    np.testing.assert_array_equal(ids, blocks)
    expect = np.zeros(n, dtype=np.float32)
    for b in blocks:
        expect[b * block : (b + 1) * block] = x[b * block : (b + 1) * block]
    np.testing.assert_array_equal(dense, expect)


@pytest.mark.parametrize("cut", [1, 3, 7])
def test_truncated_payloads_are_rejected(cut):
    x = np.arange(1, 41, dtype=np.float32)
    with pytest.raises(ValueError):
        F.decode_blocks(F.encode_blocks(x, np.array([0, 2, 4]), 8)[:-cut], 40, 8)
    with pytest.raises(ValueError):
        F.decode_sparse(F.encode_sparse(40, np.array([1, 5]), np.array([1.0, 2.0]))[:-cut], 40)


def test_bitmap_with_stray_padding_bits_rejected():
    n = 100
    idx = np.arange(0, 100, 2)
    buf = bytearray(F.encode_sparse(n, idx, np.ones(idx.size)))
    buf[12] |= 0x80  # bit 103: past n
    with pytest.raises(ValueError, match="past the vector's end"):
        F.decode_sparse(bytes(buf), n)
