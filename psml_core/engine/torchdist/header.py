"""The dist message header, and which parts of a message travel inside its header slot.

A message is one **header message** on the channel's header tag, then, for parts that do not
fit in it, up to two **body** messages between the same pair (see :mod:`.wire`). The header
message is the 64-byte header (eight little-endian int64 words) followed by the parts that fit
in the receiver's fixed **header slot** of :data:`SLOT_BYTES`: the receiver posts that slot per
known peer before anything is sent, so a message whose parts are inline crosses the link once,
after one one-way latency.

====  ===================  ================================================================
word  field                meaning
====  ===================  ================================================================
0     ``kind``             :class:`Kind`
1     ``worker``           the worker the message is from or for (SNAPSHOT, DONE of a shard:
                           the shard)
2     ``clock``            the worker's iteration
3     ``payload_len``      bytes of the payload part; -1 = no payload (nothing to apply)
4     ``state_len``        bytes of the codec-state part (:mod:`.state`)
5     ``state_codec``      of those, the bytes the codec declares (``Pull.extra_bytes``)
6     ``ratio`` / ``stl``  PULL, PUSH: compression ratio (float64 bits); ANSWER: staleness
7     ``blocked_ns``       ANSWER: how long the pull sat at the shard's sync gate;
      / ``prepost``        PULL: capacity of the worker's pre-posted payload receive (0: none)
====  ===================  ================================================================

Inline rule (:attr:`Header.inline`), the same at both ends since it reads only the header: the
state part is inline if it fits in :data:`INLINE_BYTES`; the payload is inline if it fits in
what the state part left. Both ends thus know from the header alone which parts follow as body
messages, and of what size: a transport that moves bodies by another path between the same pair
(NCCL between known GPUs) can take over the body messages and leave headers to gloo.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np
import torch

__all__ = [
    "DATA_KINDS",
    "HEADER_BYTES",
    "HEADER_WORDS",
    "INLINE_BYTES",
    "SLOT_BYTES",
    "Channel",
    "Header",
    "Kind",
    "PeerLost",
    "ProtocolError",
]

HEADER_WORDS = 8
HEADER_BYTES = 8 * HEADER_WORDS
SLOT_BYTES = 1 << 16
"""The receive buffer posted for each header message: the header plus inline parts."""
INLINE_BYTES = SLOT_BYTES - HEADER_BYTES
"""Part bytes that can travel inside a header message."""


class Kind(IntEnum):
    """Message types."""

    PULL = 1  # worker -> shard: iteration `clock` starts, answer when the sync policy allows
    ANSWER = 2  # shard -> worker: the pull answer (payload + codec state)
    PUSH = 3  # worker -> shard: the encoded gradient of iteration `clock`
    DONE = 4  # worker -> shard, shard -> shard 0: this rank sends nothing more (see .inbox)
    SNAPSHOT = 5  # shard -> shard 0: its values once every push of `clock` is applied (eval)
    RESULT = 6  # rank -> rank 0: records, final values, wire statistics (pickled)


DATA_KINDS = frozenset({Kind.PULL, Kind.ANSWER, Kind.PUSH})
"""The kinds that carry training traffic and are counted in the records; the rest is control."""


class Channel(IntEnum):
    """Gloo tags: headers on ``c``, body parts on ``c + 1``, pre-posted payloads on ``c + 2``."""

    DATA = 1
    RESULT = 4


class ProtocolError(RuntimeError):
    """A message that this protocol cannot produce (a bug, or a mismatched peer)."""


class PeerLost(RuntimeError):
    """Gloo reported a broken connection (a peer died); ``peer`` is the rank, if known."""

    def __init__(self, message: str, peer: int | None) -> None:
        super().__init__(message)
        self.peer = peer


@dataclass(frozen=True)
class Header:
    """One message header; see the module docstring for the word layout.

    ``received`` holds, on a received header, the inline bytes that followed it in its header
    message (not part of the header's identity).
    """

    kind: Kind
    worker: int = 0
    clock: int = 0
    payload_len: int = -1
    state_len: int = 0
    state_codec: int = 0
    ratio: float = 0.0
    staleness: int = 0
    blocked_ns: int = 0
    prepost: int = 0
    received: Any = field(default=None, compare=False, repr=False)

    @property
    def part_lengths(self) -> tuple[int, int]:
        """Bytes of the payload part and of the state part (0 = not sent)."""
        return max(self.payload_len, 0), self.state_len

    @property
    def inline(self) -> tuple[bool, bool]:
        """Whether the payload and the state part travel inside the header message."""
        state_in = self.state_len <= INLINE_BYTES
        room = INLINE_BYTES - (self.state_len if state_in else 0)
        return 0 <= self.payload_len <= room, state_in

    @property
    def inline_bytes(self) -> int:
        """Part bytes inside the header message."""
        payload_in, state_in = self.inline
        n_payload, n_state = self.part_lengths
        return (n_payload if payload_in else 0) + (n_state if state_in else 0)

    @property
    def codec_bytes(self) -> int:
        """Bytes of the message the codec accounts for (what the sim backend counts)."""
        return max(self.payload_len, 0) + self.state_codec

    @property
    def protocol_bytes(self) -> int:
        """Header plus state framing: the protocol's own overhead."""
        return HEADER_BYTES + self.state_len - self.state_codec

    def words(self) -> list[int]:
        """The eight int64 words."""
        w6 = (
            int(np.float64(self.ratio).view(np.int64))
            if self.kind in (Kind.PULL, Kind.PUSH)
            else self.staleness
        )
        w7 = self.prepost if self.kind == Kind.PULL else self.blocked_ns
        return [
            int(self.kind),
            self.worker,
            self.clock,
            self.payload_len,
            self.state_len,
            self.state_codec,
            w6,
            w7,
        ]

    def tensor(self) -> torch.Tensor:
        """The eight int64 words as a tensor."""
        return torch.tensor(self.words(), dtype=torch.int64)

    @classmethod
    def from_tensor(cls, t: torch.Tensor) -> Header:
        """Parse and validate received words (ProtocolError: what is wrong with them)."""
        return cls.from_words([int(v) for v in t.reshape(-1).tolist()])

    @classmethod
    def from_words(cls, w: list[int]) -> Header:
        """Parse and validate eight words (ProtocolError: what is wrong with them)."""
        if len(w) != HEADER_WORDS:
            raise ProtocolError(f"a header of {len(w)} words, not {HEADER_WORDS}: {w}")
        try:
            kind = Kind(w[0])
        except ValueError:
            raise ProtocolError(f"unknown message kind {w[0]} in header {w}") from None
        if w[3] < -1 or w[4] < 0 or not 0 <= w[5] <= w[4]:
            raise ProtocolError(f"bad part lengths in header {w}")
        ratio, staleness, blocked, prepost = 0.0, 0, w[7], 0
        if kind in (Kind.PULL, Kind.PUSH):
            ratio = float(np.int64(w[6]).view(np.float64))
        else:
            staleness = w[6]
        if kind == Kind.PULL:
            blocked, prepost = 0, w[7]
        return cls(kind, w[1], w[2], w[3], w[4], w[5], ratio, staleness, blocked, prepost)
