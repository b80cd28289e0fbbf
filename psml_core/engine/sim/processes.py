"""The SimPy processes of a simulated run's messages: pulls, pushes and the servers.

:class:`RunState` holds what one run mutates (the shards' services and server threads, the
rows, the evaluations, the controller feed) and moves its messages: each pull is a SimPy process of
:meth:`RunState.pull`, each push one of :meth:`RunState.push` (both started at once,
:class:`~psml_core.engine.sim.started.Started`), and a shard's processing of a landed push is
:meth:`RunState.serve_push`, callbacks on the events a process would wait for (the same order
of events, without a process's start and end). It is the sim backend's driver of each shard's
:class:`~psml_core.engine.shard_service.ShardService`: the service holds and releases the
pulls, builds the answers and says when an iteration is complete; this module adds the time.
A worker's step is
:class:`~psml_core.engine.loop.WorkerLoop` over a
:class:`~psml_core.engine.sim.transport.SimTransport`; the backend
(:mod:`psml_core.engine.sim.backend`) builds the network and starts the workers' loops.
"""

from __future__ import annotations

import functools
from collections.abc import Generator
from pathlib import Path
from typing import Any, NamedTuple

import simpy

from psml_core.codecs.base import CodecContext, Payload
from psml_core.codecs.kv import pack_keys
from psml_core.codecs.lossless import snappy_bytes
from psml_core.control.feed import ControllerFeed
from psml_core.engine.evaluations import EvalCollector
from psml_core.engine.job import Job
from psml_core.engine.progress import NO_PROGRESS, Progress
from psml_core.engine.shard_service import PullMsg, PushMsg
from psml_core.engine.sim.charges import CodecCharges
from psml_core.engine.sim.drain import CheckpointDrain
from psml_core.engine.sim.gradients import BatchedGradients
from psml_core.engine.sim.moves import KeyMoves
from psml_core.engine.sim.state import ShardState, WorkerState
from psml_core.engine.step import to_records
from psml_core.engine.timeline import key_ready_fraction
from psml_core.metrics.records import IterationRecord
from psml_core.net.delay import make_delay
from psml_core.net.network import FairShareNetwork
from psml_core.sync.rounds import REPORT_BYTES, RoundReport

__all__ = ["Served", "RunState"]


class Served(NamedTuple):
    """One shard's answer to a worker's pull, as :meth:`RunState.pull` returns it."""

    blocked: float  # the time the shard's sync policy held the request
    down: int  # the answer's wire bytes
    remote: int  # the part of them that crossed the network
    staleness: int
    lossless: int  # the answer's Snappy-coded size (0 unless lossless: snappy)
    request: bytes  # the request's payload (touched: the key list)
    decode: float  # the device's decode time of the answer


class _Service(NamedTuple):
    """One push on its way through the shard (:meth:`RunState.serve_push`)."""

    msg: PushMsg
    s: int
    start: float  # when it was handed to the network
    landed: simpy.Event  # fired once the shard has served it


