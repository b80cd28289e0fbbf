"""Malformed dist messages (issue 7): a clear ProtocolError naming the sender, never garbage.

In-process: the wire's header parsing runs on received words injected in place of gloo's
receives, and the shard's and the worker's loops run against a scripted wire (and inbox) that
delivers headers and parts as a peer would have sent them — here, broken ones.

What cannot be tested (or caught) here is gloo's own framing: a part *longer* than the receive
the header sized makes gloo abort the receiving process (the other ranks' watchdog then names
it as lost), and a *shorter* one completes the receive without saying so. The sender side is
where a part that does not match its header is stopped (:meth:`Wire.isend`); the receiver hands
codecs exactly the header's byte counts, and a count no codec can have produced is rejected.
"""

from __future__ import annotations

import dataclasses
import struct
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from psml_core.config import BlockSpec, RunSpec
from psml_core.data.prepare import prepare_dataset
from psml_core.data.store import load_prepared
from psml_core.engine import staged_job
from psml_core.engine.job import Job
from psml_core.engine.torchdist import DistOptions, Faults, Layout
from psml_core.engine.torchdist import wire as wire_mod
from psml_core.engine.torchdist.shard_loop import ShardLoop
from psml_core.engine.torchdist.state import encode_state
from psml_core.engine.torchdist.transport import run_worker
from psml_core.engine.torchdist.wire import Header, Kind, ProtocolError, Wire

P, S = 2, 2
LAYOUT = Layout(shards=S, workers=P)  # ranks 0, 1: shards; 2, 3: workers 0, 1


# --------------------------------------------------------------------------- headers


@pytest.mark.parametrize(
    ("words", "fragment"),
    [
        ([0, 0, 0, -1, 0, 0, 0, 0], "unknown message kind 0"),
        ([7, 0, 0, -1, 0, 0, 0, 0], "unknown message kind 7"),
        ([-3, 0, 0, -1, 0, 0, 0, 0], "unknown message kind -3"),
        ([3, 0, 0, -2, 0, 0, 0, 0], "bad part lengths"),  # payload_len below "none" (-1)
        ([2, 0, 0, 16, -1, 0, 0, 0], "bad part lengths"),  # negative state part
        ([2, 0, 0, 16, 8, 9, 0, 0], "bad part lengths"),  # codec bytes beyond the state part
        ([2, 0, 0, 16, 8, -1, 0, 0], "bad part lengths"),
        ([3, 0, 0, 16, 0, 0, 0], "a header of 7 words, not 8"),  # truncated header
        ([3, 0, 0, 16, 0, 0, 0, 0, 0], "a header of 9 words, not 8"),
    ],
)
def test_malformed_header_is_a_protocol_error(words: list[int], fragment: str) -> None:
    with pytest.raises(ProtocolError) as info:
        Header.from_tensor(torch.tensor(words, dtype=torch.int64))
    assert fragment in str(info.value) and str(words) in str(info.value)


class SlotWork:
    """A completed header-slot receive holding ``words`` (gloo replaced)."""

    def __init__(self, buf: torch.Tensor, words: list[int]) -> None:
        self.buf, self.words = buf, words

    def wait(self) -> None:
        raw = np.array(self.words, dtype="<i8").view(np.uint8)
        self.buf[: raw.size] = torch.from_numpy(raw)


def test_bad_header_names_the_sender_and_is_not_counted(monkeypatch) -> None:
    """A bad header in a posted slot names that rank (and this one), and is not counted."""
    words = [42, 0, 0, -1, 0, 0, 0, 0]
    monkeypatch.setattr(wire_mod.dist, "irecv", lambda buf, src, tag: SlotWork(buf, words))
    wire = Wire(rank=1)
    with pytest.raises(ProtocolError, match=r"rank 1 got a bad header from rank 3: unknown .* 42"):
        wire.recv_header(3)
    assert wire.stats.received == {}


def test_posted_header_receive_names_the_peer(monkeypatch) -> None:
    """The same for a header slot posted in advance (the worker's answers)."""
    words = [2, 0, 0, -5, 0, 0, 0, 0]
    monkeypatch.setattr(wire_mod.dist, "irecv", lambda buf, src, tag: SlotWork(buf, words))
    incoming = Wire(rank=2).irecv_header(1)
    with pytest.raises(ProtocolError, match=r"rank 2 got a bad header from rank 1: bad part"):
        incoming.wait()


