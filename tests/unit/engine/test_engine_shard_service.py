"""The shard's service over scripted messages: the same holds, releases and answers per driver.

A script is a sequence of pulls and pushes to shard 0 (BSP, SSP, ASP, PCP; P = 2, one shard).
The service alone answers it; so do the sim backend's callbacks (each message a SimPy process,
the simulation run to rest after each), the dist backend's shard loop (over a scripted wire,
no sockets) and the horovod backend's exchange (a replicated shard fed through its allgather,
over a scripted Horovod). A spy on the service logs what each driver asked and was told: every
driver must give the log of the service alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import simpy
import torch

from psml_core.codecs.base import Payload
from psml_core.config import BlockSpec
from psml_core.data.prepare import prepare_dataset
from psml_core.data.store import load_prepared
from psml_core.engine import staged_job
from psml_core.engine.horovod import backend as hvd_backend
from psml_core.engine.job import Job, make_worker_codec, update_momentum
from psml_core.engine.optim import make_optimizer
from psml_core.engine.shard_service import PullMsg, PushMsg, ShardService
from psml_core.engine.sim import processes, state
from psml_core.engine.torchdist import Faults, Layout, shard_loop
from psml_core.engine.torchdist.wire import Header, Kind
from psml_core.net.network import FairShareNetwork
from psml_core.sync.rounds import RoundReport

P = 2
LAYOUT = Layout(shards=1, workers=P)  # rank 0: the shard; ranks 1, 2: workers 0, 1

# (kind, worker, iteration): a fast worker 0 runs ahead of worker 1, so that every policy
# holds some pulls and releases them on a later push.
SCRIPT = [
    ("pull", 0, 0), ("pull", 1, 0), ("push", 0, 0), ("pull", 0, 1), ("push", 0, 1),
    ("pull", 0, 2), ("push", 1, 0), ("pull", 1, 1), ("push", 1, 1), ("pull", 1, 2),
    ("push", 0, 2), ("push", 1, 2), ("pull", 0, 3), ("pull", 1, 3),
]  # fmt: skip
# A round policy's rounds are synchronous: no worker pushes round t + 1 before round t merged.
ROUNDS = [
    ("pull", 0, 0), ("pull", 1, 0), ("push", 0, 0), ("pull", 0, 1), ("push", 1, 0),
    ("pull", 1, 1), ("push", 1, 1), ("pull", 1, 2), ("push", 0, 1), ("pull", 0, 2),
]  # fmt: skip
POLICIES = {"bsp": SCRIPT, "ssp": SCRIPT, "asp": SCRIPT, "pcp": ROUNDS}


class Spy(ShardService):
    """The service, logging what its driver asked and what it answered."""

    log: list[tuple[Any, ...]] = []

    def pull(self, msg: PullMsg) -> bool:
        now = super().pull(msg)
        self.log.append(("pull", msg.worker, msg.clock, "answered" if now else "held"))
        return now

    def answer(self, msg: PullMsg, ctx: Any, now: float = 0.0, ratio: Any = None) -> Any:
        out = super().answer(msg, ctx, now, ratio)
        pl = out.pull
        body = hashlib.sha256(bytes(pl.payload.buffer) if pl.payload else b"").hexdigest()
        extra = sorted(pl.extra.items())
        self.log.append(("answer", msg.worker, msg.clock, out.staleness, body[:16], extra))
        return out

    def settle(self, msg: PushMsg) -> Any:
        out = super().settle(msg)
        released = [(m.worker, m.clock) for m in out.released]
        self.log.append(("settle", msg.worker, msg.clock, released, out.completed))
        return out


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory, smoke) -> Path:
    out = tmp_path_factory.mktemp("digits") / "digits"
    prepare_dataset(smoke.datasets["digits"], out)
    return out


def make_job(smoke, digits: Path, sync: str, method: str = "dense_bsp") -> Job:
    """A P = 2, S = 1 job of the smoke digits MLP under ``sync``."""
    run = smoke.run("digits_mlp", method, "dc_10g", smoke.seeds[0])
    params = {"bsp": {}, "ssp": {"staleness": 1}, "asp": {}, "pcp": {"s_max": 3}}[sync]
    recipe = run.method
    if method == "dense_bsp":
        recipe = dataclasses.replace(recipe, sync=BlockSpec(sync, params))
    spec = dataclasses.replace(
        run,
        workers=P,
        shards=1,
        workload=dataclasses.replace(run.workload, iterations=4),
        method=recipe,
    )
    return staged_job(spec, load_prepared(digits))


def gradient(job: Job, w: int, t: int) -> np.ndarray:
    n = len(job.shards[0].keys)
    return np.random.default_rng([w, t]).standard_normal(n).astype(np.float32) * 1e-2


def report(w: int, t: int) -> RoundReport:
    return RoundReport(1 + (w + t) % 2, 0.01 * (w + 1), 0.002).wire()


def push_msg(job: Job, w: int, t: int, rounds: bool) -> PushMsg:
    ctx = job.ctx(t, 1.0)
    payload = job.shards[0].codec_up.encode(gradient(job, w, t), ctx)
    return PushMsg(w, t, payload, ctx, report=report(w, t) if rounds else None)


def alone(job: Job, script: list[tuple[str, int, int]]) -> None:
    """The service with no driver: every message handled at once, in script order."""
    service = Spy(job.shards[0])
    rounds = job.shards[0].policy.rounds
    for kind, w, t in script:
        if kind == "pull":
            msg = PullMsg(w, t)
            if service.pull(msg):
                service.answer(msg, job.ctx(t, 1.0))
            continue
        msg = push_msg(job, w, t, rounds)
        if service.push(msg):
            for held in service.settle(msg).released:
                service.answer(held, job.ctx(held.clock, 1.0))


def sim(job: Job, script: list[tuple[str, int, int]]) -> None:
    """The sim backend's callbacks: each message a SimPy process, run to rest before the next."""
    env = simpy.Environment()
    net = FairShareNetwork(env, job.machines, 1.25e9, 1e-5, 0.0)
    run = processes.RunState(job, env, net)
    rounds = job.shards[0].policy.rounds
    for kind, w, t in script:
        if kind == "pull":
            env.process(run.pull(w, 0, t))
        else:
            msg = push_msg(job, w, t, rounds)
            env.process(run.push(w, 0, t, msg.payload, msg.ctx, msg.report))
        env.run()


