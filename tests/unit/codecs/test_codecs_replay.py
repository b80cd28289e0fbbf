"""A payload replayed from another step is refused: the seals are bound to the step.

Every sealed codec (and random-k, whose values land on indices regenerated from the step)
binds its CRC-32C trailer to ``ctx.step`` and to the direction (push or broadcast), at no extra
byte (random-k: its 4-byte trailer). A stale push delivered late, or last round's broadcast,
must not decode as this step's message. The fixed-length formats without a trailer (``none``,
``fp16``, ``qsgd``, the sign codecs) cannot tell: any payload of the right length is a message
they could have sent, and a stale one is still a meaningful vector.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psml_core.codecs import CODECS, make_codec
from psml_core.codecs.base import CodecContext, Payload
from psml_core.codecs.integrity import crc_seed
from psml_core.config import BlockSpec

N = 600
PARAMS = {
    "threshold": {"threshold": 0.5},
    "omnireduce": {"block_size": 16},
    "value_bounded": {"schedule": "fixed", "theta0": 0.5, "warmup": 0},
    "topk_matched": {"schedule": "fixed", "theta0": 0.5, "warmup": 0},
    "dfs": {"block_size": 16, "dynamic": False},
}
UNBOUND = {"none", "fp16", "qsgd", "signsgd", "efsignsgd"}
"""Fixed-length formats with no trailer: a replay is a valid (stale) message."""
BOUND = sorted(set(CODECS.names()) - UNBOUND)


def _ctx(step: int) -> CodecContext:
    # The shared seed and the ratio stay the same: only the step tells the messages apart.
    return CodecContext(step=step, ratio=0.1, seed=11, lr=0.1)


def _vector(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(N).astype(np.float32)


def test_the_unbound_formats_are_exactly_the_fixed_length_ones():
    assert {"dfs", "dgc", "kv", "omnireduce", "randomk", "threshold", "topk"} <= set(BOUND)
    assert set(CODECS.names()) == set(BOUND) | UNBOUND


@pytest.mark.parametrize("name", BOUND)
@pytest.mark.parametrize(("sent", "read"), [(5, 6), (6, 5), (0, 2**32 + 1), (7, 7 + 2**31)])
def test_a_push_replayed_at_another_step_is_refused(name, sent, read):
    codec = make_codec(BlockSpec(name, PARAMS.get(name, {})))
    payload = codec.encode(_vector(0), _ctx(sent))
    fresh = make_codec(BlockSpec(name, PARAMS.get(name, {})))
    fresh.decode(payload, _ctx(sent))  # decodes at its own step
    with pytest.raises(ValueError, match="CRC-32C"):
        fresh.decode(payload, _ctx(read))


@pytest.mark.parametrize("name", BOUND)
def test_a_broadcast_replayed_at_another_step_or_as_a_push_is_refused(name):
    codec = make_codec(BlockSpec(name, PARAMS.get(name, {})))
    server = codec.server()
    ctx = _ctx(3)
    agg = server.aggregate([codec.encode(_vector(s), ctx) for s in range(2)], ctx)
    down = server.encode_down(agg, ctx)
    server.decode_down(down, ctx)
    with pytest.raises(ValueError, match="CRC-32C"):
        server.decode_down(down, _ctx(4))  # last round's broadcast
    push = codec.encode(_vector(2), ctx)
    with pytest.raises(ValueError, match="CRC-32C|bytes|blocks"):
        server.decode_down(Payload(down.codec, push.n, push.buffer), ctx)  # a push as broadcast


@pytest.mark.parametrize("name", sorted(UNBOUND))
def test_the_unbound_formats_decode_a_replay(name):
    """Documented behaviour, not a wish: these formats carry nothing that could tell."""
    codec = make_codec(BlockSpec(name, PARAMS.get(name, {})))
    payload = codec.encode(_vector(0), _ctx(5))
    assert codec.decode(payload, _ctx(6)).shape == (N,)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 2**32 - 1), st.booleans())
def test_distinct_steps_have_distinct_seeds(step, offset, down):
    other = (step + offset) % 2**32
    assert crc_seed(step, down) != crc_seed(other, down)
    assert crc_seed(step, down) == crc_seed(step + 2**32, down)  # steps count modulo 2**32


def _zero_seed_step(down: bool) -> int:
    """The step whose seed is 0, solved over GF(2): ``crc_seed`` is affine in the step's bits."""
    c = crc_seed(0, down)
    rows = [(crc_seed(1 << i, down) ^ c, 1 << i) for i in range(32)]  # (image, step) pairs
    basis: list[tuple[int, int]] = []
    for image, step in rows:  # Gaussian elimination on the images, tracking their steps
        for b_image, b_step in basis:
            if image ^ b_image < image:
                image, step = image ^ b_image, step ^ b_step
        if image:
            basis.append((image, step))
            basis.sort(reverse=True)
    assert len(basis) == 32  # a bijection: exactly one step has each seed
    want, step = c, 0
    for b_image, b_step in basis:
        if want ^ b_image < want:
            want, step = want ^ b_image, step ^ b_step
    assert want == 0
    return step


def test_a_seed_of_zero_lies_beyond_any_run():
    """The one step whose seed is 0 (an empty body's trailer would be four zero bytes)."""
    for down in (False, True):
        step = _zero_seed_step(down)
        assert crc_seed(step, down) == 0 and step >= 10_000
    assert all(crc_seed(s) and crc_seed(s, True) for s in range(10_000))


def test_a_randomk_replay_would_land_on_other_indices():
    """Why random-k carries a trailer: its values are placed at the step's own indices."""
    codec = make_codec(BlockSpec("randomk", {}))
    a, b = _ctx(5), _ctx(6)
    assert not np.array_equal(codec.indices(N, a), codec.indices(N, b))