@pytest.mark.parametrize(
    ("header", "parts"),
    [
        (Header(Kind.PUSH, payload_len=16), [b"x" * 15]),  # payload shorter than announced
        (Header(Kind.PUSH, payload_len=16), [b"x" * 17]),  # longer
        (Header(Kind.ANSWER, payload_len=4, state_len=8), [b"x" * 4, b"s" * 7]),
        (Header(Kind.ANSWER, payload_len=4, state_len=8), [b"x" * 4]),  # state part missing
        (Header(Kind.PULL), [b"unexpected"]),  # a part where the header announces none
        (Header(Kind.PUSH, payload_len=1), [b"a", b"", b"c"]),  # three parts
    ],
)
def test_parts_that_do_not_match_their_header_are_never_sent(monkeypatch, header, parts) -> None:
    sent: list[Any] = []
    monkeypatch.setattr(wire_mod.dist, "isend", lambda *a, **k: sent.append(a))
    wire = Wire(rank=2)
    with pytest.raises(ProtocolError, match="parts of .* bytes for header"):
        wire.isend(0, header, parts)
    assert sent == [] and wire.stats.sent == {}


# --------------------------------------------------------------------------- roles


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory, smoke) -> Path:
    """The smoke digits data set, prepared once for this module."""
    out = tmp_path_factory.mktemp("digits") / "digits"
    prepare_dataset(smoke.datasets["digits"], out)
    return out


def make_job(smoke, digits: Path, codec: str = "none", sync: str = "bsp", **params: Any) -> Job:
    """A P = 2, S = 2 dist job of the smoke digits MLP with the given push codec."""
    run = smoke.run("digits_mlp", "dense_bsp", "dc_10g", smoke.seeds[0])
    spec: RunSpec = dataclasses.replace(
        run,
        backend="dist",
        workers=P,
        shards=S,
        workload=dataclasses.replace(run.workload, iterations=4),
        method=dataclasses.replace(
            run.method, codec=BlockSpec(codec, params), sync=BlockSpec(sync), pull="params"
        ),
    )
    return staged_job(spec, load_prepared(digits))


class ScriptEnd(Exception):
    """The loop asked for a message the script does not have."""


class ScriptedWire:
    """A wire whose receives return what a script says a peer sent; sends are recorded.

    Args:
        rank: This rank.
        messages: (header, sender, (payload, state)) in arrival order.
    """

    preposts = True

    def __init__(self, rank: int, messages: list[tuple[Header, int, tuple[Any, bytes]]]):
        self.rank = rank
        self.messages = deque(messages)
        self.parts: dict[int, deque[tuple[Any, bytes]]] = {}
        self.sent: list[tuple[int, Header]] = []

    def _next(self) -> tuple[Header, int, tuple[Any, bytes]]:
        if not self.messages:
            raise ScriptEnd
        return self.messages.popleft()

    def next(self) -> tuple[Header, int]:
        """The shard's inbox: the next scripted message of any peer."""
        hdr, src, parts = self._next()
        self.parts.setdefault(src, deque()).append(parts)
        # What the real wire does with a received header: parse and check its eight words.
        return Header.from_tensor(hdr.tensor()), src

    @property
    def pending(self) -> bool:
        return bool(self.messages)

    def inbox(self, wire: Any, peers: list[int]) -> ScriptedWire:
        assert wire is self
        return self

    def close(self) -> None:
        pass

    def irecv_header(self, src: int) -> Any:
        hdr, got, parts = self._next()
        assert got == src
        self.parts.setdefault(src, deque()).append(parts)
        return type("Incoming", (), {"wait": lambda _self: Header.from_tensor(hdr.tensor())})()

    def recv_parts(self, src: int, header: Header, pre: Any = None) -> tuple[Any, memoryview]:
        payload, state = self.parts[src].popleft()
        assert len(state) == header.state_len
        if header.payload_len < 0:
            return None, memoryview(state)
        assert len(payload) == header.payload_len  # the real wire receives exactly this many
        return memoryview(bytes(payload)), memoryview(state)

    def isend(self, dst: int, header: Header, parts: Any = (), prepost: int = 0) -> Any:
        self.sent.append((dst, header))
        return type("Outgoing", (), {"reap": lambda _s: True, "wait": lambda _s: None})()

    def send(self, dst: int, header: Header, parts: Any = (), prepost: int = 0) -> None:
        self.sent.append((dst, header))

    def prepost(self, src: int, capacity: int) -> None:
        return None