class ScriptedWire:
    """A wire whose receives return the script's messages; what the shard sends is dropped."""

    preposts = False

    def __init__(self, messages: list[tuple[Header, int, tuple[bytes | None, bytes]]]) -> None:
        self.rank = 0
        self.messages = deque(messages)
        self.parts: deque[tuple[bytes | None, bytes]] = deque()

    def inbox(self, wire: Any, peers: list[int]) -> ScriptedWire:
        return self

    @property
    def pending(self) -> bool:
        return bool(self.messages)

    def next(self) -> tuple[Header, int]:
        hdr, src, parts = self.messages.popleft()
        if hdr.kind != Kind.PULL or hdr.payload_len >= 0 or hdr.state_len:  # parts follow
            self.parts.append(parts)
        return Header.from_tensor(hdr.tensor()), src

    def close(self) -> None:
        pass

    def recv_parts(self, src: int, header: Header, pre: Any = None) -> tuple[Any, memoryview]:
        payload, state_part = self.parts.popleft()
        return (None if payload is None else memoryview(payload)), memoryview(state_part)

    def isend(self, dst: int, header: Header, parts: Any = (), prepost: int = 0) -> Any:
        return type("Sent", (), {"reap": lambda _s: True, "wait": lambda _s: None})()

    def send(self, dst: int, header: Header, parts: Any = (), prepost: int = 0) -> None:
        pass


def dist(job: Job, script: list[tuple[str, int, int]]) -> None:
    """The dist backend's shard loop, its messages from a scripted wire (no sockets)."""
    rounds = job.shards[0].policy.rounds
    messages: list[tuple[Header, int, tuple[bytes | None, bytes]]] = []
    for kind, w, t in script:
        src = LAYOUT.worker_rank(w)
        if kind == "pull":
            messages.append((Header(Kind.PULL, w, t, ratio=1.0), src, (None, b"")))
            continue
        msg = push_msg(job, w, t, rounds)
        state_part = msg.report.pack() if msg.report is not None else b""
        buf = bytes(msg.payload.buffer)
        n = len(state_part)
        hdr = Header(Kind.PUSH, w, t, payload_len=len(buf), state_len=n, state_codec=n, ratio=1.0)
        messages.append((hdr, src, (buf, state_part)))
    for w in range(P):  # each worker closes its slots
        messages += [(Header(Kind.DONE, w), LAYOUT.worker_rank(w), (None, b""))] * 2
    wire = ScriptedWire(messages)
    loop = shard_loop.ShardLoop(job, 0, wire, LAYOUT, Faults(), inbox=wire.inbox)  # type: ignore[arg-type]
    loop.run()
    assert loop.evaluations is not None
    loop.evaluations.results()


