"""The dist wire layer: named receives posted ahead, one latency per message, exact bytes.

Gloo starts a transfer only once its receive is posted: a receive posted at the receiver sends
a *recv-ready* notice to the sender, and the data follows as soon as the sender has both. A
receive posted late, or posted from *any* rank (the sender is unknown, so no notice can go out
before a *send-ready* comes in), costs a rendezvous: send-ready, recv-ready, data, three
one-way latencies instead of one (measured across a 2 ms link: 8.0 ms against 3.7 ms for a
19,240-byte message). So every receive on the hot paths is posted, from a named rank, before
its sender can send:

* **headers**: a message's header (:mod:`.header`) and the parts that fit travel as one
  *header message* into a fixed slot of :data:`~.header.SLOT_BYTES`. A shard keeps two slots
  posted per peer (:mod:`.inbox`), a worker posts the slot of each answer before it sends the
  request;
* **large payloads** (beyond the slot) go to a receive *pre-posted* on tag ``c + 2``, sized like
  the largest such payload of that kind seen so far on that pair (both ends track it):

  - the pull answer: the worker posts it before sending the request and names its capacity in
    the request (``prepost``);
  - the push: the shard posts the receive of a worker's next push as soon as it has its current
    one (none before the first push beyond the slot); the worker's first DONE completes the last
    one;
  - a snapshot (shard -> shard 0): its size is fixed, so shard 0 keeps one posted per shard,
    completed at the end by that shard's first DONE.

  With a pre-posted receive the sender sends exactly one message on ``c + 2``: the payload if
  it fits, else an empty message and the payload as a body message on ``c + 1``;
* **body messages** (``c + 1``): parts that are neither inline nor pre-posted. The receiver
  posts them once the header is in, which costs a rendezvous: only a payload larger than every
  earlier one of its kind, or a state part beyond the slot, takes this path.

Both ends know from the header alone which parts follow and their sizes, and every receive
names its peer, so the body messages of DATA can take another transport between the pair
(:mod:`.bodies`, ``PSML_DIST_BODIES``): on a pair-ordered link (NCCL between GPUs, or
``gloo-ordered`` checking NCCL's rules on a CPU) nothing is pre-posted, since NCCL needs a
receive exactly as large as its message, and every body is received once its header is in, in
the sender's order. Headers and the RESULT channel stay on gloo.

Byte accounting. Every tensor handed to a transport goes through :meth:`Wire._isend` (gloo) or
:meth:`Wire._isend_body` (a body on the pair link), which count its ``nbytes`` in
:class:`WireStats`: that is the ground truth. Of a message's bytes,

* **codec bytes** = ``payload_len`` + ``state_codec`` — exactly what the sim backend counts;
* **protocol bytes** = the 64-byte header + the state part's framing
  (``state_len - state_codec``: its length word and JSON manifest).

Inline parts count as the same codec or protocol bytes as they would as body messages; a header
slot's unused room is never sent. Receive buffers of large parts come from a
:class:`~.buffers.BufferPool` and are handed to codecs as a ``memoryview`` (zero copies).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from psml_core.engine.torchdist.bodies import PairLink
from psml_core.engine.torchdist.buffers import EMPTY, BufferPool, as_tensor
from psml_core.engine.torchdist.header import (
    DATA_KINDS,
    HEADER_BYTES,
    SLOT_BYTES,
    Channel,
    Header,
    Kind,
    PeerLost,
    ProtocolError,
)

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


@dataclass
class WireStats:
    """What one rank handed to its transports and received, per message kind.

    Attributes:
        sent: kind name -> [messages, bytes passed to send, of which protocol bytes].
        received: kind name -> [messages, bytes received, of which protocol bytes].
        paired: [body messages, their bytes] sent on a pair-ordered link (:mod:`.bodies`),
            counted in ``sent`` too.
    """

    sent: dict[str, list[int]] = field(default_factory=dict)
    received: dict[str, list[int]] = field(default_factory=dict)
    paired: list[int] = field(default_factory=lambda: [0, 0])

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


def _transport(exc: RuntimeError, peer: int | None, via: str = "gloo") -> RuntimeError:
    """A transport's error as PeerLost naming the transport; a ProtocolError stays what it is.

    (The checking link raises ProtocolError from inside a wait, where it must not pass for a
    broken connection.)
    """
    if isinstance(exc, ProtocolError):
        return exc
    return PeerLost(f"{via}: {exc}", peer)


@dataclass
class Outgoing:
    """Sends in flight; the tensors stay referenced until they complete.

    ``via`` names the transports, for errors (``gloo``, or ``gloo and nccl`` with bodies on a
    pair link).
    """

    works: list[Any]
    keep: list[Any]
    peer: int
    via: str = "gloo"

    def reap(self) -> bool:
        """If every send has completed, release them and return True (PeerLost if one failed)."""
        try:
            if not all(w.is_completed() for w in self.works):
                return False
        except RuntimeError as exc:
            raise _transport(exc, self.peer, self.via) from None
        self.wait()  # surfaces a failed send
        return True

    def wait(self) -> None:
        """Block until every send has completed."""
        try:
            for w in self.works:
                w.wait()
        except RuntimeError as exc:
            raise _transport(exc, self.peer, self.via) from None
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
    """A header slot posted in advance for one named peer."""

    work: Any
    buf: np.ndarray
    peer: int
    wire: Wire
    channel: Channel

    def wait(self) -> Header:
        """Block until the header message is in; count it; return its header."""
        try:
            self.work.wait()
        except RuntimeError as exc:
            raise _transport(exc, self.peer) from None
        return self.header()

    def header(self) -> Header:
        """The header of the completed message (with its inline parts), counted as received."""
        return self.wire._take_header(self.buf, self.peer)


class Wire:
    """Sends and receives this rank's messages and counts every byte given to gloo.

    Args:
        rank: This process's rank.
        pool: Receive-buffer pool (a fresh one if None).
        pairs: The pair-ordered link of DATA bodies (:mod:`.bodies`); None: tagged gloo.
    """

    def __init__(
        self, rank: int, pool: BufferPool | None = None, pairs: PairLink | None = None
    ) -> None:
        self.rank = rank
        self.pool = pool or BufferPool()
        self.stats = WireStats()
        self.pairs = pairs

    @property
    def preposts(self) -> bool:
        """Whether DATA payload receives are pre-posted with a capacity (tagged gloo only).

        On a pair-ordered link (:mod:`.bodies`) a receive must be exactly its message's size,
        so both ends keep every capacity at 0 and every body is received once its header is in.
        """
        return self.pairs is None

    @property
    def bodies(self) -> str:
        """Where DATA bodies go: ``gloo`` (tagged) or the pair link's name."""
        return "gloo" if self.pairs is None else self.pairs.name

    def via(self, channel: Channel) -> str:
        """The transports a message on ``channel`` uses, as errors name them."""
        if self.pairs is None or channel != Channel.DATA or self.bodies.startswith("gloo"):
            return "gloo"
        return f"gloo and {self.bodies}"

    def _isend(
        self, t: torch.Tensor, dst: int, tag: int, kind: Kind, protocol: int = 0, msg: int = 0
    ) -> Any:
        """The one place a tensor goes to gloo: count exactly what is passed, then send.

        A header message passes ``msg=1`` and its message's protocol bytes (header plus state
        framing).
        """
        self.stats.count("sent", kind, t.nbytes, protocol, msg)
        try:
            return dist.isend(t, dst, tag=tag)
        except RuntimeError as exc:
            raise _transport(exc, dst) from None

    def _irecv(self, buf: np.ndarray, src: int, tag: int) -> Any:
        try:
            return dist.irecv(torch.from_numpy(buf), src=src, tag=tag)
        except RuntimeError as exc:
            raise _transport(exc, src) from None

    def _isend_body(self, t: torch.Tensor, dst: int, channel: Channel, kind: Kind) -> Any:
        """A body message: on the pair link for DATA when there is one, else gloo's ``c + 1``."""
        if self.pairs is None or channel != Channel.DATA:
            return self._isend(t, dst, int(channel) + 1, kind)
        self.stats.count("sent", kind, t.nbytes)
        self.stats.paired[0] += 1
        self.stats.paired[1] += t.nbytes
        try:
            return self.pairs.isend(t, dst)
        except RuntimeError as exc:
            raise _transport(exc, dst, self.bodies) from None

    def _irecv_body(self, buf: np.ndarray, src: int, channel: Channel) -> Any:
        if self.pairs is None or channel != Channel.DATA:
            return self._irecv(buf, src, int(channel) + 1)
        try:
            return self.pairs.irecv(buf, src)
        except RuntimeError as exc:
            raise _transport(exc, src, self.bodies) from None

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
                PULL that named one; a PUSH or SNAPSHOT, or the DONE that completes the last
                one): exactly one message goes to it (see the module docstring).
        """
        lengths = header.part_lengths
        if (
            len(parts) > 2
            or any(len(p) != n for p, n in zip(parts, lengths, strict=False))
            or sum(lengths) != sum(len(p) for p in parts)
        ):
            raise ProtocolError(f"parts of {[len(p) for p in parts]} bytes for header {header}")
        if prepost > 0 and not self.preposts and channel == Channel.DATA:
            raise ProtocolError(f"a pre-posted {header.kind.name} on the {self.bodies} link")
        inline = header.inline
        body = [(i, part) for i, part in enumerate(parts) if len(part) and not inline[i]]
        msg = np.empty(HEADER_BYTES + header.inline_bytes, dtype=np.uint8)
        msg[:HEADER_BYTES] = np.array(header.words(), dtype="<i8").view(np.uint8)
        at = HEADER_BYTES
        for i, part in enumerate(parts):
            if len(part) and inline[i]:
                msg[at : at + len(part)] = np.frombuffer(part, dtype=np.uint8)
                at += len(part)
        h = torch.from_numpy(msg)
        works = [self._isend(h, dst, int(channel), header.kind, header.protocol_bytes, msg=1)]
        keep: list[Any] = [h]
        fits = bool(body) and body[0][0] == 0 and header.payload_len <= prepost
        if prepost > 0:
            t = as_tensor(body[0][1]) if fits else EMPTY
            works.append(self._isend(t, dst, int(channel) + 2, header.kind))
            keep += [t, body[0][1] if fits else None]
        for i, part in body:
            if not (i == 0 and fits):
                t = as_tensor(part)
                works.append(self._isend_body(t, dst, channel, header.kind))
                keep += [t, part]
        return Outgoing(works, keep, dst, self.via(channel))

    def prepost(self, src: int, capacity: int, channel: Channel = Channel.DATA) -> Prepost:
        """Post the receive of ``src``'s next pre-posted payload, of up to ``capacity`` bytes."""
        if not self.preposts and channel == Channel.DATA:
            raise ProtocolError(f"rank {self.rank}: a pre-posted receive on the {self.bodies} link")
        buf = self.pool.take(capacity)
        return Prepost(self._irecv(buf, src, int(channel) + 2), buf, capacity)

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

    def _take_header(self, buf: np.ndarray, src: int) -> Header:
        """The header in a completed slot, with its inline bytes; counted as received.

        A malformed header is a ProtocolError naming both ranks (and is not counted).
        """
        words = np.frombuffer(buf, dtype="<i8", count=8).tolist()
        try:
            hdr = Header.from_words(words)
        except ProtocolError as exc:
            raise ProtocolError(
                f"rank {self.rank} got a bad header from rank {src}: {exc}"
            ) from None
        n = hdr.inline_bytes
        self.stats.count("received", hdr.kind, HEADER_BYTES + n, hdr.protocol_bytes, 1)
        view = memoryview(buf)[HEADER_BYTES : HEADER_BYTES + n]
        return dataclasses.replace(hdr, received=view)

    def irecv_header(self, src: int, channel: Channel = Channel.DATA) -> Incoming:
        """Post a header slot for ``src``'s next message on ``channel``.

        Posting it before the sender sends saves the receive's rendezvous (two one-way
        latencies); a rank's messages on one channel fill its posted slots in order.
        """
        buf = np.empty(SLOT_BYTES, dtype=np.uint8)
        return Incoming(self._irecv(buf, src, int(channel)), buf, src, self, channel)

    def recv_header(self, src: int, channel: Channel = Channel.DATA) -> Header:
        """Block for the next header message from ``src`` (posted now: it pays a rendezvous)."""
        return self.irecv_header(src, channel).wait()

    def recv_parts(
        self,
        src: int,
        header: Header,
        channel: Channel = Channel.DATA,
        pre: Prepost | None = None,
    ) -> tuple[memoryview | None, memoryview]:
        """The parts announced by ``header``: (payload or None, state).

        Inline parts come from the header message itself; ``pre`` is the pre-posted payload
        receive of this message, if one was posted: it holds the payload when that is not
        inline and fits its capacity, else an empty message. The rest arrive as body messages.
        """
        inline = header.inline
        lengths = header.part_lengths
        fits = pre is not None and not inline[0] and header.payload_len <= pre.capacity
        received = header.received if header.received is not None else memoryview(b"")
        if len(received) < header.inline_bytes:
            raise ProtocolError(f"rank {self.rank}: {header} came without its inline parts")
        bufs: list[Any] = []
        works = []
        at = 0
        for i, n in enumerate(lengths):
            if inline[i]:
                bufs.append(received[at : at + n])
                at += n
            elif i == 0 and fits:
                assert pre is not None
                # A memoryview slice keeps ``pre.buf`` alive, so the pool gets the buffer back
                # only once the payload is dropped (a NumPy slice would reference the base only).
                bufs.append(memoryview(pre.buf)[:n])
            else:
                arr = self.pool.take(n)
                bufs.append(memoryview(arr))
                if n:
                    works.append(self._irecv_body(arr, src, channel))
        try:
            if pre is not None:
                pre.work.wait()
            for w in works:
                w.wait()
        except RuntimeError as exc:
            raise _transport(exc, src, self.via(channel)) from None
        self.stats.count("received", header.kind, sum(lengths) - header.inline_bytes)
        payload = bufs[0] if header.payload_len >= 0 else None
        return payload, bufs[1]
