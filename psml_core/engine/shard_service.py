"""The shard's service, sans-IO: what a server shard does with a pull, a push or a done.

Every backend serves a :class:`~psml_core.engine.server.ServerShard` through one
:class:`ShardService`; a backend's *driver* only moves the messages and keeps the time:

* the sim backend's callbacks on SimPy events (:mod:`psml_core.engine.sim.processes`),
* the dist backend's inbox loop (:mod:`psml_core.engine.torchdist.shard_loop`),
* the horovod backend's exchange, a replicated shard on every rank
  (:mod:`psml_core.engine.horovod.backend`).

The service has no sockets, no generators and no clock: a time a sync policy reads (DSSP's
arrival times) comes in on the message, on the driver's clock. A pull is answered at once or
held (:meth:`ShardService.pull`); an applied push, once its driver has finished serving it
(:meth:`ShardService.settle`), releases the held pulls the policy now lets through, in the order
they were held, and says whether the shard has now applied every worker's push of its iteration.
Which of those iterations are evaluated, once every shard is in, is
:class:`~psml_core.engine.evaluations.EvalCollector`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from psml_core.codecs.base import CodecContext, Payload
from psml_core.engine.server import RATIO_BYTES, RATIO_KEY, Pull, ServerShard
from psml_core.sync.rounds import RoundReport

__all__ = ["Answer", "DoneMsg", "PullMsg", "PushMsg", "Settled", "ShardService"]


@dataclass(slots=True)
class PullMsg:
    """A worker's request for its iteration ``clock``.

    Attributes:
        worker: The pulling worker.
        clock: Its iteration.
        keys: ``touched`` mode: the requested positions in the shard's key list.
        token: The driver's handle on a held pull (a SimPy event, a request record), set by
            the driver when :meth:`ShardService.pull` holds it; returned as it is on release.
    """

    worker: int
    clock: int
    keys: np.ndarray | None = None
    token: Any = None


@dataclass(slots=True)
class PushMsg:
    """A worker's push of iteration ``clock``.

    Attributes:
        worker: The pushing worker.
        clock: Its iteration (round, under a round policy).
        payload: The encoded gradient (round policies: the encoded model change).
        ctx: The codec context both ends share.
        now: Its arrival on the driver's clock (simulated or wall-clock seconds).
        report: A round policy's report from the worker (None otherwise).
    """

    worker: int
    clock: int
    payload: Payload
    ctx: CodecContext
    now: float = 0.0
    report: RoundReport | None = None


@dataclass(frozen=True, slots=True)
class DoneMsg:
    """A worker will send this shard nothing more."""

    worker: int


@dataclass(frozen=True, slots=True)
class Answer:
    """What to send a worker for its pull.

    Attributes:
        worker: The worker to send it to.
        clock: The iteration it answers.
        pull: The answer: payload and published state (the answer format, see ``Pull``).
        staleness: How far the worker is ahead of the slowest one when answered.
    """

    worker: int
    clock: int
    pull: Pull
    staleness: int


@dataclass(frozen=True, slots=True)
class Settled:
    """What an applied push lets happen, once its driver has finished serving it.

    Attributes:
        released: The held pulls the sync policy now lets through, in the order they were held.
        completed: The iteration the shard has now applied every worker's push of (None if
            not yet); its driver reports it to the run's
            :class:`~psml_core.engine.evaluations.EvalCollector`.
    """

    released: list[PullMsg]
    completed: int | None


class ShardService:
    """One shard's side of the protocol, over its :class:`ServerShard`.

    Args:
        shard: The shard (the math: codecs, optimizer, sync state).
    """

    def __init__(self, shard: ServerShard) -> None:
        self.shard = shard
        self.workers = shard.workers
        self.held: list[PullMsg] = []
        # Per iteration, the pushes applied so far (a barrier applies P at once).
        self.applied: dict[int, int] = {}
        self.per_apply = shard.workers if shard.policy.barrier else 1
        self.closed: set[int] = set()

    def pull(self, msg: PullMsg) -> bool:
        """Take a pull: True if it may be answered now, else it is held until a release."""
        if msg.worker in self.closed:
            raise ValueError(f"shard {self.shard.rank}: a pull of worker {msg.worker} after done")
        if self.shard.may_serve(msg.worker, msg.clock):
            return True
        self.held.append(msg)
        return False

    def answer(
        self, msg: PullMsg, ctx: CodecContext, now: float = 0.0, ratio: float | None = None
    ) -> Answer:
        """The answer to a pull that may be answered (at once, or released).

        Args:
            msg: The pull.
            ctx: The answer's codec context.
            now: The time of the answer on the driver's clock.
            ratio: The step's compression ratio, where this shard runs the controller (it then
                travels with the answer, :data:`~psml_core.engine.server.RATIO_KEY`).
        """
        shard = self.shard
        staleness = shard.policy.staleness(msg.worker, shard.clocks)
        pull = shard.pull(msg.worker, msg.clock, ctx, now=now, keys=msg.keys)
        if ratio is not None:
            extra = {**pull.extra, RATIO_KEY: ratio}
            pull = Pull(pull.payload, extra, pull.extra_bytes + RATIO_BYTES, pull.ctx)
        return Answer(msg.worker, msg.clock, pull, staleness)

    def push(self, msg: PushMsg) -> bool:
        """Apply a push; True if an update was applied (then :meth:`settle` it once served).

        Raises:
            ValueError: the payload does not decode, or a round push lacks its report.
        """
        if msg.worker in self.closed:
            raise ValueError(f"shard {self.shard.rank}: a push of worker {msg.worker} after done")
        return self.shard.push(
            msg.worker, msg.clock, msg.payload, msg.ctx, now=msg.now, report=msg.report
        )

    def settle(self, msg: PushMsg) -> Settled:
        """What the applied push ``msg`` lets happen: released pulls, a completed iteration."""
        released = self.release()
        t = msg.clock
        n = self.applied.get(t, 0) + self.per_apply
        if n < self.workers:
            self.applied[t] = n
            return Settled(released, None)
        self.applied.pop(t, None)
        return Settled(released, t)

    def release(self) -> list[PullMsg]:
        """The held pulls the sync policy now lets through (no longer held), in held order."""
        if not self.held:
            return []
        may_serve = self.shard.may_serve
        out, still = [], []
        for msg in self.held:
            (out if may_serve(msg.worker, msg.clock) else still).append(msg)
        self.held = still
        return out

    def done(self, msg: DoneMsg) -> None:
        """A worker's last message: nothing more from it."""
        self.closed.add(msg.worker)

    def idle(self) -> bool:
        """Whether nothing is held: no pull waits and no iteration is half applied."""
        return not self.held and not self.applied
