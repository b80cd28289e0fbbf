"""The dist wire's header slots (issue 28): inline parts, pre-posted bodies, the shard's inbox.

Gloo is replaced by an in-process fake that keeps gloo's matching rules: messages between a pair
on one tag complete that pair's receives on the tag in posting order, and a receive buffer may
be larger than the message (never smaller).
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from psml_core.engine.torchdist import wire as wire_mod
from psml_core.engine.torchdist.header import (
    HEADER_BYTES,
    INLINE_BYTES,
    SLOT_BYTES,
    Channel,
    Header,
    Kind,
)
from psml_core.engine.torchdist.inbox import DEPTH, Inbox
from psml_core.engine.torchdist.protocol import grown
from psml_core.engine.torchdist.wire import ProtocolError, Wire


class FakeGloo:
    """Point-to-point messages between two in-process wires, matched per tag in order."""

    def __init__(self) -> None:
        self.queues: dict[int, deque[bytes]] = defaultdict(deque)
        self.sent: list[tuple[int, int]] = []  # (tag, bytes) per message

    def isend(self, t: torch.Tensor, dst: int, tag: int = 0) -> Any:
        data = t.numpy().tobytes()
        self.queues[tag].append(data)
        self.sent.append((tag, len(data)))
        return _Done()

    def irecv(self, buf: torch.Tensor, src: int, tag: int = 0) -> Any:
        gloo = self

        class Work:
            def wait(self) -> None:
                data = gloo.queues[tag].popleft()
                assert len(data) <= buf.numel(), "a message longer than its receive"
                if data:
                    buf[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)

        return Work()


class _Done:
    def wait(self) -> None:
        pass

    def is_completed(self) -> bool:
        return True


# --------------------------------------------------------------------------- inline rule


def test_small_parts_travel_inside_the_header_message() -> None:
    assert Header(Kind.PUSH, payload_len=19240, state_len=12).inline == (True, True)
    assert Header(Kind.PUSH, payload_len=INLINE_BYTES).inline == (True, True)
    assert Header(Kind.PUSH, payload_len=INLINE_BYTES + 1).inline == (False, True)
    # The state part goes first; the payload takes the room it leaves.
    h = Header(Kind.ANSWER, payload_len=INLINE_BYTES - 99, state_len=100)
    assert h.inline == (False, True) and h.inline_bytes == 100
    big_state = Header(Kind.ANSWER, payload_len=10, state_len=INLINE_BYTES + 1)
    assert big_state.inline == (True, False) and big_state.inline_bytes == 10
    assert Header(Kind.PULL).inline_bytes == 0  # no payload (-1), no state
    assert SLOT_BYTES == HEADER_BYTES + INLINE_BYTES


def test_the_pre_posted_capacity_grows_only_with_payloads_beyond_the_slot() -> None:
    assert grown(0, Header(Kind.PUSH, payload_len=19240)) == 0  # inline: nothing pre-posted
    assert grown(0, Header(Kind.PUSH, payload_len=INLINE_BYTES + 5)) == INLINE_BYTES + 5
    assert grown(10**6, Header(Kind.PUSH, payload_len=INLINE_BYTES + 5)) == 10**6


# --------------------------------------------------------------------------- wire round trip

SIZES = [0, 1, 100, INLINE_BYTES - 12, INLINE_BYTES, INLINE_BYTES + 1, 100_000]


@settings(max_examples=60, deadline=None)
@given(
    payload_len=st.sampled_from([-1, *SIZES]),
    state_len=st.sampled_from([0, 12, 300, INLINE_BYTES, INLINE_BYTES + 1]),
    capacity=st.sampled_from([0, 50_000, 200_000]),
    seed=st.integers(0, 2**16),
)
def test_every_part_arrives_exactly_once_through_slot_prepost_or_body(
    payload_len: int, state_len: int, capacity: int, seed: int
) -> None:
    gloo = FakeGloo()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(wire_mod.dist, "isend", gloo.isend)
        mp.setattr(wire_mod.dist, "irecv", gloo.irecv)
        _round_trip(gloo, payload_len, state_len, capacity, seed)


def _round_trip(gloo: FakeGloo, payload_len: int, state_len: int, capacity: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    payload = rng.integers(0, 256, max(payload_len, 0), dtype=np.uint8).tobytes()
    state = rng.integers(0, 256, state_len, dtype=np.uint8).tobytes()
    hdr = Header(Kind.ANSWER, 1, 7, payload_len, state_len, state_len // 2, staleness=3)
    parts = [payload, state] if state_len else ([payload] if payload_len >= 0 else [])
    sender, receiver = Wire(0), Wire(1)
    pre = receiver.prepost(0, capacity) if capacity else None  # posted first, as the worker does
    sender.send(1, hdr, parts, prepost=capacity)
    got = receiver.recv_header(0)
    assert got == hdr
    pl, stt = receiver.recv_parts(0, got, pre=pre)
    assert (bytes(pl) if pl is not None else None) == (payload if payload_len >= 0 else None)
    assert bytes(stt) == state
    # Exactly one message on the pre-posted tag when one was posted; bodies only for what is
    # neither inline nor pre-posted; the bytes are the header, the parts and nothing else.
    tags = [tag for tag, _ in gloo.sent]
    assert tags.count(Channel.DATA + 2) == (1 if capacity else 0)
    total = HEADER_BYTES + max(payload_len, 0) + state_len
    assert sum(n for _, n in gloo.sent) == total == sender.stats.bytes_sent()
    assert receiver.stats.received["ANSWER"][:2] == [1, total]
    assert sender.stats.protocol_sent() == hdr.protocol_bytes
    assert not any(gloo.queues.values())  # nothing left unreceived


def test_a_header_without_its_inline_parts_is_refused() -> None:
    with pytest.raises(ProtocolError, match="without its inline parts"):
        Wire(1).recv_parts(0, Header(Kind.PUSH, payload_len=8))


# --------------------------------------------------------------------------- inbox


class ScriptPeers:
    """A wire whose posted slots a test completes by hand: ``deliver(peer, header)``."""

    def __init__(self, rank: int = 0) -> None:
        self.rank = rank
        self.slots: dict[int, deque[Any]] = defaultdict(deque)
        self.posted: dict[int, int] = defaultdict(int)

    def irecv_header(self, src: int, channel: Channel = Channel.DATA) -> Any:
        done = threading.Event()
        box: dict[str, Header] = {}

        class Slot:
            class work:  # noqa: N801 - the Incoming interface: .work.wait()
                @staticmethod
                def wait() -> None:
                    assert done.wait(10), "a slot waited on was never filled"

            @staticmethod
            def header() -> Header:
                return box["hdr"]

        self.slots[src].append((done, box))
        self.posted[src] += 1
        return Slot()

    def deliver(self, peer: int, hdr: Header) -> None:
        done, box = self.slots[peer].popleft()  # a peer's messages fill its slots in order
        box["hdr"] = hdr
        done.set()


def test_the_inbox_serves_peers_in_arrival_order_and_keeps_two_slots_posted() -> None:
    wire = ScriptPeers()
    inbox = Inbox(wire, [2, 3])
    assert wire.posted == {2: DEPTH, 3: DEPTH}
    wire.deliver(3, Header(Kind.PULL, 1, 0))
    assert inbox.next() == (Header(Kind.PULL, 1, 0), 3)
    wire.deliver(2, Header(Kind.PULL, 0, 0))
    wire.deliver(3, Header(Kind.PUSH, 1, 0))
    got = [inbox.next(), inbox.next()]
    assert sorted(src for _, src in got) == [2, 3]
    assert wire.posted == {2: DEPTH + 1, 3: DEPTH + 2}  # each served message re-posted one
    for peer in (2, 3):
        for _ in range(DEPTH):
            wire.deliver(peer, Header(Kind.DONE, peer - 2))
    for _ in range(2 * DEPTH):
        assert inbox.pending
        assert inbox.next()[0].kind == Kind.DONE
    assert not inbox.pending  # every posted slot was served: nothing outlives the loop
    inbox.close()
    assert all(not t.is_alive() for t in inbox._threads)


def test_a_message_after_a_done_is_a_protocol_error() -> None:
    wire = ScriptPeers(rank=1)
    inbox = Inbox(wire, [4])
    wire.deliver(4, Header(Kind.DONE, 2))
    inbox.next()
    wire.deliver(4, Header(Kind.PUSH, 2, 0))
    with pytest.raises(ProtocolError, match="rank 1 got a PUSH from rank 4 after its DONE"):
        inbox.next()
    inbox.close()