def push_from(job: Job, w: int, s: int, t: int = 0, cut: int = 0, extra: bytes = b"") -> tuple:
    """Worker ``w``'s push of iteration ``t`` to shard ``s``: a real encoding, then damaged.

    Args:
        cut: Bytes removed from the end of the payload.
        extra: Bytes appended to it.
    """
    n = len(job.shards[s].keys)
    x = np.random.default_rng(w).standard_normal(n).astype(np.float32)
    codec = job.shards[s].codec_up
    buf = bytes(codec.encode(x, job.ctx(t, 1.0)).buffer)
    buf = buf[: len(buf) - cut] + extra
    hdr = Header(Kind.PUSH, w, t, payload_len=len(buf), ratio=1.0)
    return hdr, LAYOUT.worker_rank(w), (buf, b"")


def run_shard(job: Job, s: int, messages: list[tuple]) -> ShardLoop:
    wire = ScriptedWire(s, messages)
    loop = ShardLoop(job, s, wire, LAYOUT, Faults(), inbox=wire.inbox)  # type: ignore[arg-type]
    loop.run()
    return loop


def _corrupt_topk(job: Job, w: int, s: int) -> tuple:
    """A top-k COO payload whose indices run backwards."""
    hdr, src, (buf, state) = push_from(job, w, s)
    n_entries = len(buf) // 8
    idx = np.frombuffer(buf[: 4 * n_entries], "<u4")[::-1].copy()
    return hdr, src, (idx.tobytes() + buf[4 * n_entries :], state)


@pytest.mark.parametrize(
    ("codec", "params", "damage"),
    [
        ("none", {}, {"cut": 3}),  # truncated dense payload
        ("none", {}, {"extra": b"\0\0\0\0"}),  # one value too many
        ("fp16", {}, {"cut": 1}),
        ("topk", {"ratio": 0.01}, {"cut": 5}),
        ("topk", {"ratio": 0.01}, "corrupt"),
        ("qsgd", {}, {"cut": 2}),
    ],
)
@pytest.mark.parametrize("bad_worker", [0, 1])
def test_a_push_that_does_not_decode_names_its_sender(
    smoke, digits, codec, params, damage, bad_worker
) -> None:
    """Under BSP the round decodes once both pushes are in; the error still names the bad one."""
    job = make_job(smoke, digits, codec, **params)
    before = job.shards[0].values.copy()
    pushes = []
    for w in range(P):
        if w != bad_worker:
            pushes.append(push_from(job, w, 0))
        elif damage == "corrupt":
            pushes.append(_corrupt_topk(job, w, 0))
        else:
            pushes.append(push_from(job, w, 0, **damage))
    with pytest.raises(ProtocolError) as info:
        run_shard(job, 0, pushes)
    msg = str(info.value)
    who = f"push 0 of worker {bad_worker} from rank {2 + bad_worker} (worker {bad_worker})"
    assert msg.startswith(f"shard 0: {who} is no valid {codec!r} payload"), msg
    np.testing.assert_array_equal(job.shards[0].values, before)  # nothing applied


def test_asp_push_that_does_not_decode_is_refused_at_once(smoke, digits) -> None:
    job = make_job(smoke, digits, "none", sync="asp")
    with pytest.raises(ProtocolError, match=r"push 0 of worker 1 from rank 3 \(worker 1\)"):
        run_shard(job, 1, [push_from(job, 1, 1, cut=4)])


def test_valid_pushes_are_applied(smoke, digits) -> None:
    """The control: the same script, undamaged, is served to its end."""
    job = make_job(smoke, digits, "topk", ratio=0.01)
    before = job.shards[1].values.copy()
    done = [(Header(Kind.DONE, w), LAYOUT.worker_rank(w), (b"", b"")) for w in range(P)]
    loop = run_shard(job, 1, [push_from(job, 0, 1), push_from(job, 1, 1), *done])
    assert not np.array_equal(job.shards[1].values, before) and loop.held == {}


