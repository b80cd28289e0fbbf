"""A dist worker's transport: its step's messages (:mod:`.wire`), timed on the wall clock.

:class:`DistTransport` is the dist backend's part of :class:`~psml_core.engine.loop.WorkerLoop`.
Per step it posts the answers' receives, sends a PULL to every shard (touched: with the key
list of the batch; adaptive controllers: with last step's figures to shard 0), decodes and
installs each ANSWER, and after the loop's compute sends one PUSH per shard. The time split is
sim's: ``compute_s`` the gradient (plus any injected delay), ``wait_s`` the longest time a pull
sat at a shard's sync gate (measured by the shard, sent in the answer's header), ``comm_s`` the
rest (encoding, transfers, decoding). Bytes per iteration: the codec bytes of the S pull
requests (none; touched: the key lists) and S pushes (up) and of the S answers (down), plus
their protocol bytes when ``options.count_header``.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from psml_core.codecs.base import CodecContext
from psml_core.codecs.kv import pack_keys
from psml_core.codecs.lossless import snappy_bytes
from psml_core.engine.job import Job
from psml_core.engine.loop import (
    Pulled,
    Pushed,
    Steps,
    Transport,
    WorkerLoop,
    done,
    run_blocking,
)
from psml_core.engine.server import Pull
from psml_core.engine.step import encode_pushes
from psml_core.engine.torchdist.answers import expect_answer, read_answer
from psml_core.engine.torchdist.inbox import DEPTH
from psml_core.engine.torchdist.protocol import (
    FIGURES,
    adaptive,
    grown,
    pull_header,
    push_header,
)
from psml_core.engine.torchdist.settings import DistOptions, Faults, Layout
from psml_core.engine.torchdist.wire import Header, Kind, ProtocolError, Wire
from psml_core.models.base import Matrix
from psml_core.sync.rounds import RoundReport

__all__ = ["DistTransport", "run_worker"]


def run_worker(
    job: Job, p: int, wire: Wire, layout: Layout, options: DistOptions, faults: Faults, t0: float
) -> list[dict[str, Any]]:
    """Worker ``p``'s iterations from wall-clock ``t0``; returns its rows (no test metrics).

    Args:
        job: The run.
        p: The worker.
        wire: This rank's gloo messages.
        layout: Which rank is which role.
        options: Accounting options (``count_header``).
        faults: Injected failures and delays.
        t0: The wall-clock origin (every rank's, after a barrier).
    """
    tr = DistTransport(job, p, wire, layout, options, faults, t0)
    rounds = job.shards[0].policy.rounds
    run_blocking(WorkerLoop(job.workers[p], tr, job.spec.workload.iterations, rounds).run())
    for s, c in enumerate(tr.push_capacity):
        # DEPTH DONEs close the shard's header slots for us (see .inbox); with a push receive
        # pre-posted, the first also completes it (an empty message).
        for i in range(DEPTH):
            wire.send(s, Header(Kind.DONE, p), prepost=c if i == 0 else 0)
    return tr.rows


def counted(hdr: Header, protocol: bool) -> int:
    """A message's counted bytes: its codec bytes, plus its protocol bytes if asked."""
    return hdr.codec_bytes + (hdr.protocol_bytes if protocol else 0)


class DistTransport(Transport):
    """Worker ``p``'s messages on its wire, and the state it carries from step to step.

    It takes :func:`run_worker`'s arguments.
    """

    def __init__(
        self,
        job: Job,
        p: int,
        wire: Wire,
        layout: Layout,
        options: DistOptions,
        faults: Faults,
        t0: float,
    ) -> None:
        self.job, self.p, self.wire, self.layout, self.faults = job, p, wire, layout, faults
        self.rank = layout.worker_rank(p)
        self.shards = job.shards
        n = len(self.shards)
        self.extra: list[dict[str, Any]] = [{} for _ in range(n)]
        self.remote = [int(m) != p for m in job.shard_machine]
        # The context of this worker's last push to each shard: a broadcast (aggregate mode) of
        # round t - 1 decodes with that round's context, which every pusher of the round shared.
        self.round_ctx: list[CodecContext | None] = [None] * n
        # Per shard, the pre-posted receives' capacities of its answers and of our pushes.
        self.capacity, self.push_capacity = [0] * n, [0] * n
        self.proto = options.count_header
        self.touched = self.shards[0].pull_mode == "touched"
        self.feed = adaptive(job.controller)
        self.lossless = job.spec.method.lossless == "snappy"
        self.figures = b""  # this worker's figures of its previous step, for shard 0
        self.ratio = job.controller.ratio(0) if not self.feed else 1.0
        self.rows: list[dict[str, Any]] = []
        # Wall-clock: origin, last instant measured, step start (= last end), pull, compute end.
        self.t0 = self.mark = self.start = self.pull_end = self.compute_end = t0

    def now(self) -> float:
        """Wall-clock seconds since the start, at the end of the last phase."""
        return self.mark - self.t0

    def begin(self, t: int, prev_comm: float) -> Steps:
        """An injected fault, then the step's ratio (from shard 0's answer when adaptive)."""
        self.faults.maybe_kill(self.rank, t)
        if not self.feed:
            self.ratio = self.job.controller.ratio(t)
        return done(None)

    def pull(self, t: int) -> Steps:
        """Request from every shard and install every answer (receives posted first)."""
        wire, shards = self.wire, self.shards
        answers = [wire.irecv_header(s) for s in range(len(shards))]
        pre = [wire.prepost(s, c) if c else None for s, c in enumerate(self.capacity)]
        # touched: the keys of the batch drawn now (compute uses it), as each shard's key list
        keys = self.job.workers[self.p].touched_keys() if self.touched else None
        requests, up, lossless_up = self.send_requests(t, keys)
        down, lossless_down, wait, staleness = [0] * len(shards), 0, 0.0, 0
        for s, inc in enumerate(answers):
            hdr = expect_answer(inc.wait(), self.p, t, s)
            answer = self.install(t, s, hdr, pre[s], keys[s] if keys is not None else None)
            down[s] = counted(hdr, self.proto)
            if self.lossless:
                packed = snappy_bytes(answer.payload) if answer.payload is not None else 0
                lossless_down += down[s] - max(hdr.payload_len, 0) + packed
            wait = max(wait, hdr.blocked_ns * 1e-9)
            staleness = max(staleness, hdr.staleness)
        for r in requests:
            r.wait()
        self.mark = self.pull_end = time.perf_counter()
        comm = self.pull_end - self.start - wait
        lossless = {"lossless_up": sum(up) + lossless_up, "lossless_down": lossless_down}
        pulled = Pulled(up, down, self.extra, wait, comm, staleness=staleness)
        return done(dataclasses.replace(pulled, **lossless) if self.lossless else pulled)

    def install(self, t: int, s: int, hdr: Header, pre: Any, keys: np.ndarray | None) -> Pull:
        """Receive shard ``s``'s answer of step ``t`` and decode it into the replica."""
        payload, state = self.wire.recv_parts(s, hdr, pre=pre)
        if self.wire.preposts:
            self.capacity[s] = grown(self.capacity[s], hdr)
        where = f"worker {self.p}: answer {t} from {self.layout.describe(s)}"
        shard, adaptive_ratio = self.shards[s], s == 0 and self.feed
        answer, ratio = read_answer(
            shard, self.touched, payload, state, hdr.state_codec, where, adaptive_ratio
        )
        if ratio is not None:
            self.ratio = ratio
        ctx = self.round_ctx[s] if shard.pull_mode == "aggregate" else None
        ctx = ctx or self.job.ctx(t, self.ratio)
        try:
            self.job.workers[self.p].install(s, shard, answer, ctx, keys)
        except ValueError as exc:  # a payload this shard cannot have encoded
            raise ProtocolError(f"{where}: {exc}") from exc
        self.extra[s] = answer.extra
        return answer

    def send_requests(self, t: int, keys: list[np.ndarray] | None) -> tuple[list, list[int], int]:
        """The PULLs of iteration ``t``: their handles, counted bytes, Snappy's change up."""
        requests, up, lossless_up = [], [], 0
        for s, c in enumerate(self.capacity):
            part = self.figures if s == 0 else b""
            klist = pack_keys(keys[s], len(self.shards[s].keys)) if keys is not None else None
            hdr = pull_header(self.p, t, klist, part, self.ratio, c)
            parts = [b"" if klist is None else klist, part] if part else ([klist] if klist else [])
            requests.append(self.wire.isend(s, hdr, parts))
            up.append(counted(hdr, self.proto))
            if self.lossless and klist:
                lossless_up += snappy_bytes(klist) - len(klist)
        return requests, up, lossless_up

    def step_cost(self, batch: Matrix) -> float:
        """An injected straggler delay (time is measured, so it costs 0 here)."""
        self.faults.delay(self.rank)
        return 0.0

    def computed(self, t: int, cost: float) -> float:
        """The measured compute time since the pull ended."""
        self.mark = self.compute_end = time.perf_counter()
        return self.compute_end - self.pull_end

    def push(self, t: int, vector: np.ndarray, compute: float, report: RoundReport | None) -> Steps:
        """One PUSH per shard, encoded under the contexts both ends know."""
        worker = self.job.workers[self.p]
        ctxs, payloads = encode_pushes(self.job, worker, t, self.ratio, self.extra, vector)
        self.round_ctx = list(ctxs)
        part = report.pack() if report is not None else b""
        pushes, up, lossless_up = [], [], 0
        for s, pl in enumerate(payloads):
            hdr = push_header(self.p, t, pl.wire_bytes, part, self.ratio)
            up.append(counted(hdr, self.proto))
            if self.lossless:
                lossless_up += up[s] - pl.wire_bytes + snappy_bytes(pl)
            parts = [pl.buffer, part] if part else [pl.buffer]
            pushes.append(self.wire.isend(s, hdr, parts, prepost=self.push_capacity[s]))
            if self.wire.preposts:
                self.push_capacity[s] = grown(self.push_capacity[s], hdr)
        for o in pushes:
            o.wait()
        self.mark = end = time.perf_counter()
        comm = end - self.compute_end
        lossless = lossless_up if self.lossless else None
        return done(
            Pushed(up=up, ratio=self.ratio, comm=comm, round_comm=comm, lossless_up=lossless)
        )

    def record(self, t: int, row: dict[str, Any]) -> None:
        """Keep the row; the next step starts where this one ended."""
        self.rows.append(row)
        if self.feed:
            self.figures = FIGURES.pack(row["comm_s"], row["compute_s"])
        self.start = self.mark

    def last_row(self) -> dict[str, Any]:
        """This worker's last row."""
        return self.rows[-1]
