"""A dist worker's reading of a shard's answer off the wire, before ``Worker.install``.

A malformed answer is a :class:`~.wire.ProtocolError` naming the shard,
the step and what did not decode.
"""

from __future__ import annotations

import struct

from psml_core.codecs.base import Payload
from psml_core.engine.server import Pull, ServerShard
from psml_core.engine.torchdist.protocol import answer_ratio, codec_name
from psml_core.engine.torchdist.state import decode_state
from psml_core.engine.torchdist.wire import Header, Kind, ProtocolError

__all__ = ["expect_answer", "read_answer"]


def expect_answer(hdr: Header, p: int, t: int, s: int) -> Header:
    """``hdr``, if it is shard ``s``'s answer of step ``t`` to worker ``p``.

    Raises:
        ProtocolError: it is another message.
    """
    if hdr.kind != Kind.ANSWER or hdr.clock != t or hdr.worker != p:
        raise ProtocolError(f"worker {p} expected its answer {t} from shard {s}, got {hdr}")
    return hdr


def _codec(shard: ServerShard, touched: bool) -> str:
    """The name of the codec that encoded the shard's answers."""
    return codec_name(
        shard.codec_up
        if shard.pull_mode == "aggregate"
        else shard.kv
        if touched
        else shard.codec_down
    )


def read_answer(
    shard: ServerShard,
    touched: bool,
    payload: bytes | None,
    state: bytes,
    state_codec: int,
    where: str,
    with_ratio: bool = False,
) -> tuple[Pull, float | None]:
    """The answer as the shard built it (its payload under the pull's codec, and its state).

    ``with_ratio``: shard 0's answer under an adaptive controller also carries the step's
    ratio, returned beside it (else None).

    Raises:
        ProtocolError: the codec state (or the ratio in it) does not decode.
    """
    name = _codec(shard, touched)
    try:
        answer = Pull(
            Payload(name, len(shard.keys), payload) if payload is not None else None,  # type: ignore[arg-type]
            decode_state(state),
            state_codec,
        )
        return answer, answer_ratio(answer.extra) if with_ratio else None
    except (ProtocolError, ValueError, KeyError, TypeError, struct.error) as exc:
        raise ProtocolError(
            f"{where}: bad codec state ({len(state)} bytes): {type(exc).__name__}: {exc}"
        ) from exc
