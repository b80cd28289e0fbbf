from __future__ import annotations

import itertools
import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sealing import TRAILER, resealed, sealed

from psml_core.codecs import CODECS, CodecContext, Payload, make_codec
from psml_core.codecs.randomk import RandomKCodec, RandomKServer, shared_random_indices
from psml_core.config import BlockSpec
from psml_core.errors import ConfigError

finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
ratios = st.floats(0.001, 1.0)
contexts = st.builds(
    CodecContext, step=st.integers(0, 10**6), ratio=ratios, seed=st.integers(0, 2**32 - 1)
)


def ref_k(n: int, ratio: float) -> int:
    return 0 if n == 0 else max(1, int(n * ratio))


def ref_encode(x: np.ndarray, idx: list[int], ctx: CodecContext) -> bytes:
    """Plain reference: the float32 values at the (ascending) indices, then the seal bound to
    the step, the element count and the shared seed."""
    body = b"".join(struct.pack("<f", float(x[i])) for i in idx)
    return sealed(body, ctx.step, bind=(ctx.seed,), n=x.size)


@settings(max_examples=100, deadline=None)
@given(arrays(np.float32, st.integers(0, 200), elements=finite32), contexts)
def test_randomk_matches_reference(x, ctx):
    codec = RandomKCodec()
    k = ref_k(x.size, ctx.ratio)
    idx = codec.indices(x.size, ctx).tolist()
    assert len(idx) == k == len(set(idx))
    assert idx == sorted(idx) and all(0 <= i < x.size for i in idx)
    p = codec.encode(x, ctx)
    assert p.buffer == ref_encode(x, idx, ctx)
    assert p.wire_bytes == 4 * k + TRAILER
    expect = np.zeros(x.size, dtype=np.float32)
    expect[idx] = x[idx]
    # a separate instance (another worker, or the server) regenerates the same indices
    np.testing.assert_array_equal(RandomKCodec().decode(p, ctx), expect)


@settings(deadline=None)
@given(st.integers(1, 3000), st.integers(0, 3000), st.integers(0, 2**32 - 1))
def test_shared_indices_are_a_k_subset(n, k, seed):
    k = min(k, n)
    idx = shared_random_indices(n, k, np.random.default_rng(seed))
    assert idx.size == k
    assert np.all(np.diff(idx) > 0) and (k == 0 or (idx[0] >= 0 and idx[-1] < n))


@pytest.mark.parametrize(("n", "k"), [(6, 2), (7, 4)])
def test_shared_indices_are_uniform_over_subsets(n, k):
    # Every k-subset equally likely (including the complement branch, k > n/2): chi-square
    # over 2000 deterministic draws below dof + 5 sd (a uniform sampler fails with p < 1e-4).
    counts = dict.fromkeys(itertools.combinations(range(n), k), 0)
    draws = 2000
    for s in range(draws):
        counts[tuple(shared_random_indices(n, k, np.random.default_rng(s)).tolist())] += 1
    expected = draws / len(counts)
    chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
    dof = len(counts) - 1
    assert chi2 < dof + 5 * math.sqrt(2 * dof)


