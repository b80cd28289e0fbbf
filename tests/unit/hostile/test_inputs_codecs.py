"""Hostile payloads: a wrong element count or a wrong seed is refused in one line that names
the codec, never decoded into a vector of another length or onto other indices."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from psml_core.codecs import CODECS, make_codec
from psml_core.codecs.base import CodecContext, Payload
from psml_core.config import BlockSpec

N = 400
CTX = CodecContext(step=2, ratio=0.05, seed=5)
PARAMS = {
    "threshold": {"threshold": 1.0},
    "omnireduce": {"block_size": 16},
    "value_bounded": {"schedule": "fixed", "theta0": 1.0, "warmup": 0},
    "topk_matched": {"schedule": "fixed", "theta0": 1.0, "warmup": 0},
    "dfs": {"block_size": 16},
}


def _codec(name: str) -> object:
    return make_codec(BlockSpec(name, PARAMS.get(name, {})))


def _payload(name: str) -> Payload:
    x = np.random.default_rng(1).standard_normal(N).astype(np.float32)
    x[-1] = 9.0  # sent by every codec: a count one short has an entry past its end
    return _codec(name).encode(x, CTX)  # type: ignore[attr-defined]


@pytest.mark.parametrize("wrong", [N - 1, N + 1])
@pytest.mark.parametrize("name", sorted(CODECS.names()))
def test_a_count_one_off_is_refused_on_host_and_device(name: str, wrong: int) -> None:
    """``N`` is a multiple of 8, so even the sign codecs' bitmap tells ``N + 1`` (one byte
    more) and ``N - 1`` (its last bit, set, would be padding) from ``N``."""
    p = _payload(name)
    bad = Payload(p.codec, wrong, p.buffer)
    for decode in (
        lambda c: c.decode(bad, CTX),
        lambda c: c.decode_on(bad, CTX, torch.device("cpu")),
    ):
        with pytest.raises(ValueError) as err:
            decode(_codec(name))
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith(f"codec '{name}': "), msg


def test_random_k_decoded_with_another_seed_or_count_is_refused() -> None:
    p = _payload("randomk")
    for ctx, n in ((CodecContext(step=2, ratio=0.05, seed=6), N), (CTX, N + 1)):
        for decode in (
            lambda c: c.decode(Payload(p.codec, n, p.buffer), ctx),  # noqa: B023
            lambda c: c.decode_on(Payload(p.codec, n, p.buffer), ctx, torch.device("cpu")),  # noqa: B023
        ):
            with pytest.raises(ValueError) as err:
                decode(_codec("randomk"))
            msg = str(err.value)
            assert "\n" not in msg and msg.startswith("codec 'randomk'")
            assert "another step, seed or element count" in msg
