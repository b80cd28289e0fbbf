"""What dist messages carry besides codec payloads, known to both the shard and the worker.

Adaptive controllers (DC2) run on shard 0: each PULL of step t carries the worker's figures of
step t - 1 (:data:`FIGURES`: communication and compute seconds as two float32), and shard 0's
answer carries step t's ratio (:data:`RATIO_BYTES`, float32).
"""

from __future__ import annotations

import struct
from typing import Any

from psml_core.codecs.base import Codec, ServerCodec
from psml_core.control.base import Controller
from psml_core.engine.server import RATIO_BYTES, RATIO_KEY
from psml_core.engine.torchdist.header import Header, Kind

__all__ = [
    "FIGURES",
    "RATIO_BYTES",
    "adaptive",
    "answer_ratio",
    "codec_name",
    "grown",
    "pull_header",
    "push_header",
]

FIGURES = struct.Struct("<ff")
"""A worker's figures of its previous step for shard 0's controller: comm and compute seconds."""


def adaptive(controller: Controller) -> bool:
    """Whether the controller adapts to observations (and so must run in one place)."""
    return type(controller).observe is not Controller.observe


def codec_name(codec: Codec | ServerCodec) -> str:
    """The registered name of a codec instance (its class name if it has none)."""
    return str(getattr(codec, "name", type(codec).__name__))


def answer_ratio(extra: dict[str, Any]) -> float:
    """The step's ratio that shard 0's answer carries (adaptive controllers), in (0, 1]."""
    ratio = float(extra[RATIO_KEY])
    if not 0.0 < ratio <= 1.0:
        raise ValueError(f"ratio {ratio!r} is not in (0, 1]")
    return ratio


def grown(capacity: int, header: Header) -> int:
    """A pre-posted payload receive's capacity after ``header``'s message on that pair.

    Both ends apply it to every message of that kind, so they agree on the capacity without a
    message: the largest payload so far that did not travel inline (0: nothing is pre-posted).
    """
    return capacity if header.inline[0] else max(capacity, header.payload_len)


def pull_header(
    p: int, t: int, keys: bytes | None, figures: bytes, ratio: float, prepost: int
) -> Header:
    """Worker ``p``'s PULL of step ``t``: a key list (touched) or none, and its figures."""
    return Header(
        Kind.PULL,
        p,
        t,
        payload_len=-1 if keys is None else len(keys),
        state_len=len(figures),
        state_codec=len(figures),
        ratio=ratio,
        prepost=prepost,
    )


def push_header(p: int, t: int, payload_len: int, report: bytes, ratio: float) -> Header:
    """Worker ``p``'s PUSH of step ``t``: its payload and a round report (or none)."""
    return Header(
        Kind.PUSH,
        p,
        t,
        payload_len=payload_len,
        state_len=len(report),
        state_codec=len(report),
        ratio=ratio,
    )
