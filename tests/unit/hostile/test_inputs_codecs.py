"""Hostile payloads: a wrong element count or a wrong seed is refused in one line that names
the codec, never decoded into a vector of another length or onto other indices."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from psml_core.codecs import CODECS
from psml_core.codecs.base import CodecContext, Payload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codecs"))  # sending
from sending import sending_codec  # noqa: E402

N = 400
CTX = CodecContext(step=2, ratio=0.05, seed=5)


def _payload(name: str) -> Payload:
    x = np.random.default_rng(1).standard_normal(N).astype(np.float32)
    x[-1] = 9.0  # sent by every codec: a count one short has an entry past its end
    return sending_codec(name).encode(x, CTX)


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
            decode(sending_codec(name))
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
                decode(sending_codec("randomk"))
            msg = str(err.value)
            assert "\n" not in msg and msg.startswith("codec 'randomk'")
            assert "another step, seed or element count" in msg
