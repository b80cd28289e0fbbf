"""A shard rank's serving loop: the dist backend's driver of the shard's service.

The protocol per iteration is every backend's (:mod:`psml_core.engine.loop`): a pull
request to every shard, answered once ``ServerShard.may_serve`` allows; compute; one push per
shard. :class:`~psml_core.engine.shard_service.ShardService` holds and releases the pulls and
builds the answers, :class:`~psml_core.engine.server.ServerShard` does the math; this module
only moves their messages and measures wall-clock time. The worker's side is
:mod:`psml_core.engine.torchdist.transport`. Messages come in through an
:class:`~psml_core.engine.torchdist.inbox.Inbox`: header slots posted per peer (its workers and,
on shard 0, the other shards), so no message waits for gloo's rendezvous; each peer closes its
slots with DONE messages, and the loop ends when every slot has been served.

Evaluation. When a shard has applied every worker's push of an iteration that
``Job.should_evaluate`` selects, it snapshots its values and sends them to rank 0 (shard 0),
which assembles the global model and evaluates it in a background thread, so serving is not
held up (:mod:`psml_core.engine.evaluations`). Under BSP the snapshots are exactly the model
after that round (as in sim); under ASP/SSP each shard's part is taken when *that* shard
completes the iteration — every part contains every push of the iteration, possibly a few
later ones (sim takes all parts at the one instant the last shard completes).

Touched pulls (``pull: touched``, PS-lite's sparse pull). The worker draws its mini-batch
before the pull; each PULL carries, as its payload part, the key list of that shard's keys the
batch touches (:func:`~psml_core.codecs.kv.pack_keys`, 8 B per key plus a 4-byte CRC-32C,
counted up); the shard answers with those keys' values as kv entries (12 B each plus the
payload's 4-byte CRC-32C, counted down). The optional state part (the controller figures)
travels beside it unchanged.

Round policies (PCP). A push carries the worker's 12-byte round report as its state part; shard
0's answer carries the granted local steps (``Pull.extra``), exactly as in sim.

Adaptive controllers (DC2). Shard 0 runs the controller: each PULL of step t carries the
worker's figures of step t - 1 (communication and compute seconds, two float32 as its state
part), shard 0 feeds every step whose P figures are in, in step order, and fixes step t's ratio
the first time it answers a pull of step t, sending it with the answer (4 bytes). All workers
push step t at that ratio; the shards take it from the PUSH header. Unlike sim, the figures of
step t - 1 may still be incomplete then (the last pusher's pull request may be in flight), so
the ratio can lag one more step: wall-clock control, not a replay of sim.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from psml_core.codecs.base import CodecContext, Payload
from psml_core.codecs.kv import unpack_keys
from psml_core.control.feed import ControllerFeed
from psml_core.engine.evaluations import BackgroundEvaluations, EvalCollector
from psml_core.engine.job import Job
from psml_core.engine.progress import NO_PROGRESS, Progress
from psml_core.engine.server import codec_state
from psml_core.engine.shard_service import DoneMsg, PullMsg, PushMsg, ShardService
from psml_core.engine.torchdist.inbox import DEPTH, Inbox
from psml_core.engine.torchdist.protocol import FIGURES, adaptive, codec_name, grown
from psml_core.engine.torchdist.settings import Faults, Layout
from psml_core.engine.torchdist.state import encode_state
from psml_core.engine.torchdist.wire import (
    Header,
    Kind,
    Outgoing,
    Prepost,
    ProtocolError,
    Wire,
)
from psml_core.sync.rounds import RoundReport

__all__ = ["ShardLoop", "eval_points"]


def eval_points(job: Job) -> list[int]:
    """The iterations after which the global model is evaluated."""
    return [t for t in range(job.spec.workload.iterations) if job.should_evaluate(t)]


@dataclass
class _Request:
    """What the loop keeps of a pull the service holds (``PullMsg.token``)."""

    ratio: float
    arrived: float
    prepost: int


class ShardLoop:
    """Serve one shard until every worker is done (and, on rank 0, every snapshot is in).

    Args:
        job: The job (this rank uses ``job.shards[s]``).
        s: Shard index (= rank).
        wire: This rank's wire.
        layout: The rank layout.
        faults: Fault injection.
        progress: Rank 0's progress reporter.
        inbox: Builds the inbox of the given peers (tests script it).
    """

    def __init__(
        self,
        job: Job,
        s: int,
        wire: Wire,
        layout: Layout,
        faults: Faults,
        progress: Progress | None = None,
        inbox: Callable[[Wire, list[int]], Inbox] = Inbox,
    ) -> None:
        self.job, self.s, self.wire, self.layout, self.faults = job, s, wire, layout, faults
        self.progress = progress or NO_PROGRESS  # rank 0's reporter
        self.make_inbox = inbox
        self.shard = job.shards[s]
        self.workers = job.spec.workers
        self.service = ShardService(self.shard)
        self.last_extra: list[dict[str, Any]] = [{} for _ in range(self.workers)]
        # Round policies end at their step budget, after a number of rounds known only then:
        # their evaluated rounds are added as the shard applies them (see _push).
        rounds = self.shard.policy.rounds
        self.evaluate: set[int] = set() if rounds else set(eval_points(job))
        self.outgoing: list[Outgoing] = []
        # Pre-posted receives of each worker's next push payload (see the wire module), and
        # their capacity: the largest payload that worker pushed here so far.
        self.push_pre: dict[int, Prepost] = {}
        self.push_capacity = [0] * self.workers
        self.snap_pre: dict[int, Prepost] = {}  # shard 0: each shard's next snapshot
        # The pushes a barrier (or round) policy holds until its round is complete, decoded
        # only then: kept here too, so that a payload that does not decode names its sender.
        self.held: dict[int, dict[int, tuple[Payload, CodecContext, int]]] = {}
        self.holds = self.shard.policy.barrier or self.shard.policy.rounds
        # Shard 0 assembles the shards' snapshots and evaluates them off the serving thread.
        self.evaluations = (
            BackgroundEvaluations(job, self.progress, self._traffic) if s == 0 else None
        )
        self.collector = EvalCollector(job, self.evaluations) if self.evaluations else None
        self.feed = (
            ControllerFeed(job.controller, self.workers)
            if s == 0 and adaptive(job.controller)
            else None
        )

    def run(self) -> None:
        """The serving loop: until every peer has closed its header slots (see :mod:`.inbox`)."""
        inbox = self.open_inbox()
        try:
            while inbox.pending:
                hdr, src = inbox.next()
                self._serve(hdr, src)
                self.outgoing = [o for o in self.outgoing if not o.reap()]
        finally:
            inbox.close()
        for o in self.outgoing:
            o.wait()
        if self.s != 0:  # close our slots at shard 0; the first DONE completes a snapshot receive
            for i in range(DEPTH):
                prepost = self.snapshot_capacity(self.s) if i == 0 else 0
                self.wire.send(0, Header(Kind.DONE, self.s), prepost=prepost)
        if held := self.service.held:
            pulls = [(m.worker, m.clock) for m in held]
            raise ProtocolError(f"shard {self.s} ends with unanswered pulls (worker, step) {pulls}")
        if self.collector is not None and self.collector.parts:
            missing = sorted(self.collector.parts)
            raise ProtocolError(f"shard 0 ends without every shard's values of {missing}")

    def _traffic(self) -> tuple[int, int]:
        """Shard 0's bytes so far: received in pulls and pushes, sent in answers."""
        received = self.wire.stats.received
        up = sum(received.get(k.name, [0, 0, 0])[1] for k in (Kind.PULL, Kind.PUSH))
        return up, self.wire.stats.bytes_sent([Kind.ANSWER])

    def open_inbox(self) -> Inbox:
        """Post the header slots of every peer, and the first pre-posted receives."""
        workers = [self.layout.worker_rank(w) for w in range(self.workers)]
        shards = list(range(1, len(self.job.shards))) if self.s == 0 else []
        for r in shards:
            if cap := self.snapshot_capacity(r):
                self.snap_pre[r] = self.wire.prepost(r, cap)
        return self.make_inbox(self.wire, workers + shards)

    def snapshot_capacity(self, shard: int) -> int:
        """The pre-posted receive of a snapshot of ``shard``: its size, 0 if it is inline.

        Always 0 where the wire does not pre-post (a pair-ordered link, :mod:`.bodies`).
        """
        size = 4 * len(self.job.shards[shard].keys)
        inline = Header(Kind.SNAPSHOT, payload_len=size).inline[0]
        return 0 if inline or not self.wire.preposts else size

    def _serve(self, hdr: Header, src: int) -> None:
        """One incoming message."""
        self._check_origin(hdr, src)
        if hdr.kind == Kind.PULL:
            self._pull(hdr, src)
        elif hdr.kind == Kind.PUSH:
            self.faults.maybe_kill(self.s, hdr.clock)
            self._push(hdr, src)
        elif hdr.kind == Kind.DONE and not self.layout.is_shard(src):
            # A worker's first DONE completes our pre-posted receive of its next push, if any.
            self.wire.recv_parts(src, hdr, pre=self.push_pre.pop(hdr.worker, None))
            self.service.done(DoneMsg(hdr.worker))
        elif hdr.kind == Kind.DONE and self.collector is not None:
            self.wire.recv_parts(src, hdr, pre=self.snap_pre.pop(src, None))
        elif hdr.kind == Kind.SNAPSHOT and self.collector is not None:
            part, _ = self.wire.recv_parts(src, hdr, pre=self.snap_pre.pop(src, None))
            if cap := self.snapshot_capacity(src):
                self.snap_pre[src] = self.wire.prepost(src, cap)
            assert part is not None  # _check_origin: the payload is the shard's values
            self.collector.add(hdr.clock, hdr.worker, np.frombuffer(part, "<f4").copy())
        else:
            raise ProtocolError(f"shard {self.s} got an unexpected {hdr} from rank {src}")

    def _pull(self, hdr: Header, src: int) -> None:
        keys = None
        if hdr.state_len or hdr.payload_len >= 0:
            request, figures = self.wire.recv_parts(src, hdr)
            keys = self._requested(hdr, request)
            if hdr.state_len:  # the worker's figures of its previous step (controller)
                if len(figures) != FIGURES.size:
                    raise ProtocolError(
                        f"shard {self.s}: pull {hdr.clock} from "
                        f"{self.layout.describe(src)} has {len(figures)} bytes of "
                        f"figures, not {FIGURES.size}"
                    )
                if self.feed is not None:
                    self.feed.report(hdr.worker, hdr.clock - 1, *FIGURES.unpack(figures))
        if keys is None and self.shard.pull_mode == "touched":
            raise ProtocolError(f"a touched pull without its key list from rank {src}")
        msg = PullMsg(hdr.worker, hdr.clock, keys)
        msg.token = _Request(hdr.ratio, time.perf_counter(), hdr.prepost)
        if self.service.pull(msg):
            self._answer(msg, blocked=0.0)

    def _check_origin(self, hdr: Header, src: int) -> None:
        """A message must come from the rank it names, for an iteration of the run.

        The header's worker index and clock select server state (the worker's last published
        codec state, its clock under the sync policy): a wrong one, from a bug or a mismatched
        peer, would corrupt it quietly, so it is a ProtocolError naming the sender.
        """
        who = self.layout.describe(src) if 0 <= src < self.layout.world_size else f"rank {src}"
        iterations = self.job.spec.workload.iterations
        if hdr.kind == Kind.DONE and self.collector is not None and self.layout.is_shard(src):
            if hdr.worker != src:  # another shard closes its slots at shard 0
                raise ProtocolError(f"shard 0: a DONE for shard {hdr.worker} from {who}")
        elif hdr.kind in (Kind.PULL, Kind.PUSH, Kind.DONE):
            if not 0 <= hdr.worker < self.workers or self.layout.worker_rank(hdr.worker) != src:
                raise ProtocolError(
                    f"shard {self.s}: a {hdr.kind.name} for worker {hdr.worker} from {who}"
                )
            if hdr.kind != Kind.DONE and not 0 <= hdr.clock < iterations:
                raise ProtocolError(
                    f"shard {self.s}: a {hdr.kind.name} of iteration {hdr.clock} from {who}; "
                    f"the run has iterations 0..{iterations - 1}"
                )
        elif hdr.kind == Kind.SNAPSHOT and self.collector is not None:
            size = 4 * len(self.job.shards[src].keys) if 0 < src < len(self.job.shards) else -1
            # A round policy's last round is evaluated too (the shard may not know it yet).
            known = hdr.clock in self.evaluate or (
                self.shard.policy.rounds and 0 <= hdr.clock < self.job.spec.workload.iterations
            )
            if hdr.worker != src or not known or hdr.payload_len != size:
                raise ProtocolError(
                    f"shard {self.s}: a bad SNAPSHOT from {who} (shard {hdr.worker}, "
                    f"iteration {hdr.clock}, {hdr.payload_len} bytes; expected {size} bytes "
                    f"of shard {src}'s values after an evaluated iteration)"
                )

    def _requested(self, hdr: Header, request: memoryview | None) -> np.ndarray | None:
        """The key list a touched pull carries (None: no payload part)."""
        if request is None:
            return None
        if self.shard.pull_mode != "touched":
            raise ProtocolError(
                f"a {self.shard.pull_mode} pull with a {len(request)}-byte payload from worker "
                f"{hdr.worker}"
            )
        try:
            return unpack_keys(request, len(self.shard.keys))
        except ValueError as exc:
            raise ProtocolError(f"pull {hdr.clock} of worker {hdr.worker}: {exc}") from None

    def _push(self, hdr: Header, src: int) -> None:
        w = hdr.worker
        payload, state = self.wire.recv_parts(src, hdr, pre=self.push_pre.pop(w, None))
        # Post the receive of w's next push now, sized like its largest so far (the worker
        # tracks the same number): its payload then flows as soon as it is sent.
        if self.wire.preposts:
            self.push_capacity[w] = grown(self.push_capacity[w], hdr)
        if self.push_capacity[w] > 0:
            self.push_pre[w] = self.wire.prepost(src, self.push_capacity[w])
        if payload is None:
            raise ProtocolError(f"shard {self.s}: a push without a payload from rank {src}")
        t = hdr.clock
        report = None
        if self.shard.policy.rounds:
            try:
                report = RoundReport.unpack(state)
            except ValueError as exc:
                raise ProtocolError(f"shard {self.s}: push {t} from rank {src}: {exc}") from None
        pl = Payload(codec_name(self.shard.codec_up), len(self.shard.keys), payload)  # type: ignore[arg-type]
        # Both ends build the same context: the step, the ratio, the state last sent to w.
        ctx = self.job.ctx(t, hdr.ratio, codec_state(self.last_extra[w]))
        held = self.held.setdefault(t, {}) if self.holds else {}
        held[w] = (pl, ctx, src)
        msg = PushMsg(w, t, pl, ctx, time.perf_counter(), report)
        try:
            applied = self.service.push(msg)
        except ValueError as exc:  # the codecs reject a buffer they cannot have encoded
            raise self._bad_push(t, held, exc) from exc
        if not applied:
            return
        self.held.pop(t, None)
        settled = self.service.settle(msg)
        if settled.completed is not None:
            self.progress.tick(t)
            if self.shard.policy.rounds and self.job.should_evaluate(t):
                # Every shard applies the same rounds (same reports, same budgets), so every
                # shard snapshots the same ones.
                self.evaluate.add(t)
            if t in self.evaluate:
                self._snapshot(t)
        now = time.perf_counter()
        for pull in settled.released:
            self._answer(pull, blocked=now - pull.token.arrived)

    def _bad_push(
        self, t: int, held: dict[int, tuple[Payload, CodecContext, int]], exc: ValueError
    ) -> ProtocolError:
        """The error for pushes of iteration ``t`` the shard could not apply: who sent what.

        A barrier decodes a round's pushes together once the last one is in, so the push that
        failed is found by decoding each held one alone (only on this error path).
        """
        codec, n = self.shard.codec_up, len(self.shard.keys)
        for w, (pl, ctx, src) in sorted(held.items()):
            try:
                codec.decode(pl, ctx)
            except ValueError as own:
                return ProtocolError(
                    f"shard {self.s}: push {t} of worker {w} from {self.layout.describe(src)} "
                    f"is no valid {pl.codec!r} payload for {n} keys ({len(pl.buffer)} bytes): "
                    f"{own}"
                )
        senders = ", ".join(self.layout.describe(src) for _pl, _ctx, src in held.values())
        return ProtocolError(
            f"shard {self.s}: the pushes of iteration {t} from {senders} do not apply: {exc}"
        )

    def _answer(self, msg: PullMsg, blocked: float) -> None:
        w, t, req = msg.worker, msg.clock, msg.token
        ctx = self.job.ctx(t, req.ratio)
        # Shard 0 runs an adaptive controller: the step's ratio travels with its answer.
        ratio = self.feed.ratio(t) if self.feed is not None else None
        answer = self.service.answer(msg, ctx, now=time.perf_counter(), ratio=ratio)
        pull, staleness = answer.pull, answer.staleness
        state = encode_state(pull.extra)
        self.last_extra[w] = pull.extra
        parts: list[Any] = [pull.payload.buffer if pull.payload else b"", state]
        hdr = Header(
            Kind.ANSWER,
            worker=w,
            clock=t,
            payload_len=pull.payload.wire_bytes if pull.payload else -1,
            state_len=len(state),
            state_codec=min(pull.extra_bytes, len(state)),
            staleness=staleness,
            blocked_ns=int(blocked * 1e9),
        )
        dst = self.layout.worker_rank(w)
        self.outgoing.append(self.wire.isend(dst, hdr, parts, prepost=req.prepost))

    def _snapshot(self, t: int) -> None:
        values = self.shard.values.copy()
        if self.collector is not None:
            self.collector.add(t, self.s, values)
            return
        hdr = Header(Kind.SNAPSHOT, worker=self.s, clock=t, payload_len=values.nbytes)
        part = memoryview(values).cast("B")
        prepost = self.snapshot_capacity(self.s)
        self.outgoing.append(self.wire.isend(0, hdr, [part], prepost=prepost))
