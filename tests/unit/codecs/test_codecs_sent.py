"""``Codec.encode_sent_on``: the payload of ``encode`` and the vector it decodes to.

Top-k and DFS return what they sent from their selection instead of parsing their own payload
(error feedback and momentum correction subtract it from their state). It must be the decoded
payload bit for bit (signed zeros included), with the same payload bytes, whatever the vector:
zeros among the kept values, a short last block, every candidate block size.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from psml_core.codecs import CodecContext, make_codec
from psml_core.codecs.topk import TopKCodec
from psml_core.config import BlockSpec

CODECS = {
    "topk": BlockSpec("topk", {}),
    "dfs (B = 4)": BlockSpec("dfs", {"block_size": 4, "dynamic": False, "lam": 0.0}),
    "dfs (dynamic)": BlockSpec(
        "dfs", {"block_size": 4, "dynamic": True, "candidates": [2, 4, 8], "lam": 0.0}
    ),
    "threshold (the default: decoded)": BlockSpec("threshold", {"threshold": 1.0}),
}


def _vector(seed: int, n: int, zeros: float) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32)
    x[rng.random(n) < zeros] = 0.0
    x[rng.random(n) < zeros / 4] = -0.0
    return torch.from_numpy(x)


@pytest.mark.parametrize("label", list(CODECS))
@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n=st.integers(1, 300),
    zeros=st.sampled_from([0.0, 0.5, 0.99]),
    step=st.integers(0, 5),
)
def test_what_was_sent_is_the_decoded_payload(label, seed, n, zeros, step):
    x = _vector(seed, n, zeros)
    ctx = CodecContext(step=step, ratio=0.1, seed=3)
    sender, reference = make_codec(CODECS[label]), make_codec(CODECS[label])
    for t in range(step + 1):  # the same history: DFS's block size and reports follow steps
        c = CodecContext(step=t, ratio=ctx.ratio, seed=ctx.seed)
        payload, sent = sender.encode_sent_on(x, c)
        expected = reference.encode(x, c)
        assert bytes(payload.buffer) == bytes(expected.buffer)
        decoded = reference.decode_on(expected, c, x.device)
        assert sent.dtype == torch.float32 and sent.shape == (n,)
        assert torch.equal(sent.view(torch.int32), decoded.view(torch.int32))  # bit for bit


def test_a_subclass_that_encodes_otherwise_decodes_its_payload():
    class Halved(TopKCodec):
        def encode(self, x, ctx):
            return super().encode(x / 2, ctx)

    codec = Halved()
    x = _vector(0, 50, 0.0)
    ctx = CodecContext(step=0, ratio=0.1, seed=0)
    payload, sent = codec.encode_sent_on(x, ctx)
    assert torch.equal(sent, codec.decode_on(payload, ctx, x.device))
    assert float(sent.abs().max()) == pytest.approx(float(x.abs().max()) / 2)


@pytest.mark.parametrize(
    ("spec", "cls"),
    [
        (BlockSpec("topk", {"error_feedback": True}), TopKCodec),
        (BlockSpec("dfs", {"block_size": 4, "momentum_correction": True}), None),
    ],
)
def test_the_wrappers_take_what_was_sent_without_decoding_their_payload(spec, cls, monkeypatch):
    from psml_core.codecs.dfs import DFSCodec

    def refused(*_, **__):
        raise AssertionError("the wrapper parsed its own payload")

    monkeypatch.setattr(cls or DFSCodec, "decode_on", refused)
    codec = make_codec(spec, momentum=0.9)
    for t in range(3):
        codec.encode(_vector(t, 64, 0.2), CodecContext(step=t, ratio=0.1, seed=0))
