"""Error feedback over the dense, fp16 and GRACE sparsifier codecs: nothing is ever lost."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psml_core.codecs import CODECS, CodecContext, DenseCodec, ErrorFeedback, make_codec
from psml_core.codecs.dgc import DGCCodec
from psml_core.codecs.fp16 import FP16Codec
from psml_core.codecs.randomk import RandomKCodec
from psml_core.codecs.threshold import ThresholdCodec
from psml_core.codecs.topk import TopKCodec
from psml_core.config import BlockSpec

FACTORIES = {
    "none": DenseCodec,
    "fp16": FP16Codec,
    "topk": TopKCodec,
    "randomk": RandomKCodec,
    "threshold": lambda: ThresholdCodec(threshold=0.5),
    "dgc": DGCCodec,
}
NAMES = list(FACTORIES)


def dyadic(rng: np.random.Generator, n: int) -> np.ndarray:
    """Multiples of 2**-8 below 16 in magnitude: every float64 sum of them is exact."""
    return (rng.integers(-(2**12), 2**12, n) / 2.0**8).astype(np.float32)


def ctx_at(t: int, ratio: float = 0.05) -> CodecContext:
    return CodecContext(step=t, ratio=ratio, seed=11)


@pytest.mark.parametrize("name", NAMES)
def test_nothing_lost_over_50_steps_exactly(name):
    # Sum of inputs == sum of what was decoded + the final residual, exactly (dyadic inputs make
    # every float64 addition exact; fp16 rounding errors of such values are dyadic as well).
    rng = np.random.default_rng(0)
    ef = ErrorFeedback(FACTORIES[name]())
    n = 2000
    sent_in, got = np.zeros(n), np.zeros(n)
    for t in range(50):
        x = dyadic(rng, n)
        p = ef.encode(x, ctx_at(t))
        sent_in += x
        got += ef.decode(p, ctx_at(t)).astype(np.float64)
    np.testing.assert_array_equal(sent_in, got + ef.residual)


@pytest.mark.parametrize("name", NAMES)
def test_each_step_splits_the_compensated_input_exactly(name):
    # v = x + r_old (float64) equals decoded + r_new exactly, on arbitrary float32 gradients
    rng = np.random.default_rng(1)
    ef = ErrorFeedback(FACTORIES[name]())
    n = 3000
    total_in, total_out = np.zeros(n), np.zeros(n)
    for t in range(50):
        x = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 30.0])).astype(np.float32)
        old = np.zeros(n) if ef.residual is None else ef.residual.copy()
        p = ef.encode(x, ctx_at(t))
        d = ef.decode(p, ctx_at(t)).astype(np.float64)
        np.testing.assert_array_equal(d + ef.residual, x.astype(np.float64) + old)
        total_in += x
        total_out += d
    np.testing.assert_allclose(total_out + ef.residual, total_in, rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(NAMES),
    st.integers(0, 300),
    st.integers(1, 12),
    st.floats(0.001, 1.0),
    st.integers(0, 2**32 - 1),
)
def test_error_feedback_loses_nothing_property(name, n, steps, ratio, seed):
    rng = np.random.default_rng(seed)
    ef = ErrorFeedback(FACTORIES[name]())
    sent_in, got = np.zeros(n), np.zeros(n)
    for t in range(steps):
        x = dyadic(rng, n)
        ctx = CodecContext(step=t, ratio=ratio, seed=seed)
        p = ef.encode(x, ctx)
        sent_in += x
        got += ef.decode(p, ctx)
    residual = np.zeros(n) if ef.residual is None else ef.residual
    np.testing.assert_array_equal(sent_in, got + residual)


def test_topk_with_error_feedback_eventually_sends_every_coordinate():
    ef = ErrorFeedback(TopKCodec(ratio=0.1))
    x = np.ones(100, dtype=np.float32)
    seen = np.zeros(100, dtype=bool)
    for t in range(10):
        seen |= ef.decode(ef.encode(x, ctx_at(t)), ctx_at(t)) != 0
    assert seen.all()  # residuals grow where nothing was sent, so the selection rotates


def test_randomk_error_feedback_residual_is_unsent_mass():
    ef = ErrorFeedback(RandomKCodec(ratio=0.25))
    x = np.arange(1, 9, dtype=np.float32)
    p = ef.encode(x, ctx_at(0))
    idx = ef.inner.indices(8, ctx_at(0))
    expect = x.astype(np.float64)
    expect[idx] = 0
    np.testing.assert_array_equal(ef.residual, expect)
    assert p.wire_bytes == 4 * 2 + 4  # two values and the step-bound trailer


@pytest.mark.parametrize("name", NAMES)
def test_make_codec_wraps_with_error_feedback(name):
    params = {"threshold": 0.5} if name == "threshold" else {}
    codec = make_codec(BlockSpec(name, {**params, "error_feedback": True}))
    assert isinstance(codec, ErrorFeedback)
    assert codec.name == name and isinstance(codec.inner, CODECS.get(name))
    assert type(codec.server()) is type(codec.inner.server())


@pytest.mark.parametrize("name", NAMES)
def test_error_feedback_payloads_aggregate_on_the_server(name):
    rng = np.random.default_rng(2)
    workers = [ErrorFeedback(FACTORIES[name]()) for _ in range(3)]
    server = workers[0].server()
    for t in range(5):
        ctx = ctx_at(t)
        pays = [w.encode(dyadic(rng, 500), ctx) for w in workers]
        agg = server.aggregate(pays, ctx)
        expect = sum(w.decode(p, ctx) for w, p in zip(workers, pays, strict=True))
        np.testing.assert_array_equal(agg, expect)
        down = server.encode_down(agg, ctx)
        out = server.decode_down(down, ctx)
        if name == "fp16":
            np.testing.assert_array_equal(out, agg.astype(np.float16).astype(np.float32))
        else:
            np.testing.assert_array_equal(out, agg)