def test_large_draw_is_uniform_per_element():
    n, k = 200_000, 20_000
    hits = np.zeros(n)
    for s in range(10):
        hits[shared_random_indices(n, k, np.random.default_rng(s))] += 1
    # each element: Binomial(10, 0.1) -> mean 1; the halves of the vector get ~equal shares
    assert abs(hits[: n // 2].sum() - hits[n // 2 :].sum()) < 5 * math.sqrt(10 * k)


def test_same_seed_and_step_same_bytes_else_different():
    x = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    a = RandomKCodec().encode(x, CodecContext(step=3, seed=7, ratio=0.1))
    b = RandomKCodec().encode(x, CodecContext(step=3, seed=7, ratio=0.1))
    assert a.buffer == b.buffer
    c = RandomKCodec().encode(x, CodecContext(step=4, seed=7, ratio=0.1))
    d = RandomKCodec().encode(x, CodecContext(step=3, seed=8, ratio=0.1))
    assert c.buffer != a.buffer and d.buffer != a.buffer


def test_cache_follows_the_context():
    codec = RandomKCodec()
    i1 = codec.indices(100, CodecContext(step=1, ratio=0.1))
    assert codec.indices(100, CodecContext(step=1, ratio=0.1)) is i1
    i2 = codec.indices(100, CodecContext(step=2, ratio=0.1))
    assert not np.array_equal(i1, i2)
    assert codec.indices(100, CodecContext(step=1, ratio=0.2)).size == 20
    with pytest.raises(ValueError):
        i1[0] = 5  # the cached set is read-only


def test_constructor_ratio_overrides_ctx():
    x = np.ones(1000, dtype=np.float32)
    assert RandomKCodec(ratio=0.01).encode(x, CodecContext(ratio=0.5)).wire_bytes == 40 + TRAILER
    assert RandomKCodec().encode(x, CodecContext(ratio=0.5)).wire_bytes == 2000 + TRAILER


def test_all_zeros_and_one_huge_value():
    ctx = CodecContext(ratio=0.5, seed=1)
    z = np.zeros(10, dtype=np.float32)
    np.testing.assert_array_equal(RandomKCodec().decode(RandomKCodec().encode(z, ctx), ctx), z)
    x = np.zeros(10, dtype=np.float32)
    idx = RandomKCodec().indices(10, ctx)
    x[idx[0]] = 3e38
    out = RandomKCodec().decode(RandomKCodec().encode(x, ctx), ctx)
    assert out[idx[0]] == np.float32(3e38) and np.count_nonzero(out) == 1


def test_empty_vector():
    p = RandomKCodec().encode(np.zeros(0, dtype=np.float32), CodecContext(ratio=0.1))
    assert p.buffer == sealed(b"", bind=(0,), n=0)
    assert RandomKCodec().decode(p, CodecContext(ratio=0.1)).size == 0


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_dtypes(dtype):
    x = np.array([0.5, -3.0, 1.25, 2.0], dtype=dtype)
    ctx = CodecContext(ratio=1.0)
    out = RandomKCodec().decode(RandomKCodec().encode(x, ctx), ctx)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, x.astype(np.float32))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rejected(bad):
    with pytest.raises(ValueError, match="non-finite value .* at index 0"):
        RandomKCodec().encode(np.array([bad, 1.0], dtype=np.float32), CodecContext())


@pytest.mark.parametrize("ratio", [0.0, 1.01, float("nan"), None])
def test_invalid_ratio(ratio):
    if ratio is not None:
        with pytest.raises(ValueError, match=r"ratio must be .*\(0, 1\]"):
            RandomKCodec(ratio=ratio)
    with pytest.raises(ValueError, match=r"ctx.ratio must be .*\(0, 1\]"):
        RandomKCodec().encode(np.ones(3, dtype=np.float32), CodecContext(ratio=ratio))


def test_negative_seed_rejected():
    with pytest.raises(ValueError, match="ctx.seed >= 0"):
        RandomKCodec().encode(np.ones(3, dtype=np.float32), CodecContext(seed=-1))


def test_registry_and_make_codec():
    assert CODECS.get("randomk") is RandomKCodec
    assert make_codec(BlockSpec("randomk", {"ratio": 0.1})).ratio == 0.1
    with pytest.raises(ConfigError, match="ratio"):
        make_codec(BlockSpec("randomk", {"ratio": 0}))


@pytest.mark.parametrize("cut", [1, 4])
def test_truncated_payload_rejected(cut):
    ctx = CodecContext(ratio=0.1)
    p = RandomKCodec().encode(np.ones(100, dtype=np.float32), ctx)
    with pytest.raises(ValueError, match="10 values take 44"):
        RandomKCodec().decode(Payload("randomk", 100, p.buffer[:-cut]), ctx)


def test_corrupted_value_rejected():
    ctx = CodecContext(ratio=0.1)
    p = RandomKCodec().encode(np.ones(100, dtype=np.float32), ctx)
    with pytest.raises(ValueError, match="CRC-32C"):  # a changed value fails the trailer
        changed = p.buffer[:-8] + struct.pack("<f", 2.0) + p.buffer[-4:]
        RandomKCodec().decode(Payload("randomk", 100, changed), ctx)
    buf = resealed(p.buffer, lambda b: b[:-4] + struct.pack("<f", float("inf")), bind=(0,), n=100)
    with pytest.raises(ValueError, match="non-finite"):
        RandomKCodec().decode(Payload("randomk", 100, buf), ctx)


def test_server_broadcasts_values_at_the_shared_indices():
    rng = np.random.default_rng(2)
    ctx = CodecContext(step=9, seed=4, ratio=0.05)
    workers = [RandomKCodec() for _ in range(3)]
    xs = [rng.standard_normal(1000).astype(np.float32) for _ in workers]
    server = RandomKCodec().server()
    assert isinstance(server, RandomKServer)
    agg = server.aggregate([w.encode(x, ctx) for w, x in zip(workers, xs, strict=True)], ctx)
    idx = workers[0].indices(1000, ctx)
    expect = np.zeros(1000, dtype=np.float32)
    expect[idx] = xs[0][idx] + xs[1][idx] + xs[2][idx]
    np.testing.assert_allclose(agg, expect, rtol=1e-6)
    down = server.encode_down(agg, ctx)
    assert down.wire_bytes == 4 * 50 + TRAILER
    np.testing.assert_array_equal(server.decode_down(down, ctx), agg)
    np.testing.assert_array_equal(workers[1].server().decode_down(down, ctx), agg)


def test_server_rejects_an_aggregate_off_the_shared_indices():
    ctx = CodecContext(ratio=0.1)
    server = RandomKCodec().server()
    agg = np.zeros(100, dtype=np.float32)
    agg[np.setdiff1d(np.arange(100), server.codec.indices(100, ctx))[0]] = 1.0
    with pytest.raises(ValueError, match="off the shared indices"):
        server.encode_down(agg, ctx)
