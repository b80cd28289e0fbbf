"""The dist wire layer: a fixed header, variable-size byte parts, exact byte accounting.

A message is one **header** of :data:`HEADER_BYTES` = 64 bytes (eight little-endian int64
words, sent as one int64 tensor on the channel's header tag) followed by up to two **parts**
(uint8 tensors on the channel's body tag, same pair): the codec's payload buffer and the
serialized codec state. Their lengths are in the header, so the receiver allocates exactly.

====  ===================  ================================================================
word  field                meaning
====  ===================  ================================================================
0     ``kind``             :class:`Kind`
1     ``worker``           the worker the message is from or for (SNAPSHOT: the shard)
2     ``clock``            the worker's iteration
3     ``payload_len``      bytes of the payload part; -1 = no payload (nothing to apply)
4     ``state_len``        bytes of the codec-state part (:mod:`.state`)
5     ``state_codec``      of those, the bytes the codec declares (``Pull.extra_bytes``)
6     ``ratio`` / ``stl``  PULL, PUSH: compression ratio (float64 bits); ANSWER: staleness
7     ``blocked_ns``       ANSWER: how long the pull sat at the shard's sync gate;
      / ``prepost``        PULL: capacity of the worker's pre-posted payload receive (0: none)
====  ===================  ================================================================

Parts by kind: a PUSH's payload is the encoded gradient and its state the round report (PCP);
an ANSWER's payload is the shard's encoded answer and its state the codec state (:mod:`.state`);
a PULL has no payload (``payload_len`` -1) except in ``touched`` pull mode, where its payload
is the key list of the shard's keys the worker's batch touches (``8 m + 4`` bytes: uint64 keys
and a CRC-32, :func:`psml_core.codecs.kv.pack_keys`), and its state part the controller
figures, if any.

Pre-posted payloads. A part can only be received once its header has arrived (its size is
unknown before), and gloo starts a transfer only once the receive is posted: one more
round trip per message (0.1-0.2 ms on loopback, against ~1.3 ms for a 4 MB transfer). Both
hot paths avoid it by posting the payload's receive before its header arrives, on the
pre-post tag (``c + 2``), sized like the largest payload of that kind seen so far on that pair:

* the pull answer: the worker posts it before sending the request and names its capacity in
  the request (``prepost``);
* the push: the shard posts the receive of a worker's next push as soon as it has its current
  one; both ends track the capacity (the largest payload that worker pushed to that shard so
  far), so no message names it. The worker's DONE completes the last one.

The sender then sends exactly one message on the pre-post tag: the payload if it fits, else an
empty message followed by the payload on the body tag as usual.

Byte accounting. Every tensor handed to gloo goes through :meth:`Wire._isend`, which counts
its ``nbytes`` in :class:`WireStats`: that is the ground truth. Of a message's bytes,

* **codec bytes** = ``payload_len`` + ``state_codec`` — exactly what the sim backend counts;
* **protocol bytes** = the 64-byte header + the state part's framing
  (``state_len - state_codec``: its length word and JSON manifest).

Receive buffers of large parts come from a :class:`BufferPool` and are handed to codecs as a
``memoryview`` (zero copies; the codecs read buffers through ``len`` / ``np.frombuffer``).
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

__all__ = [
    "DATA_KINDS",
    "HEADER_BYTES",
    "BufferPool",
    "Channel",
    "Header",
    "Incoming",
    "Kind",
    "Outgoing",
    "PeerLost",
    "Prepost",
    "ProtocolError",
    "Wire",
    "WireStats",
]

HEADER_WORDS = 8
HEADER_BYTES = 8 * HEADER_WORDS


class Kind(IntEnum):
    """Message types."""

    PULL = 1  # worker -> shard: iteration `clock` starts, answer when the sync policy allows
    ANSWER = 2  # shard -> worker: the pull answer (payload + codec state)
    PUSH = 3  # worker -> shard: the encoded gradient of iteration `clock`
    DONE = 4  # worker -> shard: this worker sends nothing more
    SNAPSHOT = 5  # shard -> shard 0: its values once every push of `clock` is applied (eval)
    RESULT = 6  # rank -> rank 0: records, final values, wire statistics (pickled)


DATA_KINDS = frozenset({Kind.PULL, Kind.ANSWER, Kind.PUSH})
"""The kinds that carry training traffic and are counted in the records; the rest is control."""


class Channel(IntEnum):
    """Gloo tags: headers on tag ``c``, parts on ``c + 1``, pre-posted payloads on ``c + 2``."""

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
    """One message header; see the module docstring for the word layout."""

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

    @property
    def part_lengths(self) -> tuple[int, int]:
        """Bytes of the payload part and of the state part (0 = not sent)."""
        return max(self.payload_len, 0), self.state_len

    @property
    def codec_bytes(self) -> int:
        """Bytes of the message the codec accounts for (what the sim backend counts)."""
        return max(self.payload_len, 0) + self.state_codec

    @property
    def protocol_bytes(self) -> int:
        """Header plus state framing: the protocol's own overhead."""
        return HEADER_BYTES + self.state_len - self.state_codec

    def tensor(self) -> torch.Tensor:
        """The eight int64 words."""
        w6 = (
            int(np.float64(self.ratio).view(np.int64))
            if self.kind in (Kind.PULL, Kind.PUSH)
            else self.staleness
        )
        words = [
            int(self.kind),
            self.worker,
            self.clock,
            self.payload_len,
            self.state_len,
            self.state_codec,
            w6,
            self.prepost if self.kind == Kind.PULL else self.blocked_ns,
        ]
        return torch.tensor(words, dtype=torch.int64)

    @classmethod
    def from_tensor(cls, t: torch.Tensor) -> Header:
        """Parse and validate eight received words (ProtocolError: what is wrong with them)."""
        w = [int(v) for v in t.reshape(-1).tolist()]
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