class RunState:
    """The mutable state of one simulated run, and the SimPy processes of its messages.

    The run's own state is its records (``rows``, ``evals``, ``applied``) and its controller
    feed; each worker's is a :class:`~.state.WorkerState`, each shard's a
    :class:`~.state.ShardState`. A checkpointed run has a :class:`~.drain.CheckpointDrain`
    (``drains``), a dynamic placement a :class:`~.moves.KeyMoves` (``moves``).
    """

    def __init__(
        self,
        job: Job,
        env: simpy.Environment,
        net: FairShareNetwork,
        checkpoint: Path | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.job, self.env, self.net = job, env, net
        # Progress only reads the run (never saved in a checkpoint): rows summed so far, bytes.
        self.progress = progress or NO_PROGRESS
        self._summed = (0, 0, 0)
        self.delay = make_delay(job.spec.scenario.delay, job.spec.seed)
        # What codecs cost: workers on the run's device, servers on a CPU core [ours].
        self.charges = CodecCharges(job.spec.compute)
        self.overlap = job.spec.scenario.overlap
        self.ready = key_ready_fraction(job.model.tensor_sizes())
        self.rounds = job.shards[0].policy.rounds
        self.lossless = job.spec.method.lossless == "snappy"
        self.worker_state = [WorkerState.of(len(job.shards)) for _ in job.workers]
        self.shard_state = [ShardState.of(env, shard) for shard in job.shards]
        self.evals: dict[int, tuple[float, float]] = {}
        # All parts of the model are taken at the instant the last shard completes an iteration.
        self.collector = EvalCollector(job, self._evaluate, lambda _parts: job.global_params())
        self.rows: list[dict[str, Any]] = []
        # Controller feed: a step's transfer times (its pushes, the next pull) and compute time.
        self.feed = ControllerFeed(job.controller, job.spec.workers)
        every = job.spec.checkpoint_every
        self.drains = CheckpointDrain(self, checkpoint) if checkpoint and every > 0 else None
        self.moves = KeyMoves(self, job.dynamic) if job.dynamic is not None else None
        # The workers' gradients computed a step at a time (SimBackend sets it).
        self.gradients: BatchedGradients | None = None

    def saved(self) -> dict[str, Any]:
        """What a checkpoint keeps of the run (:meth:`restore` puts it back)."""
        return {
            "evals": self.evals,
            "rows": self.rows,
            "feed": self.feed,
            "extra": [w.extra for w in self.worker_state],
        }

    def restore(self, saved: dict[str, Any]) -> None:
        """Resume from a checkpoint's :meth:`saved` state."""
        # Drained: no iteration is half applied, none half collected (``ShardService.idle``).
        self.evals, self.rows = saved["evals"], saved["rows"]
        self.feed = saved["feed"]
        for w, extra in zip(self.worker_state, saved["extra"], strict=True):
            w.extra = extra

    def bytes_so_far(self) -> tuple[int, int]:
        """Bytes up and down of the records so far (summed incrementally, for progress)."""
        n, up, down = self._summed
        for row in self.rows[n:]:
            up += row["bytes_up"]
            down += row["bytes_down"]
        self._summed = (len(self.rows), up, down)
        return up, down

    def ratio(self, t: int) -> float:
        """The ratio of step ``t``: the controller sees every step whose workers all reported.

        Under BSP that is every step before ``t - 1`` at least; under ASP/SSP the latest
        complete ones. The value is fixed the first time it is asked; all workers share it.
        """
        return self.feed.ratio(t)

    def pull(self, p: int, s: int, t: int, keys: Any = None) -> Generator[Any, Any, Served]:
        """Worker ``p``'s pull of iteration ``t`` from shard ``s``: request, hold, answer.

        ``keys``: touched mode, the positions of the batch's keys in the shard's key list.
        """
        shard, machine = self.job.shards[s], int(self.job.shard_machine[s])
        d = self.delay.delay_s(t)
        # The request: header only, or (touched) the key list of the shard's touched keys.
        request = b"" if keys is None else pack_keys(keys, len(shard.keys))
        sent = self.env.now
        yield self.net.transfer(p, machine, len(request), d)
        # The controller sees the transfer only, not the wait behind the last push's serving.
        self.feed.transfer(p, t - 1, s, self.env.now - sent)
        landing = self.worker_state[p].landing[s]
        if landing is not None and not landing.triggered:
            yield landing  # the request left behind the worker's last push: served after it
        arrived = self.env.now
        at_shard = self.shard_state[s]
        msg = PullMsg(p, t, keys)
        if not at_shard.service.pull(msg):
            msg.token = held = self.env.event()  # fired when a push releases it
            yield held
        blocked = self.env.now - arrived  # held by the sync policy
        # The shard's server thread answers: after any aggregation in progress, and it takes
        # the time of encoding the answer (params, delta, touched; a broadcast is encoded once).
        thread = at_shard.thread
        turn = thread.acquire()
        if turn is not None:
            yield turn
        # The answer's context: step t at the ratio already in force (the last step's).
        # Step t's own ratio is fixed when the worker has all of its answers, so that
        # under a barrier the controller has seen every step before t.
        ctx = self.job.ctx(t, self.ratio(max(t - 1, 0)))
        answered = at_shard.service.answer(msg, ctx, now=self.env.now)
        answer, staleness = answered.pull, answered.staleness
        serve = self.charges.answer_s(shard, answer, ctx, encode=True)
        if serve:
            yield self.env.timeout(serve)
        thread.release()
        nbytes = self.net.wire_bytes(answer.wire_bytes)
        lossless = 0
        if self.lossless:
            packed = snappy_bytes(answer.payload) if answer.payload else 0
            lossless = self.net.wire_bytes(packed + answer.extra_bytes)
        sent = self.env.now
        yield self.net.transfer(machine, p, answer.wire_bytes, d)
        self.feed.transfer(p, t - 1, s, self.env.now - sent)
        vector = self.job.workers[p].install(s, shard, answer, ctx, keys)
        if self.moves is not None:
            if keys is not None:  # touched: the values of exactly the requested keys
                self.moves.note_keys(p, shard.keys[keys], len(request) + answer.wire_bytes)
            elif vector is not None:
                self.moves.note_answer(p, shard.keys, vector, answer.wire_bytes)
        self.worker_state[p].extra[s] = answer.extra
        decode = self.charges.answer_s(shard, answer, answer.ctx or ctx, encode=False)
        remote = nbytes if machine != p else 0
        return Served(blocked, nbytes, remote, staleness, lossless, request, decode)

    def push(
        self,
        p: int,
        s: int,
        t: int,
        payload: Payload,
        ctx: CodecContext,
        report: RoundReport | None = None,
        at: float | None = None,
    ) -> Generator[Any, Any, float]:
        """Send one push at time ``at`` (when its encode is done); return when it has left.

        A push is asynchronous, as a socket's send is (PS-lite's and the dist backend's): the
        worker goes on once the bytes have left its NIC, and what it sends the shard next (its
        next pull request) queues behind them, so the shard takes it after the push
        (:meth:`pull`). The shard's processing (decode, aggregation) is :meth:`serve_push`,
        started by the push's arrival.
        """
        if at is not None and at > self.env.now:
            yield self.env.timeout(at - self.env.now)
        machine = int(self.job.shard_machine[s])
        nbytes = payload.wire_bytes + (REPORT_BYTES if report is not None else 0)
        start = self.env.now
        sent, arrival = self.net.send(p, machine, nbytes, self.delay.delay_s(t))
        if self.drains is not None:  # in flight: a checkpoint's drain waits until it is served
            self.drains.push_sent()
        landed = self.worker_state[p].landing[s] = self.env.event()
        served = _Service(PushMsg(p, t, payload, ctx, report=report), s, start, landed)
        arrival.callbacks.append(functools.partial(self._arrived, served))
        yield sent
        return self.env.now

    # The shard's side of a push, written as callbacks on the events a generator would wait
    # for: each step runs exactly when a process's resume would, so the order of events is a
    # process's, without a process's start and end events (two per push) or its generator.

    def _arrived(self, push: _Service, _: simpy.Event) -> None:
        # Network time only (DC2's signal); before the shard applies it: a released pull sees it.
        self.feed.transfer(push.msg.worker, push.msg.clock, push.s, self.env.now - push.start)
        self.serve_push(push)

    def serve_push(self, push: _Service) -> None:
        """The shard's server thread takes a landed push, decodes it into the sum and applies it.

        A barrier's last push also encodes the round's broadcast. Then the request the worker
        queued behind the push may be served (``landed`` fires).
        """
        turn = self.shard_state[push.s].thread.acquire()
        if turn is None:
            self._decode(push)
        else:
            turn.callbacks.append(functools.partial(self._decode, push))

    def _decode(self, push: _Service, _: object = None) -> None:
        cost = self.charges.push_s(self.job.shards[push.s], push.msg.payload, push.msg.ctx)
        if cost:
            self.env.timeout(cost).callbacks.append(functools.partial(self._apply, push))
        else:
            self._apply(push)

    def _apply(self, push: _Service, _: object = None) -> None:
        shard, msg = self.job.shards[push.s], push.msg
        msg.now = self.env.now  # when the server thread applies it
        applied = self.shard_state[push.s].service.push(msg)
        if applied and shard.policy.barrier and shard.pull_mode == "aggregate":
            cost = self.charges.broadcast_s(shard, msg.clock, msg.ctx)
            if cost:
                done = self.env.timeout(cost)
                done.callbacks.append(functools.partial(self._served, push, applied))
                return
        self._served(push, applied)

    def _served(self, push: _Service, applied: bool, _: object = None) -> None:
        at_shard = self.shard_state[push.s]
        at_shard.thread.release()
        if applied:
            settled = at_shard.service.settle(push.msg)
            for msg in settled.released:
                msg.token.succeed()
            t = settled.completed
            if t is not None and self.job.should_evaluate(t):
                # The model "after iteration t" is evaluated once every shard has applied every
                # worker's push of iteration t.
                self.collector.add(t, push.s)
        if self.drains is not None:
            self.drains.push_served()
        push.landed.succeed()  # served: the request queued behind it is the server's next

    def _evaluate(self, t: int, params: Any) -> None:
        """Evaluate the model after iteration ``t`` now (simulated time stands still)."""
        ds = self.job.dataset
        self.evals[t] = self.job.model.evaluate(params, ds.X_test, ds.y_test)
        if self.progress.enabled:
            loss, acc = self.evals[t]
            up, down = self.bytes_so_far()
            self.progress.evaluation(
                t, sim_time=self.env.now, loss=loss, accuracy=acc, bytes_up=up, bytes_down=down
            )

    def records(self) -> list[IterationRecord]:
        """The records in (iteration, worker) order, with the evaluations of their iterations."""
        return to_records(self.rows, self.evals, "simulated")
