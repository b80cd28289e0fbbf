"""A shard's incoming messages: header slots posted per known peer, served in arrival order.

A receive from *any* rank costs gloo a rendezvous (three one-way latencies, see :mod:`.wire`),
and gloo has no wait-for-any over named receives. The shard knows its peers (its workers and, on
shard 0, the other shards), so it keeps :data:`DEPTH` header slots posted per peer and one
thread per peer waits on that peer's oldest slot, handing each completed one to the serving
thread in arrival order. Only the serving thread posts receives and parses headers; a waiting
thread only waits (gloo's wait releases the GIL).

Why two slots: a worker sends its next PULL right after its PUSH; with one slot, re-posted only
once the PUSH is served, the PULL would find none posted and pay the rendezvous.

Closing: a slot is re-posted after every message except a DONE, so a peer ends with exactly
:data:`DEPTH` DONE messages, one for each slot still posted for it, and the inbox is drained
(:attr:`Inbox.pending` false) once every peer has sent them: no receive outlives the loop.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from psml_core.engine.torchdist.header import Channel, Header, Kind, PeerLost, ProtocolError

__all__ = ["DEPTH", "Inbox"]

DEPTH = 2
"""Header slots kept posted per peer; a peer's last DEPTH messages are DONEs."""


class _Wire(Protocol):
    """What the inbox needs of :class:`~.wire.Wire` (named here to keep the import graph flat)."""

    rank: int

    def irecv_header(self, src: int, channel: Channel = ...) -> Any: ...


class Inbox:
    """Posted header slots of ``peers`` and the threads that wait on them.

    Args:
        wire: This rank's wire.
        peers: The ranks that send to this one.
        depth: Slots kept posted per peer.
        channel: The tag family.
    """

    def __init__(
        self, wire: _Wire, peers: Sequence[int], depth: int = DEPTH, channel: Channel = Channel.DATA
    ) -> None:
        self.wire, self.depth, self.channel = wire, depth, channel
        self.posted = dict.fromkeys(peers, 0)
        self._arrived: queue.SimpleQueue[tuple[int, Any, RuntimeError | None]] = queue.SimpleQueue()
        self._handoff: dict[int, queue.SimpleQueue[Any]] = {p: queue.SimpleQueue() for p in peers}
        self._closed: set[int] = set()
        self._threads = [
            threading.Thread(target=self._wait, args=(p,), name=f"psml-inbox-{p}", daemon=True)
            for p in peers
        ]
        for t in self._threads:
            t.start()
        for p in peers:
            for _ in range(depth):
                self._post(p)

    @property
    def pending(self) -> bool:
        """Whether any posted slot has not been served yet."""
        return any(self.posted.values())

    def _post(self, peer: int) -> None:
        self.posted[peer] += 1
        self._handoff[peer].put(self.wire.irecv_header(peer, self.channel))

    def _wait(self, peer: int) -> None:
        """A waiting thread: the peer's slots complete in posting order."""
        handoff = self._handoff[peer]
        while (incoming := handoff.get()) is not None:
            try:
                incoming.work.wait()
            except RuntimeError as exc:
                self._arrived.put((peer, incoming, exc))
                return
            self._arrived.put((peer, incoming, None))

    def next(self) -> tuple[Header, int]:
        """Block for the next message of any peer: its header (with inline parts) and sender."""
        peer, incoming, error = self._arrived.get()
        self.posted[peer] -= 1
        if error is not None:
            raise PeerLost(f"gloo: {error}", peer)
        hdr = incoming.header()
        if hdr.kind == Kind.DONE:
            self._closed.add(peer)
        elif peer in self._closed:
            raise ProtocolError(
                f"rank {self.wire.rank} got a {hdr.kind.name} from rank {peer} after its DONE"
            )
        else:
            self._post(peer)
        return hdr, peer

    def close(self) -> None:
        """Stop the waiting threads (every slot served, or the run is failing anyway)."""
        for handoff in self._handoff.values():
            handoff.put(None)
        if not self.pending:
            for t in self._threads:
                t.join()