@dataclass
class WireStats:
    """What one rank handed to gloo and received, per message kind.

    Attributes:
        sent: kind name -> [messages, bytes passed to send, of which protocol bytes].
        received: kind name -> [messages, bytes received, of which protocol bytes].
    """

    sent: dict[str, list[int]] = field(default_factory=dict)
    received: dict[str, list[int]] = field(default_factory=dict)

    def count(self, table: str, kind: Kind, nbytes: int, protocol: int = 0, msg: int = 0) -> None:
        """Add to ``table`` ("sent" or "received"): bytes, protocol bytes, messages."""
        row = getattr(self, table).setdefault(kind.name, [0, 0, 0])
        row[0] += msg
        row[1] += nbytes
        row[2] += protocol

    def bytes_sent(self, kinds: Sequence[Kind] | frozenset[Kind] = DATA_KINDS) -> int:
        """Bytes passed to send for messages of ``kinds``."""
        return sum(self.sent.get(k.name, [0, 0, 0])[1] for k in kinds)

    def protocol_sent(self, kinds: Sequence[Kind] | frozenset[Kind] = DATA_KINDS) -> int:
        """Protocol bytes (headers, state framing) among them."""
        return sum(self.sent.get(k.name, [0, 0, 0])[2] for k in kinds)


class BufferPool:
    """Receive buffers for large parts, reused once nothing refers to them any more.

    Fresh 64-100 MB allocations cost page faults that cut loopback goodput to 0.5-0.75x of
    gloo's (measured on a 2-vCPU VM); a buffer handed out
    returns to the pool when its last view dies (``weakref.finalize`` on the view), so a codec
    that keeps a payload (a BSP round waiting for its last push) simply keeps its buffer.

    Args:
        min_bytes: Smaller parts get plain fresh buffers.
        keep: Free buffers kept per size class (1 MiB granularity).
    """

    def __init__(self, min_bytes: int = 1 << 20, keep: int = 4) -> None:
        self.min_bytes, self.keep = min_bytes, keep
        self._free: dict[int, list[np.ndarray]] = {}
        self._lock = threading.Lock()

    def take(self, n: int) -> np.ndarray:
        """A uint8 array of length ``n`` (contents undefined)."""
        if n < self.min_bytes:
            return np.empty(n, dtype=np.uint8)
        cap = -(-n // (1 << 20)) << 20
        with self._lock:
            free = self._free.get(cap)
            base = free.pop() if free else None
        if base is None:
            base = np.empty(cap, dtype=np.uint8)
        view = base[:n]
        weakref.finalize(view, self._give_back, base)
        return view

    def _give_back(self, base: np.ndarray) -> None:
        with self._lock:
            free = self._free.setdefault(base.size, [])
            if len(free) < self.keep:
                free.append(base)


def _as_tensor(buf: Any) -> torch.Tensor:
    # Zero-copy view of a bytes-like object; gloo only reads it, so a read-only buffer is fine.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.frombuffer(buf, dtype=torch.uint8)


_EMPTY = torch.empty(0, dtype=torch.uint8)


def _transport(exc: RuntimeError, peer: int | None) -> PeerLost:
    return PeerLost(f"gloo: {exc}", peer)


@dataclass
class Outgoing:
    """Sends in flight; the tensors stay referenced until they complete."""

    works: list[Any]
    keep: list[Any]
    peer: int

    def reap(self) -> bool:
        """If every send has completed, release them and return True (PeerLost if one failed)."""
        try:
            if not all(w.is_completed() for w in self.works):
                return False
        except RuntimeError as exc:
            raise _transport(exc, self.peer) from None
        self.wait()  # surfaces a failed send
        return True

    def wait(self) -> None:
        """Block until every send has completed."""
        try:
            for w in self.works:
                w.wait()
        except RuntimeError as exc:
            raise _transport(exc, self.peer) from None
        self.works.clear()
        self.keep.clear()


@dataclass
class Prepost:
    """A payload receive posted before its header (see the module docstring)."""

    work: Any
    buf: np.ndarray
    capacity: int


@dataclass
class Incoming:
    """A header receive posted in advance, from one rank or (``peer`` None) from any."""

    work: Any
    buf: torch.Tensor
    peer: int | None
    wire: Wire
    channel: Channel

    def wait(self) -> Header:
        """Block until the header is in; count it."""
        return self.wait_from()[0]

    def wait_from(self) -> tuple[Header, int]:
        """Block until the header is in; count it; return it and its sender."""
        try:
            self.work.wait()
        except RuntimeError as exc:
            raise _transport(exc, self.peer) from None
        # The default group spans every rank, so its rank numbers are the global ones.
        src = self.peer if self.peer is not None else int(self.work._source_rank())
        hdr = self.wire._parse_header(self.buf, src)
        self.wire._count_header_in(hdr)
        return hdr, src


class Wire:
    """Sends and receives this rank's messages and counts every byte given to gloo.

    Args:
        rank: This process's rank.
        pool: Receive-buffer pool (a fresh one if None).
    """

    def __init__(self, rank: int, pool: BufferPool | None = None) -> None:
        self.rank = rank
        self.pool = pool or BufferPool()
        self.stats = WireStats()

    def _isend(
        self, t: torch.Tensor, dst: int, tag: int, kind: Kind, protocol: int = 0, msg: int = 0
    ) -> Any:
        """The one place a tensor goes to gloo: count exactly what is passed, then send.

        A header passes ``msg=1`` and its message's protocol bytes (header plus state framing).
        """
        self.stats.count("sent", kind, t.nbytes, protocol, msg)
        try:
            return dist.isend(t, dst, tag=tag)
        except RuntimeError as exc:
            raise _transport(exc, dst) from None

    def isend(
        self,
        dst: int,
        header: Header,
        parts: Sequence[Any] = (),
        channel: Channel = Channel.DATA,
        prepost: int = 0,
    ) -> Outgoing:
        """Start sending ``header`` and its parts (payload, state) to ``dst``.

        Args:
            dst: Destination rank.
            header: The header; its lengths must match ``parts``.
            parts: Up to two bytes-like parts: payload, state.
            channel: The tag family.
            prepost: The capacity of the receiver's pre-posted payload receive (an answer to a
                PULL that named one; a PUSH, or the DONE that completes the last push receive):
                exactly one message goes to it (see the module docstring).
        """
        lengths = header.part_lengths
        if (
            len(parts) > 2
            or any(len(p) != n for p, n in zip(parts, lengths, strict=False))
            or sum(lengths) != sum(len(p) for p in parts)
        ):
            raise ProtocolError(f"parts of {[len(p) for p in parts]} bytes for header {header}")
        h = header.tensor()
        works = [self._isend(h, dst, int(channel), header.kind, header.protocol_bytes, msg=1)]
        keep: list[Any] = [h]
        fits = prepost > 0 and 0 <= header.payload_len <= prepost
        if prepost > 0:
            t = _as_tensor(parts[0]) if fits and header.payload_len else _EMPTY
            works.append(self._isend(t, dst, int(channel) + 2, header.kind))
            keep += [t, parts[0] if parts else None]
        for i, part in enumerate(parts):
            if len(part) and not (i == 0 and fits):
                t = _as_tensor(part)
                works.append(self._isend(t, dst, int(channel) + 1, header.kind))
                keep += [t, part]
        return Outgoing(works, keep, dst)

    def prepost(self, src: int, capacity: int, channel: Channel = Channel.DATA) -> Prepost:
        """Post the receive of ``src``'s next pre-posted payload, of up to ``capacity`` bytes."""
        buf = self.pool.take(capacity)
        try:
            work = dist.irecv(torch.from_numpy(buf), src=src, tag=int(channel) + 2)
        except RuntimeError as exc:
            raise _transport(exc, src) from None
        return Prepost(work, buf, capacity)

    def send(
        self,
        dst: int,
        header: Header,
        parts: Sequence[Any] = (),
        channel: Channel = Channel.DATA,
        prepost: int = 0,
    ) -> None:
        """Send and wait (see :meth:`isend`)."""
        self.isend(dst, header, parts, channel, prepost).wait()

    def _parse_header(self, buf: torch.Tensor, src: int) -> Header:
        """The header in ``buf``; a malformed one is a ProtocolError naming both ranks."""
        try:
            return Header.from_tensor(buf)
        except ProtocolError as exc:
            raise ProtocolError(
                f"rank {self.rank} got a bad header from rank {src}: {exc}"
            ) from None

    def _count_header_in(self, hdr: Header) -> None:
        self.stats.count("received", hdr.kind, HEADER_BYTES, hdr.protocol_bytes, 1)

    def recv_header(
        self, src: int | None = None, channel: Channel = Channel.DATA
    ) -> tuple[Header, int]:
        """Block for the next header from ``src`` (None: from any rank); return it and its sender.

        A receive from any rank cannot see a dead peer (gloo reports broken pairs only to
        operations on them): the session's heartbeat watchdog covers that wait.
        """
        buf = torch.empty(HEADER_WORDS, dtype=torch.int64)
        try:
            sender = dist.recv(buf, src=src, tag=int(channel))
        except RuntimeError as exc:
            raise _transport(exc, src) from None
        hdr = self._parse_header(buf, int(sender))
        self._count_header_in(hdr)
        return hdr, int(sender)

    def irecv_header(self, src: int | None, channel: Channel = Channel.DATA) -> Incoming:
        """Post the receive of ``src``'s next header on ``channel`` (None: from any rank).

        Posting it before the sender sends saves the receive's rendezvous (one round trip);
        a receive from any rank is subject to the same limit as :meth:`recv_header`.
        """
        buf = torch.empty(HEADER_WORDS, dtype=torch.int64)
        try:
            work = dist.irecv(buf, src=src, tag=int(channel))
        except RuntimeError as exc:
            raise _transport(exc, src) from None
        return Incoming(work, buf, src, self, channel)

    def recv_parts(
        self,
        src: int,
        header: Header,
        channel: Channel = Channel.DATA,
        pre: Prepost | None = None,
    ) -> tuple[memoryview | None, memoryview]:
        """Receive the parts announced by ``header``: (payload or None, state).

        ``pre`` is the pre-posted payload receive of this message, if one was posted: it holds
        the payload when that fits its capacity, else an empty message.
        """
        fits = pre is not None and 0 <= header.payload_len <= pre.capacity
        bufs: list[Any] = []
        works = []
        for i, n in enumerate(header.part_lengths):
            if i == 0 and fits:
                assert pre is not None
                # A memoryview slice keeps ``pre.buf`` alive, so the pool gets the buffer back
                # only once the payload is dropped (a NumPy slice would reference the base only).
                bufs.append(memoryview(pre.buf)[:n])
                continue
            arr = self.pool.take(n)
            bufs.append(arr)
            if n:
                try:
                    works.append(dist.irecv(torch.from_numpy(arr), src=src, tag=int(channel) + 1))
                except RuntimeError as exc:
                    raise _transport(exc, src) from None
        try:
            if pre is not None:
                pre.work.wait()
            for w in works:
                w.wait()
        except RuntimeError as exc:
            raise _transport(exc, src) from None
        self.stats.count("received", header.kind, sum(header.part_lengths))
        payload = memoryview(bufs[0]) if header.payload_len >= 0 else None
        return payload, memoryview(bufs[1])
