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
4     ``state_len``        bytes of the codec-state part (:func:`encode_state`)
5     ``state_codec``      of those, the bytes the codec declares (``Pull.extra_bytes``)
6     ``ratio`` / ``stl``  PULL, PUSH: compression ratio (float64 bits); ANSWER: staleness
7     ``blocked_ns``       ANSWER: how long the pull sat at the shard's sync gate
====  ===================  ================================================================

Byte accounting. Every tensor handed to gloo goes through :meth:`Wire._isend`, which counts
its ``nbytes`` in :class:`WireStats`: that is the ground truth. Of a message's bytes,

* **codec bytes** = ``payload_len`` + ``state_codec`` — exactly what the sim backend counts;
* **protocol bytes** = the 64-byte header + the state part's framing
  (``state_len - state_codec``: its length word and JSON manifest).

Receive buffers of large parts come from a :class:`BufferPool` and are handed to codecs as a
``memoryview`` (zero copies; the codecs read buffers through ``len`` / ``np.frombuffer``).
"""

from __future__ import annotations

import json
import struct
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
    "ProtocolError",
    "Wire",
    "WireStats",
    "decode_state",
    "encode_state",
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
    """Gloo tags: a channel's headers travel on tag ``c``, its parts on tag ``c + 1``."""

    DATA = 1
    RESULT = 3


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
            self.blocked_ns,
        ]
        return torch.tensor(words, dtype=torch.int64)

    @classmethod
    def from_tensor(cls, t: torch.Tensor) -> Header:
        """Parse and validate eight received words."""
        w = [int(v) for v in t.tolist()]
        try:
            kind = Kind(w[0])
        except ValueError:
            raise ProtocolError(f"unknown message kind {w[0]} in header {w}") from None
        if w[3] < -1 or w[4] < 0 or not 0 <= w[5] <= w[4]:
            raise ProtocolError(f"bad part lengths in header {w}")
        ratio, staleness = 0.0, 0
        if kind in (Kind.PULL, Kind.PUSH):
            ratio = float(np.int64(w[6]).view(np.float64))
        else:
            staleness = w[6]
        return cls(kind, w[1], w[2], w[3], w[4], w[5], ratio, staleness, w[7])


@dataclass
class WireStats:
    """What one rank handed to gloo and received, per message kind.

    Attributes:
        sent: kind name -> [messages, bytes passed to send, of which protocol bytes].
        received: kind name -> [messages, bytes received, of which protocol bytes].
    """

    sent: dict[str, list[int]] = field(default_factory=dict)
    received: dict[str, list[int]] = field(default_factory=dict)

    @staticmethod
    def _add(table: dict[str, list[int]], kind: Kind, nbytes: int, protocol: int, msg: int) -> None:
        row = table.setdefault(kind.name, [0, 0, 0])
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

    Fresh 100 MB allocations cost page faults that halve loopback goodput; a buffer handed out
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


def _transport(exc: RuntimeError, peer: int | None) -> PeerLost:
    return PeerLost(f"gloo: {exc}", peer)