DRIVERS = {"sim": sim, "dist": dist}


@pytest.mark.parametrize("sync", list(POLICIES))
@pytest.mark.parametrize("driver", list(DRIVERS))
def test_every_driver_holds_releases_and_answers_as_the_service_alone(
    smoke, digits, monkeypatch, sync, driver
) -> None:
    script = POLICIES[sync]
    monkeypatch.setattr(Spy, "log", [])
    alone(make_job(smoke, digits, sync), script)
    expected = Spy.log
    # The script makes every policy but ASP hold pulls and release them on a later push.
    holds = sync != "asp"
    assert any(e[0] == "pull" and e[3] == "held" for e in expected) == holds
    assert any(e[0] == "settle" and e[3] for e in expected) == holds
    monkeypatch.setattr(Spy, "log", [])
    monkeypatch.setattr(state, "ShardService", Spy)
    monkeypatch.setattr(shard_loop, "ShardService", Spy)
    job = make_job(smoke, digits, sync)
    DRIVERS[driver](job, script)
    assert Spy.log == expected


class ScriptedHorovod:
    """Rank 0 of two under a scripted Horovod: rank 1's payloads come from a script."""

    def __init__(self, others: list[Payload]) -> None:
        self.others = deque(others)
        self.other: Payload | None = None

    def size(self) -> int:
        return P

    def allgather(self, tensor: torch.Tensor, name: str) -> torch.Tensor:
        if name == "psml.sizes":
            self.other = self.others.popleft()
            return torch.cat([tensor, torch.tensor([self.other.wire_bytes])])
        assert self.other is not None
        theirs = torch.frombuffer(bytearray(self.other.buffer), dtype=torch.uint8)
        return torch.cat([tensor, theirs])


def test_horovods_exchange_serves_its_steps_as_the_service_alone(
    smoke, digits, monkeypatch
) -> None:
    """Top-k with error feedback, broadcast (pull: aggregate): P pushes, then P pulls a step."""
    steps = 3
    job = make_job(smoke, digits, "bsp", method="topk_ef")
    grads = [[gradient(job, w, t) for t in range(steps)] for w in range(P)]
    codecs = [make_worker_codec(job.spec, w) for w in range(P)]
    payloads: list[list[Payload]] = [[], []]
    extra: dict[str, Any] = {}

    def optimizer() -> Any:
        return make_optimizer(job.spec.workload, job.model.n_params, update_momentum(job.spec))

    monkeypatch.setattr(Spy, "log", [])
    monkeypatch.setattr(hvd_backend, "ShardService", Spy)
    alone_params = job.workers[0].params.copy()
    service = hvd_backend.replicated_service(job, P, codecs[0], optimizer(), alone_params)
    for t in range(steps):
        ctx = job.ctx(t, 1.0, extra)
        for w in range(P):
            payloads[w].append(codecs[w].encode(grads[w][t], ctx))
            msg = PushMsg(w, t, payloads[w][t], ctx)
            if service.push(msg):
                service.settle(msg)
        for w in range(P):
            pull = PullMsg(w, t + 1)
            assert service.pull(pull)
            answer = service.answer(pull, ctx)
            extra = answer.pull.extra if w == 0 else extra
    expected = Spy.log

    monkeypatch.setattr(Spy, "log", [])
    job = make_job(smoke, digits, "bsp", method="topk_ef")
    hvd = ScriptedHorovod(payloads[1])
    exchange = hvd_backend._Exchange(hvd, job, 0, "allgather", optimizer())
    for t in range(steps):
        up, down = exchange(grads[0][t], t, 1.0)
        assert (up, down) == (payloads[0][t].wire_bytes, payloads[1][t].wire_bytes)
    assert Spy.log == expected
    np.testing.assert_array_equal(job.workers[0].params, alone_params)
