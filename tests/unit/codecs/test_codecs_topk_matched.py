from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sealing import TRAILER

from psml_core.codecs import CodecContext, make_codec
from psml_core.codecs.formats import sparse_size
from psml_core.codecs.value_bounded import ValueBoundedCodec
from psml_core.config import BlockSpec

FILTER = {"mode": "element", "schedule": "decay", "theta0": 0.5, "a": 3, "warmup": 2}


def stream(seed: int, n: int, steps: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(np.float32) * 0.3 for _ in range(steps)]


def test_matches_the_filter_step_by_step_and_keeps_an_exact_residual():
    codec = make_codec(BlockSpec("topk_matched", FILTER))
    filt = ValueBoundedCodec(**FILTER)
    e = np.zeros(500, dtype=np.float32)  # NumPy reference of the error feedback
    for t, g in enumerate(stream(0, 500, 12)):
        ctx = CodecContext(step=t)
        ref_k = filt.last_sent if filt.encode(g, ctx) else 0
        pl = codec.encode(g, ctx)
        assert codec.last_k == ref_k
        assert pl.wire_bytes == sparse_size(500, ref_k) + TRAILER  # the filter's push's bytes
        v = g + e
        keep = np.argsort(-np.abs(v), kind="stable")[:ref_k]
        sent = np.zeros_like(v)
        sent[keep] = v[keep]
        np.testing.assert_array_equal(codec.decode(pl, ctx), sent)
        e = v - sent
        np.testing.assert_array_equal(codec.residual, e)
    assert make_codec(BlockSpec("topk_matched", FILTER)).carries_residual


@settings(max_examples=40, deadline=None)
@given(arrays(np.float32, st.integers(1, 300), elements=st.floats(-2, 2, width=32)))
def test_round_trip_of_whatever_it_sends(x):
    codec = make_codec(BlockSpec("topk_matched", {**FILTER, "warmup": 0, "theta0": 0.1}))
    ctx = CodecContext(step=0)
    pl = codec.encode(x, ctx)
    out = codec.decode(pl, ctx)
    assert len(pl.buffer) == pl.wire_bytes == sparse_size(x.size, codec.last_k) + TRAILER
    kept = np.flatnonzero(out)
    np.testing.assert_array_equal(out[kept], x[kept])
    assert np.count_nonzero(out) <= codec.last_k


def test_nothing_to_send_is_the_checksum_only():
    codec = make_codec(BlockSpec("topk_matched", {**FILTER, "warmup": 0, "theta0": 100.0}))
    pl = codec.encode(np.full(64, 0.01, dtype=np.float32), CodecContext(step=0))
    assert pl.wire_bytes == TRAILER and codec.last_k == 0
    assert not codec.decode(pl, CodecContext(step=0)).any()
