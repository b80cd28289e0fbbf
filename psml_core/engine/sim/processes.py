"""The SimPy processes of a simulated run: workers, their pulls and pushes, the servers.

:class:`RunState` holds what one run mutates (the shards' gates and server threads, the rows,
the evaluations, the controller feed) and runs the protocol of :mod:`psml_core.engine.step`
as SimPy processes: a worker is :meth:`RunState.worker`, each message :meth:`RunState.pull` or
:meth:`RunState.push`, each shard's processing of a push :meth:`RunState.serve_push`. The
backend (:mod:`psml_core.engine.sim.backend`) builds the network and starts the workers.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import simpy

from psml_core.codecs.base import CodecContext, Payload
from psml_core.codecs.kv import pack_keys
from psml_core.codecs.lossless import snappy_bytes
from psml_core.control.feed import ControllerFeed
from psml_core.engine.job import Job
from psml_core.engine.migration import chunk_traffic
from psml_core.engine.progress import NO_PROGRESS, Progress
from psml_core.engine.sim.charges import CodecCharges
from psml_core.engine.sim.drain import CheckpointDrain
from psml_core.engine.sim.gate import Gate
from psml_core.engine.sim.moves import KeyMoves
from psml_core.engine.sim.thread import ServerThread
from psml_core.engine.step import (
    budget_spent,
    compute_step,
    encode_pushes,
    fold_final_pull,
    step_budget,
    step_row,
    to_records,
)
from psml_core.engine.timeline import key_ready_fraction, shard_ready, step_timeline
from psml_core.metrics.records import IterationRecord
from psml_core.net.delay import make_delay
from psml_core.net.network import FairShareNetwork
from psml_core.sync.pcp import REPORT_BYTES, RoundReport

__all__ = ["RunState"]


class _Pulled(NamedTuple):
    """A worker's pull of one iteration, from every shard."""

    wait: float  # the longest time a shard's sync policy held the request
    down: tuple[int, ...]  # wire bytes of each shard's answer
    remote_down: int  # the part of them that crossed the network
    staleness: int
    lossless_down: int | None  # the answers' Snappy-coded size (lossless: snappy)
    requests: list[bytes]  # the requests' payloads (touched: key lists)
    decode: float  # the device's decode time of the answers

    @classmethod
    def of(cls, served: list[tuple], lossless: bool) -> _Pulled:
        """From :meth:`RunState.pull`'s results, in shard order."""
        return cls(
            wait=max(x[0] for x in served),
            down=tuple(x[1] for x in served),
            remote_down=sum(x[2] for x in served),
            staleness=max(x[3] for x in served),
            lossless_down=sum(x[4] for x in served) if lossless else None,
            requests=[x[5] for x in served],
            decode=sum(x[6] for x in served),
        )


class _Pushed(NamedTuple):
    """A worker's push of one iteration, to every shard."""

    ratio: float  # the ratio it was encoded at
    payloads: list[Payload]
    encode_s: float  # the device's encode time
    start: float  # when the first push started
    sent: float  # when the last one had left the worker's NIC (they land later)
    exposed: float  # push time beyond the device's work: communication on the critical path


