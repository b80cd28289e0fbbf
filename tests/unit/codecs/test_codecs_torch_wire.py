"""The device building blocks of the torch paths against their host twins, on CPU tensors.

The CRC-32C on a device against the host's, the wire formats at their format boundaries, the
fixed-order sums against :mod:`psml_core.codecs.reduce`, the block reductions, the exact top-k
with ties, and a sealed payload whose trailer is computed by the device CRC (as on a GPU).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from psml_core.codecs import CodecContext, make_codec
from psml_core.codecs import blocks as hb
from psml_core.codecs import formats as hf
from psml_core.codecs import reduce as hr
from psml_core.codecs import select as hs
from psml_core.codecs import torch_select as ts
from psml_core.codecs import torch_wire as tw
from psml_core.codecs.integrity import crc32c
from psml_core.codecs.torch_crc import CHUNK
from psml_core.codecs.torch_crc import crc32c as device_crc32c
from psml_core.config import BlockSpec

seeds = st.integers(0, 2**32 - 1)


def _crc(body: bytes, seed: int) -> int:
    t = torch.tensor(list(body), dtype=torch.uint8)
    return int(device_crc32c(t, seed)) & 0xFFFFFFFF


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=3 * CHUNK + 5), seeds)
def test_device_crc_equals_the_hosts(body, seed):
    assert _crc(body, seed) == crc32c(body, seed)


@pytest.mark.parametrize("size", [CHUNK * CHUNK - 1, CHUNK * CHUNK + 3])
def test_device_crc_equals_the_hosts_over_two_levels(size):
    body = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    for seed in (0, 0x9E3779B9, 0xFFFFFFFF):
        assert _crc(body, seed) == crc32c(body, seed)


def test_a_device_crc_seals_the_same_bytes(monkeypatch):
    """The GPU's sealing (device CRC, one copy with the body), forced on CPU tensors."""
    monkeypatch.setattr(tw, "DEVICE_CRC", True)
    x = np.random.default_rng(0).standard_normal(5000).astype(np.float32)
    for name, params in [("topk", {"ratio": 0.05}), ("dfs", {"block_size": 8}), ("randomk", {})]:
        ctx = CodecContext(step=9, ratio=0.05, seed=2)
        host = make_codec(BlockSpec(name, params)).encode(x, ctx)
        dev = make_codec(BlockSpec(name, params)).encode(torch.from_numpy(x), ctx)
        assert host.buffer == dev.buffer, name


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 600), st.data())
def test_sparse_formats_at_every_size(n, data):
    """COO, bitmap and dense, chosen by the same rule: the same body and the same parse."""
    k = data.draw(st.integers(0, n))
    idx = np.sort(data.draw(st.permutations(range(n)))[:k]).astype(np.int64)
    vals = np.random.default_rng(n + k).standard_normal(k).astype(np.float32)
    body = hf.encode_sparse(n, idx, vals)
    dev = tw.encode_sparse(n, torch.from_numpy(idx), torch.from_numpy(vals))
    assert tw.to_host(dev) == body
    i, v, dense = tw.decode_sparse(tw.to_device(body, torch.device("cpu")), n)
    np.testing.assert_array_equal(tw.densify(n, i, v, dense).numpy(), hf.decode_auto(body, n))


@pytest.mark.parametrize("cut", [1, 3, 5])
def test_a_bad_body_is_refused_on_the_device_too(cut):
    n = 1000
    body = hf.encode_sparse(n, np.array([3, 7, 900]), np.ones(3, np.float32))
    swapped = body[4:8] + body[:4] + body[8:]  # indices out of order
    for bad in (body[:-cut], swapped):
        with pytest.raises(ValueError) as host:
            hf.decode_sparse(bad, n)
        with pytest.raises(ValueError) as dev:
            tw.decode_sparse(tw.to_device(bad, torch.device("cpu")), n)
        assert str(host.value) == str(dev.value)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.integers(1, 40), st.data())
def test_block_records_and_reductions(n, b, data):
    x = data.draw(arrays(np.float32, n, elements=st.floats(-(2.0**66), 2.0**66, width=32)))
    t = torch.from_numpy(x)
    np.testing.assert_array_equal(ts.block_energy(t, b).numpy(), hb.block_energy(x, b))
    np.testing.assert_array_equal(ts.block_maxabs(t, b).numpy(), hb.block_maxabs(x, b))
    nblk = hf.block_count(n, b)
    ids = np.sort(data.draw(st.permutations(range(nblk)))[: data.draw(st.integers(0, nblk))])
    body = hf.encode_blocks(x, ids, b)
    assert tw.to_host(tw.encode_blocks(t, torch.from_numpy(ids), b)) == body
    dids, dense = tw.decode_blocks(tw.to_device(body, torch.device("cpu")), n, b)
    hids, hdense = hf.decode_blocks(body, n, b)
    np.testing.assert_array_equal(dids.numpy(), hids)
    np.testing.assert_array_equal(dense.numpy(), hdense)


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.integers(0, 5000), elements=st.floats(-1e6, 1e6)))
def test_fixed_order_sums_agree(v):
    assert ts.tree_sum(torch.from_numpy(v)).item() == hr.tree_sum(v)
    rows = v[: (v.size // 7) * 7].reshape(-1, 7)
    np.testing.assert_array_equal(
        ts.halving_rows(torch.from_numpy(rows)).numpy(), hr.halving_rows(rows)
    )


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("ratio", [0.001, 0.01, 0.2])
@pytest.mark.parametrize("n", [4 * 65_536 + 12_345, 3_001])  # sampled; the k-th as threshold
def test_exact_topk_with_ties_past_the_sample_threshold(seed, ratio, n):
    rng = np.random.default_rng(seed)
    x = np.round(rng.standard_normal(n), 2).astype(np.float32)  # few distinct magnitudes
    k = int(n * ratio)
    np.testing.assert_array_equal(
        ts.topk_indices(torch.from_numpy(x), k).numpy(), hs.topk_indices(x, k)
    )