@dataclass
class Outgoing:
    """Sends in flight; the tensors stay referenced until they complete."""

    works: list[Any]
    keep: list[Any]
    peer: int

    def done(self) -> bool:
        """Whether every send has completed (raises PeerLost on a broken connection)."""
        try:
            return all(w.is_completed() for w in self.works)
        except RuntimeError as exc:
            raise _transport(exc, self.peer) from None

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
class Incoming:
    """A header receive posted in advance."""

    work: Any
    buf: torch.Tensor
    peer: int
    wire: Wire
    channel: Channel

    def wait(self) -> Header:
        """Block until the header is in; count it."""
        try:
            self.work.wait()
        except RuntimeError as exc:
            raise _transport(exc, self.peer) from None
        hdr = Header.from_tensor(self.buf)
        self.wire._count_header_in(hdr)
        return hdr


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

    def _isend(self, t: torch.Tensor, dst: int, tag: int, kind: Kind, protocol: int) -> Any:
        """The one place a tensor goes to gloo: count exactly what is passed, then send.

        ``protocol`` is the protocol-overhead share of the message, counted with its header.
        """
        is_header = t.dtype == torch.int64
        WireStats._add(self.stats.sent, kind, t.nbytes, protocol, int(is_header))
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
    ) -> Outgoing:
        """Start sending ``header`` and its parts (payload, state) to ``dst``."""
        lengths = header.part_lengths
        if len(parts) > 2 or any(
            len(p) != n for p, n in zip(parts, lengths, strict=False)
        ) or sum(lengths) != sum(len(p) for p in parts):
            raise ProtocolError(f"parts of {[len(p) for p in parts]} bytes for header {header}")
        h = header.tensor()
        works = [self._isend(h, dst, int(channel), header.kind, header.protocol_bytes)]
        keep: list[Any] = [h]
        for part in parts:
            if len(part):
                t = _as_tensor(part)
                works.append(self._isend(t, dst, int(channel) + 1, header.kind, 0))
                keep += [t, part]
        return Outgoing(works, keep, dst)

    def send(
        self,
        dst: int,
        header: Header,
        parts: Sequence[Any] = (),
        channel: Channel = Channel.DATA,
    ) -> None:
        """Send and wait."""
        self.isend(dst, header, parts, channel).wait()

    def _count_header_in(self, hdr: Header) -> None:
        WireStats._add(self.stats.received, hdr.kind, HEADER_BYTES, hdr.protocol_bytes, 1)

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
        hdr = Header.from_tensor(buf)
        self._count_header_in(hdr)
        return hdr, int(sender)

    def irecv_header(self, src: int, channel: Channel = Channel.DATA) -> Incoming:
        """Post the receive of ``src``'s next header on ``channel``."""
        buf = torch.empty(HEADER_WORDS, dtype=torch.int64)
        try:
            work = dist.irecv(buf, src=src, tag=int(channel))
        except RuntimeError as exc:
            raise _transport(exc, src) from None
        return Incoming(work, buf, src, self, channel)

    def recv_parts(
        self, src: int, header: Header, channel: Channel = Channel.DATA
    ) -> tuple[memoryview | None, memoryview]:
        """Receive the parts announced by ``header``: (payload or None, state)."""
        bufs, works = [], []
        for n in header.part_lengths:
            arr = self.pool.take(n)
            bufs.append(arr)
            if n:
                try:
                    works.append(dist.irecv(torch.from_numpy(arr), src=src, tag=int(channel) + 1))
                except RuntimeError as exc:
                    raise _transport(exc, src) from None
        try:
            for w in works:
                w.wait()
        except RuntimeError as exc:
            raise _transport(exc, src) from None
        row = self.stats.received.setdefault(header.kind.name, [0, 0, 0])
        row[1] += sum(header.part_lengths)
        payload = memoryview(bufs[0]) if header.payload_len >= 0 else None
        return payload, memoryview(bufs[1])


# ----------------------------------------------------------------------------- codec state

_LEN = struct.Struct("<I")


def encode_state(extra: dict[str, Any]) -> bytes:
    """Serialize a pull's published codec state (``Pull.extra``) compactly and exactly.

    Layout: a uint32 manifest length, a JSON manifest (scalars, and for each array its key,
    dtype, shape, byte count), then the arrays' bytes in manifest order. Boolean arrays (block
    masks) are bit-packed, so a mask costs ``ceil(n / 8)`` bytes — what codecs declare as
    ``extra_bytes``. The length word and manifest are framing (protocol bytes).

    Raises:
        TypeError: for a value that is neither an array nor JSON-serializable, naming its key.
    """
    if not extra:
        return b""
    scalars: dict[str, Any] = {}
    arrays: list[list[Any]] = []
    data: list[bytes] = []
    for key in sorted(extra):
        value = extra[key]
        if isinstance(value, np.ndarray):
            a = np.ascontiguousarray(value)
            if a.dtype == np.bool_:
                raw = np.packbits(a.ravel(), bitorder="little").tobytes()
            else:
                a = a.astype(a.dtype.newbyteorder("<"), copy=False)
                raw = a.tobytes()
            arrays.append([key, a.dtype.str, list(a.shape), len(raw)])
            data.append(raw)
            continue
        if isinstance(value, np.generic):
            value = value.item()
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise TypeError(
                f"codec state {key!r} ({type(value).__name__}) cannot be sent: "
                "publish arrays or JSON-serializable values"
            ) from None
        scalars[key] = value
    manifest = json.dumps({"a": arrays, "s": scalars}, separators=(",", ":")).encode()
    return _LEN.pack(len(manifest)) + manifest + b"".join(data)


def decode_state(buf: bytes | memoryview) -> dict[str, Any]:
    """Inverse of :func:`encode_state` (JSON lists stay lists)."""
    if len(buf) == 0:
        return {}
    (mlen,) = _LEN.unpack_from(buf, 0)
    manifest = json.loads(bytes(buf[_LEN.size : _LEN.size + mlen]))
    out: dict[str, Any] = dict(manifest["s"])
    pos = _LEN.size + mlen
    for key, dtype, shape, nbytes in manifest["a"]:
        raw = np.frombuffer(buf, dtype=np.uint8, count=nbytes, offset=pos)
        pos += nbytes
        dt = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        if dt == np.bool_:
            arr = np.unpackbits(raw, count=count, bitorder="little").astype(np.bool_)
        else:
            arr = raw.view(dt).astype(dt.newbyteorder("="))
        out[key] = arr.reshape(shape)
    if pos != len(buf):
        raise ProtocolError(f"codec state of {len(buf)} bytes, manifest accounts for {pos}")
    return out