@pytest.mark.parametrize(
    ("header", "src", "fragment"),
    [
        (Header(Kind.PUSH, 5, 0, payload_len=4), 3, "a PUSH for worker 5 from rank 3 (worker 1)"),
        (Header(Kind.PUSH, -1, 0, payload_len=4), 3, "a PUSH for worker -1 from rank 3"),
        (Header(Kind.PUSH, 0, 0, payload_len=4), 3, "a PUSH for worker 0 from rank 3 (worker 1)"),
        (Header(Kind.PULL, 1, 0), 1, "a PULL for worker 1 from rank 1 (shard 1)"),
        (Header(Kind.DONE, 0), 9, "a DONE for worker 0 from rank 9"),
        (Header(Kind.PUSH, 1, 4, payload_len=4), 3, "a PUSH of iteration 4 from rank 3"),
        (Header(Kind.PULL, 0, -1), 2, "a PULL of iteration -1 from rank 2 (worker 0)"),
        (Header(Kind.SNAPSHOT, 1, 3, payload_len=12), 1, "a bad SNAPSHOT from rank 1 (shard 1)"),
        (Header(Kind.ANSWER, 0, 0), 2, "shard 0 got an unexpected"),
    ],
)
def test_a_message_from_the_wrong_rank_or_iteration_is_refused(
    smoke, digits, header, src, fragment
) -> None:
    """Worker index and clock select server state: a wrong one is an error, not a lookup."""
    job = make_job(smoke, digits)
    with pytest.raises(ProtocolError) as info:
        run_shard(job, 0, [(header, src, (b"x" * max(header.payload_len, 0), b""))])
    assert fragment in str(info.value), str(info.value)


def test_a_pull_with_bad_controller_figures_names_the_rank(smoke, digits) -> None:
    job = make_job(smoke, digits)
    hdr = Header(Kind.PULL, 1, 0, state_len=5, state_codec=5)
    with pytest.raises(ProtocolError, match=r"pull 0 from rank 3 \(worker 1\) has 5 bytes"):
        run_shard(job, 0, [(hdr, 3, (b"", b"12345"))])


# --------------------------------------------------------------------------- worker


def answer_from(job: Job, s: int, w: int = 0, t: int = 0, cut: int = 0, state: bytes | None = None):
    """Shard ``s``'s real answer to worker ``w``'s pull of iteration ``t``, then damaged."""
    pull = job.shards[s].pull(w, t, job.ctx(t, 1.0))
    assert pull.payload is not None
    buf = bytes(pull.payload.buffer)
    buf = buf[: len(buf) - cut]
    st = encode_state(pull.extra) if state is None else state
    hdr = Header(Kind.ANSWER, w, t, payload_len=len(buf), state_len=len(st))
    return hdr, s, (buf, st)


def run_worker0(job: Job, answers: list[tuple]) -> list[dict[str, Any]]:
    wire = ScriptedWire(LAYOUT.worker_rank(0), answers)
    return run_worker(job, 0, wire, LAYOUT, DistOptions(), Faults(), 0.0)  # type: ignore[arg-type]


_GARBAGE_STATE = [
    struct.pack("<I", 200) + b"{}",  # manifest length beyond the part
    struct.pack("<I", 6) + b"{nope}",  # manifest is no JSON
    struct.pack("<I", 2) + b"[]",  # manifest of the wrong shape
    encode_state({"mask": np.ones(64, dtype=bool)})[:-3],  # array bytes cut
    encode_state({"k": 1}) + b"\0",  # a byte the manifest does not account for
    b"\1\2",  # shorter than the length word
]


@pytest.mark.parametrize("state", _GARBAGE_STATE)
def test_worker_refuses_an_answer_with_garbage_codec_state(smoke, digits, state: bytes) -> None:
    job = make_job(smoke, digits)
    answers = [answer_from(job, 0), answer_from(job, 1, state=state)]
    with pytest.raises(
        ProtocolError, match=r"worker 0: answer 0 from rank 1 \(shard 1\): bad codec"
    ):
        run_worker0(job, answers)


@pytest.mark.parametrize("cut", [1, 4, 400])
def test_worker_refuses_an_answer_payload_that_does_not_decode(smoke, digits, cut: int) -> None:
    job = make_job(smoke, digits)
    answers = [answer_from(job, 0, cut=cut), answer_from(job, 1)]
    with pytest.raises(ProtocolError) as info:
        run_worker0(job, answers)
    msg = str(info.value)
    assert msg.startswith("worker 0: answer 0 from rank 0 (shard 0): ") and "'none' payload" in msg


def test_worker_refuses_an_answer_for_another_iteration(smoke, digits) -> None:
    job = make_job(smoke, digits)
    with pytest.raises(ProtocolError, match="worker 0 expected its answer 0 from shard 0"):
        run_worker0(job, [answer_from(job, 0, t=1), answer_from(job, 1)])


def test_worker_decodes_good_answers(smoke, digits) -> None:
    """The control: undamaged answers get past decoding (to the next iteration's answers)."""
    job = make_job(smoke, digits)
    with pytest.raises(ScriptEnd):  # the script ends after iteration 0's answers
        run_worker0(job, [answer_from(job, 0), answer_from(job, 1)])