class RunState(KeyMoves, CheckpointDrain):
    """The mutable state of one simulated run, and its SimPy processes."""

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
        self.checkpoint = checkpoint if job.spec.checkpoint_every > 0 else None
        self._drain: dict[int, tuple[simpy.Event, list[int], list[float], list[float]]] = {}
        self.delay = make_delay(job.spec.scenario.delay, job.spec.seed)
        self.gates = [Gate(env) for _ in job.shards]
        # Each shard's server thread: decoding pushes, aggregating, encoding answers.
        self.cpu = [ServerThread(env) for _ in job.shards]
        self._serving = 0  # pushes in flight or still being processed by the servers
        self._idle: simpy.Event | None = None
        # Each worker's last push to each shard, until served: the server takes that worker's
        # next request (queued behind it on their connection) only after it.
        self._landing: dict[tuple[int, int], simpy.Event] = {}
        # What codecs cost: workers on the run's device, servers on a CPU core [ours].
        self.charges = CodecCharges(job.spec.compute)
        self.overlap = job.spec.scenario.overlap
        self.ready = key_ready_fraction(job.model.tensor_sizes())
        self.applied: dict[int, int] = {}
        self.evals: dict[int, tuple[float, float]] = {}
        self.rows: list[dict[str, Any]] = []
        # Controller feed: a step's transfer times (its pushes, the next pull) and compute time.
        self.feed = ControllerFeed(job.controller, job.spec.workers)
        # Codec state each shard published to each worker for its next push (DFS masks, ...).
        self.extra: list[list[dict[str, Any]]] = [[{} for _ in job.shards] for _ in job.workers]
        self.rounds = job.shards[0].policy.rounds
        self.lossless = job.spec.method.lossless == "snappy"
        # Dynamic partition: this step's traffic per worker (keys, bytes per key), the
        # migration points (arrivals, release event, start time) and bytes moved per record.
        self.dynamic = job.dynamic
        self.traffic: list[list[tuple[Any, float]]] = [[] for _ in job.workers]
        self._points: dict[int, list[Any]] = {}
        self.migrated: dict[tuple[int, int], int] = {}

    def worker(
        self, p: int, first: int = 0, prev_comm: float = 0.0, arrived: float | None = None
    ) -> Generator[Any, Any, None]:
        """Worker ``p``'s loop, from iteration ``first`` (the protocol of :mod:`..step`).

        A resumed worker starts at the drain it reached at ``arrived``; ``prev_comm`` is its
        previous round's communication time (PCP's round report).
        """
        env, every = self.env, self.job.spec.checkpoint_every
        for t in range(first, self.job.spec.workload.iterations):
            # 0. a checkpoint's drain: wait until every worker is here (counted as waiting)
            start, drained = env.now, 0.0
            if t == first and arrived is not None:
                start, drained = arrived, env.now - arrived
            elif self.checkpoint is not None and t > 0 and t % every == 0:
                drained = yield from self.drain(p, t, prev_comm)
            # 1. pull (touched: for the keys of the batch drawn now, which compute then uses)
            pulled = yield from self.pull_all(p, t)
            if budget_spent(self.extra[p], self.rounds):
                yield from self.final_pull(p, start, drained, pulled)
                break
            prev_comm = yield from self.iteration(p, t, start, drained, pulled, prev_comm)

    def pull_all(self, p: int, t: int) -> Generator[Any, Any, _Pulled]:
        """Step 1: pull from every shard at once; return when every answer is installed."""
        job = self.job
        touched = job.shards[0].pull_mode == "touched"
        keys = job.workers[p].touched_keys() if touched else [None] * len(job.shards)
        pulls = [self.env.process(self.pull(p, s, t, keys[s])) for s in range(len(job.shards))]
        results = yield self.env.all_of(pulls)
        self.feed.close_step(p, t - 1)  # its pushes and this pull: the previous step's round
        return _Pulled.of([results[proc] for proc in pulls], self.lossless)

    def final_pull(
        self, p: int, start: float, drained: float, pulled: _Pulled
    ) -> Generator[Any, Any, None]:
        """A round policy's budget is spent: this pull (the merged model) ends the run.

        Its bytes and time join the worker's last record (:func:`..step.fold_final_pull`).
        """
        env = self.env
        wait = pulled.wait + drained
        decode = pulled.decode
        if decode:
            yield env.timeout(decode)
        last = next(r for r in reversed(self.rows) if r["worker"] == p)
        lossless_up = (
            sum(self.net.wire_bytes(snappy_bytes(r) if r else 0) for r in pulled.requests)
            if self.lossless
            else None
        )
        fold_final_pull(
            last,
            up=[self.net.wire_bytes(len(r)) for r in pulled.requests],
            down=pulled.down,
            remote=[int(m) != p for m in self.job.shard_machine],
            end=env.now,
            comm=env.now - start - wait - decode,
            wait=wait,
            codec=decode,
            lossless_up=lossless_up,
            lossless_down=pulled.lossless_down,
        )

    def iteration(
        self, p: int, t: int, start: float, drained: float, pulled: _Pulled, prev_comm: float
    ) -> Generator[Any, Any, float]:
        """Steps 2 to 4 of iteration ``t`` after its pull; returns its communication time."""
        job, env = self.job, self.env
        w = job.workers[p]
        wait = pulled.wait + drained
        # Dynamic partition: at a decision step, keys may move once every pull is in.
        if self.dynamic is not None and t > 0 and t % self.dynamic.period == 0:
            # Waiting for the others is wait; the move's transfers are communication.
            wait += yield from self.migration_point(t)
        pull_end = env.now
        # The answers are decoded on the worker's device, one after the other.
        decode = pulled.decode
        if decode:
            yield env.timeout(decode)
        # Keys moved to this worker's machine: down traffic from their old shards (remote).
        down, remote_down, moved = pulled.down, pulled.remote_down, 0
        moved_from = self.migrated.pop((t, p), None)
        if moved_from is not None:
            down = tuple(int(b) for b in np.add(down, moved_from))
            moved = int(moved_from.sum())
            remote_down += moved
        # 2. compute: one gradient, or a round's granted local steps
        speed = job.speed.factor(p, t)
        steps = step_budget(self.extra[p], self.rounds)
        loss, vector, cost = compute_step(
            w, steps, self.rounds, lambda batch: job.compute.seconds(job.model, batch), t
        )
        compute = cost * speed
        report = RoundReport(steps, compute / steps, prev_comm).wire() if self.rounds else None
        # 3. push
        pull_comm = pull_end - start - wait
        pushed = yield from self.push_all(p, t, vector, compute, report, pull_comm)
        # 4. record; each shard got a pull request (header only, or a key list) and a push
        extra_up = REPORT_BYTES if report is not None else 0
        pairs = list(zip(pulled.requests, pushed.payloads, strict=True))
        sent = [
            self.net.wire_bytes(len(req)) + self.net.wire_bytes(pl.wire_bytes + extra_up)
            for req, pl in pairs
        ]
        lossless_up = None
        if self.lossless:
            lossless_up = sum(
                self.net.wire_bytes(snappy_bytes(req) if req else 0)
                + self.net.wire_bytes(snappy_bytes(pl) + extra_up)
                for req, pl in pairs
            )
        row = step_row(
            iteration=t,
            worker=p,
            time_s=env.now,
            compute_s=compute,
            comm_s=pull_comm + pushed.exposed,
            wait_s=wait,
            codec_s=decode + pushed.encode_s,
            up=sent,
            down=down,
            remote=[int(m) != p for m in job.shard_machine],
            remote_down=remote_down,
            ratio=pushed.ratio,
            staleness=pulled.staleness,
            loss=loss,
            local_steps=steps,
            lossless_up=lossless_up,
            lossless_down=pulled.lossless_down,
            migration_bytes=moved,
        )
        self.rows.append(row)
        if self.dynamic is not None:
            self.observe_traffic(p)
        self.progress.tick(t, env.now)
        return pull_comm + (pushed.sent - pushed.start)

    def push_all(
        self,
        p: int,
        t: int,
        vector: np.ndarray,
        compute: float,
        report: RoundReport | None,
        pull_comm: float,
    ) -> Generator[Any, Any, _Pushed]:
        """Step 3: encode per shard on the device and push each as its encode is done.

        The ratio is the one the controller set for step ``t`` (shared by all workers). Under
        a barrier the controller has seen every step before ``t - 1`` by now, and ``t - 1``
        too once every worker's pull of ``t`` is in (a step is observed with its next pull).
        """
        job, env = self.job, self.env
        w = job.workers[p]
        ratio = self.ratio(t)
        ctxs, payloads = encode_pushes(job, w, t, ratio, self.extra[p], vector)
        encode = [self.charges.worker_encode_s(w, s, pl, ctxs[s]) for s, pl in enumerate(payloads)]
        # The device: backward and the shards' encodes; pushes start as each is encoded.
        overlap = self.overlap and not self.rounds
        ready = [shard_ready(self.ready, k) for k in w.shard_keys] if overlap else []
        plan = step_timeline(env.now, compute, ready or [1.0] * len(payloads), encode, overlap)
        push_start = min(plan.push_start)
        self.feed.open_step(p, t, compute)
        if self.dynamic is not None:
            self.note_push(p, payloads, ctxs)
        pushes = [
            env.process(self.push(p, s, t, pl, ctxs[s], report, plan.push_start[s]))
            for s, pl in enumerate(payloads)
        ]
        done = yield env.all_of([*pushes, env.timeout(max(0.0, plan.device_end - env.now))])
        sent = max(done[proc] for proc in pushes)
        # The push's time beyond the device's: the communication left exposed.
        exposed = max(0.0, sent - plan.device_end)
        return _Pushed(ratio, payloads, plan.encode_s, push_start, sent, exposed)

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

    def pull(self, p: int, s: int, t: int, keys: Any = None) -> Generator[Any, Any, tuple]:
        """Worker ``p``'s pull of iteration ``t`` from shard ``s``: request, gate, answer.

        ``keys``: touched mode, the positions of the batch's keys in the shard's key list.
        Returns (time held at the gate, answer wire bytes, their remote part, staleness,
        Snappy-coded answer bytes, the request's payload, the device's decode seconds).
        """
        shard, machine = self.job.shards[s], int(self.job.shard_machine[s])
        d = self.delay.delay_s(t)
        # The request: header only, or (touched) the key list of the shard's touched keys.
        request = b"" if keys is None else pack_keys(keys, len(shard.keys))
        sent = self.env.now
        yield self.net.transfer(p, machine, len(request), d)
        # The controller sees the transfer only, not the wait behind the last push's serving.
        self.feed.transfer(p, t - 1, s, self.env.now - sent)
        landing = self._landing.get((p, s))
        if landing is not None and not landing.triggered:
            yield landing  # the request left behind the worker's last push: served after it
        arrived = self.env.now
        if not shard.may_serve(p, t):
            yield self.gates[s].wait(p, t, False)
        blocked = self.env.now - arrived  # held by the sync policy
        # The shard's server thread answers: after any aggregation in progress, and it takes
        # the time of encoding the answer (params, delta, touched; a broadcast is encoded once).
        thread = self.cpu[s]
        turn = thread.acquire()
        if turn is not None:
            yield turn
        staleness = shard.policy.staleness(p, shard.clocks)
        # The answer's context: step t at the ratio already in force (the last step's).
        # Step t's own ratio is fixed when the worker has all of its answers, so that
        # under a barrier the controller has seen every step before t.
        ctx = self.job.ctx(t, self.ratio(max(t - 1, 0)))
        answer = shard.pull(p, t, ctx, now=self.env.now, keys=keys)
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
        worker = self.job.workers[p]
        if keys is not None:  # touched: the values of exactly the requested keys
            worker.apply_touched(s, keys, shard.decode_touched(answer, keys))
            if self.dynamic is not None:
                self.note_keys(p, shard.keys[keys], len(request) + answer.wire_bytes)
        elif (vector := shard.decode_pull(answer, ctx)) is not None:
            worker.apply_answer(s, shard.pull_mode, vector)
            if self.dynamic is not None:
                self.traffic[p].append(chunk_traffic(shard.keys, vector, answer.wire_bytes))
        self.extra[p][s] = answer.extra
        decode = self.charges.answer_s(shard, answer, answer.ctx or ctx, encode=False)
        remote = nbytes if machine != p else 0
        return blocked, nbytes, remote, staleness, lossless, request, decode

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
        (:meth:`pull`). The shard's processing (decode, aggregation) is :meth:`serve_push`.
        """
        if at is not None and at > self.env.now:
            yield self.env.timeout(at - self.env.now)
        machine = int(self.job.shard_machine[s])
        nbytes = payload.wire_bytes + (REPORT_BYTES if report is not None else 0)
        start = self.env.now
        sent, arrival = self.net.send(p, machine, nbytes, self.delay.delay_s(t))
        self._serving += 1  # in flight: a checkpoint's drain waits until it is served
        landed = self._landing[(p, s)] = self.env.event()

        def land() -> Generator[Any, Any, None]:
            yield arrival
            # Network time only (DC2's signal); before the shard applies it: a released pull
            # sees it.
            self.feed.transfer(p, t, s, self.env.now - start)
            yield from self.serve_push(p, s, t, payload, ctx, report)
            landed.succeed()  # served: the request queued behind it is the server's next

        self.env.process(land())
        yield sent
        return self.env.now

    def serve_push(
        self,
        p: int,
        s: int,
        t: int,
        payload: Payload,
        ctx: CodecContext,
        report: RoundReport | None,
    ) -> Generator[Any, Any, None]:
        """The shard's server thread: decode the push into the sum, apply, encode a broadcast."""
        shard, thread = self.job.shards[s], self.cpu[s]
        turn = thread.acquire()
        if turn is not None:
            yield turn
        cost = self.charges.push_s(shard, payload, ctx)
        if cost:
            yield self.env.timeout(cost)
        applied = shard.push(p, t, payload, ctx, now=self.env.now, report=report)
        if applied and shard.policy.barrier and shard.pull_mode == "aggregate":
            cost = self.charges.broadcast_s(shard, t, ctx)
            if cost:
                yield self.env.timeout(cost)
        thread.release()
        if applied:
            self.gates[s].release(shard.may_serve)
            self._on_applied(t, self.job.spec.workers if shard.policy.barrier else 1)
        self._serving -= 1
        if self._serving == 0 and self._idle is not None:
            self._idle.succeed()
            self._idle = None

    def _on_applied(self, t: int, pushes: int) -> None:
        # The model "after iteration t" is evaluated once every shard has applied every worker's
        # push of iteration t (a barrier applies P pushes at once; async policies one by one).
        self.applied[t] = self.applied.get(t, 0) + pushes
        complete = self.job.spec.workers * len(self.job.shards)
        if self.applied[t] == complete and self.job.should_evaluate(t):
            ds = self.job.dataset
            self.evals[t] = self.job.model.evaluate(self.job.global_params(), ds.X_test, ds.y_test)
            if self.progress.enabled:
                loss, acc = self.evals[t]
                up, down = self.bytes_so_far()
                self.progress.evaluation(
                    t, sim_time=self.env.now, loss=loss, accuracy=acc, bytes_up=up, bytes_down=down
                )

    def records(self) -> list[IterationRecord]:
        """The records in (iteration, worker) order, with the evaluations of their iterations."""
        return to_records(self.rows, self.evals, "simulated")
