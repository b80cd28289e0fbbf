"""A dist worker's iteration loop: the protocol of :mod:`psml_core.engine.step` over gloo.

Per iteration: post the answers' receives, send a PULL to every shard (touched: with the key
list of the batch; adaptive controllers: with last step's figures to shard 0), decode and
install each ANSWER, compute, and send one PUSH per shard. The time split is sim's:
``compute_s`` the gradient (plus any injected delay), ``wait_s`` the longest time a pull sat
at a shard's sync gate (measured by the shard, sent in the answer's header), ``comm_s`` the
rest (encoding, transfers, decoding). Bytes per iteration: the codec bytes of the S pull
requests (none; touched: the key lists) and S pushes (up) and of the S answers (down), plus
their protocol bytes when ``options.count_header``.
"""

from __future__ import annotations

import struct
import time
from typing import Any

import numpy as np

from psml_core.codecs.base import CodecContext, Payload
from psml_core.codecs.kv import pack_keys
from psml_core.codecs.lossless import snappy_bytes
from psml_core.engine.job import Job
from psml_core.engine.server import Pull
from psml_core.engine.step import (
    budget_spent,
    compute_step,
    encode_pushes,
    fold_final_pull,
    step_budget,
    step_row,
)
from psml_core.engine.torchdist.inbox import DEPTH
from psml_core.engine.torchdist.protocol import FIGURES, adaptive, answer_ratio, codec_name, grown
from psml_core.engine.torchdist.settings import DistOptions, Faults, Layout
from psml_core.engine.torchdist.state import decode_state
from psml_core.engine.torchdist.wire import Header, Kind, ProtocolError, Wire
from psml_core.sync.pcp import RoundReport

__all__ = ["run_worker"]


def _delayed(faults: Faults, rank: int) -> float:
    """One step's injected straggler delay (time is measured, so it costs 0 here)."""
    faults.delay(rank)
    return 0.0


def run_worker(
    job: Job, p: int, wire: Wire, layout: Layout, options: DistOptions, faults: Faults, t0: float
) -> list[dict[str, Any]]:
    """Worker ``p``'s iterations from wall-clock ``t0``; returns its rows (no test metrics)."""
    return _WorkerLoop(job, p, wire, layout, options, faults).run(t0)


class _WorkerLoop:
    """The state a dist worker carries from one iteration to the next."""

    def __init__(
        self, job: Job, p: int, wire: Wire, layout: Layout, options: DistOptions, faults: Faults
    ) -> None:
        self.job, self.p, self.wire, self.layout, self.faults = job, p, wire, layout, faults
        self.rank = layout.worker_rank(p)
        self.worker = job.workers[p]
        self.shards = job.shards
        n = len(self.shards)
        self.extra: list[dict[str, Any]] = [{} for _ in range(n)]
        self.remote = [int(m) != p for m in job.shard_machine]
        # The context of this worker's last push to each shard: a broadcast (aggregate mode) of
        # round t - 1 decodes with that round's context, which every pusher of the round shared.
        self.round_ctx: list[CodecContext | None] = [None] * n
        # Capacity of the pre-posted answer receive per shard (protocol.grown).
        self.capacity = [0] * n
        # The shard's pre-posted receive of our next push payload (protocol.grown: both ends
        # know it, so it needs no message).
        self.push_capacity = [0] * n
        self.proto = options.count_header
        self.rounds = self.shards[0].policy.rounds
        self.touched = self.shards[0].pull_mode == "touched"
        self.feed = adaptive(job.controller)
        self.lossless = job.spec.method.lossless == "snappy"
        self.figures = b""  # this worker's figures of its previous step, for shard 0
        self.ratio = job.controller.ratio(0) if not self.feed else 1.0

    def counted(self, hdr: Header) -> int:
        """A message's counted bytes: its codec bytes, plus its protocol bytes if asked."""
        return hdr.codec_bytes + (hdr.protocol_bytes if self.proto else 0)

    def run(self, t0: float) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        prev_comm = 0.0  # a round report carries the previous round's communication time
        start = t0  # an iteration starts where the previous one ended: the split is exact
        for t in range(self.job.spec.workload.iterations):
            self.faults.maybe_kill(self.rank, t)
            if not self.feed:
                self.ratio = self.job.controller.ratio(t)
            # 1. pull
            up, down, lossless_up, lossless_down, wait, staleness = self.pull(t)
            pull_end = time.perf_counter()
            if budget_spent(self.extra, self.rounds):
                # The merged model ends the run; its bytes and time join the last record.
                fold_final_pull(
                    rows[-1],
                    up=up,
                    down=down,
                    remote=self.remote,
                    end=pull_end - t0,
                    comm=pull_end - start - wait,
                    wait=wait,
                    lossless_up=sum(up) + lossless_up if self.lossless else None,
                    lossless_down=lossless_down if self.lossless else None,
                )
                break
            # 2. compute: one gradient, or a round's granted local steps
            steps = step_budget(self.extra, self.rounds)
            loss, vector, _ = compute_step(
                self.worker, steps, self.rounds, lambda _b: _delayed(self.faults, self.rank)
            )
            compute_end = time.perf_counter()
            report = None
            if self.rounds:
                report = RoundReport(steps, (compute_end - pull_end) / steps, prev_comm)
            # 3. push
            lossless_up += self.push(t, vector, report, up)
            end = time.perf_counter()
            compute = compute_end - pull_end
            comm = (pull_end - start - wait) + (end - compute_end)
            prev_comm = comm
            if self.feed:
                self.figures = FIGURES.pack(comm, compute)
            # 4. record
            rows.append(
                step_row(
                    iteration=t,
                    worker=self.p,
                    time_s=end - t0,
                    compute_s=compute,
                    comm_s=comm,
                    wait_s=wait,
                    up=up,
                    down=down,
                    remote=self.remote,
                    ratio=self.ratio,
                    staleness=staleness,
                    loss=loss,
                    local_steps=steps,
                    lossless_up=lossless_up if self.lossless else None,
                    lossless_down=lossless_down if self.lossless else None,
                )
            )
            start = end
        for s, c in enumerate(self.push_capacity):
            # DEPTH DONEs close the shard's header slots for us (see .inbox); with a push
            # receive pre-posted, the first also completes it (an empty message).
            for i in range(DEPTH):
                self.wire.send(s, Header(Kind.DONE, self.p), prepost=c if i == 0 else 0)
        return rows

    def pull(self, t: int) -> tuple[list[int], list[int], int, int, float, int]:
        """Step 1 of iteration ``t``: request from every shard, install every answer.

        Returns the bytes up and down per shard, the extra bytes Snappy would add or save up
        and down, the longest wait at a sync gate and the largest staleness.
        """
        wire, shards = self.wire, self.shards
        # Post the answers' receives first, so that no shard ever waits for us.
        answers = [wire.irecv_header(s) for s in range(len(shards))]
        pre = [wire.prepost(s, c) if c else None for s, c in enumerate(self.capacity)]
        # touched: the keys of the batch drawn now (compute uses it), as each shard's key list
        keys = self.worker.touched_keys() if self.touched else None
        requests, up, lossless_up = self.send_requests(t, keys)
        down = [0] * len(shards)
        lossless_down = 0
        wait = 0.0
        staleness = 0
        for s, inc in enumerate(answers):
            hdr = inc.wait()
            if hdr.kind != Kind.ANSWER or hdr.clock != t or hdr.worker != self.p:
                raise ProtocolError(
                    f"worker {self.p} expected its answer {t} from shard {s}, got {hdr}"
                )
            payload, state = wire.recv_parts(s, hdr, pre=pre[s])
            self.capacity[s] = grown(self.capacity[s], hdr)
            answer = self.install(t, s, hdr, payload, state, keys)
            down[s] = self.counted(hdr)
            if self.lossless:
                packed = snappy_bytes(answer.payload) if answer.payload is not None else 0
                lossless_down += down[s] - max(hdr.payload_len, 0) + packed
            wait = max(wait, hdr.blocked_ns * 1e-9)
            staleness = max(staleness, hdr.staleness)
        for r in requests:
            r.wait()
        return up, down, lossless_up, lossless_down, wait, staleness

    def send_requests(self, t: int, keys: list[np.ndarray] | None) -> tuple[list, list[int], int]:
        """The PULLs of iteration ``t``: their handles, counted bytes, Snappy's change up."""
        key_lists = (
            [pack_keys(k, len(sh.keys)) for k, sh in zip(keys, self.shards, strict=True)]
            if keys is not None
            else None
        )
        requests, up, lossless_up = [], [], 0
        for s, c in enumerate(self.capacity):
            part = self.figures if s == 0 else b""
            klist = key_lists[s] if key_lists is not None else None
            hdr = Header(
                Kind.PULL,
                self.p,
                t,
                payload_len=-1 if klist is None else len(klist),
                state_len=len(part),
                state_codec=len(part),
                ratio=self.ratio,
                prepost=c,
            )
            parts = [b"" if klist is None else klist, part] if part else ([klist] if klist else [])
            requests.append(self.wire.isend(s, hdr, parts))
            up.append(self.counted(hdr))
            if self.lossless and klist:
                lossless_up += snappy_bytes(klist) - len(klist)
        return requests, up, lossless_up

    def install(
        self,
        t: int,
        s: int,
        hdr: Header,
        payload: bytes | None,
        state: bytes,
        keys: list[np.ndarray] | None,
    ) -> Pull:
        """Decode shard ``s``'s answer of iteration ``t`` into the replica; returns it."""
        shard, worker, p = self.shards[s], self.worker, self.p
        name = codec_name(
            shard.codec_up
            if shard.pull_mode == "aggregate"
            else shard.kv
            if self.touched
            else shard.codec_down
        )
        where = f"worker {p}: answer {t} from {self.layout.describe(s)}"
        try:
            answer = Pull(
                Payload(name, len(shard.keys), payload) if payload is not None else None,  # type: ignore[arg-type]
                decode_state(state),
                hdr.state_codec,
            )
            if s == 0 and self.feed:
                self.ratio = answer_ratio(answer.extra)
        except (ProtocolError, ValueError, KeyError, TypeError, struct.error) as exc:
            raise ProtocolError(
                f"{where}: bad codec state ({len(state)} bytes): {type(exc).__name__}: {exc}"
            ) from exc
        ctx = self.round_ctx[s] if shard.pull_mode == "aggregate" else None
        # Decoding uses no shard state, so this rank's copy of the shard decodes it.
        if keys is not None:  # touched: the values of exactly the requested keys
            try:
                worker.apply_touched(s, keys[s], shard.decode_touched(answer, keys[s]))
            except ValueError as exc:
                raise ProtocolError(f"{where}: {exc}") from None
        else:
            try:
                vector = shard.decode_pull(answer, ctx or self.job.ctx(t, self.ratio))
            except ValueError as exc:  # the codecs reject a buffer they cannot have encoded
                size = "no" if payload is None else f"{len(payload)}-byte"
                raise ProtocolError(
                    f"{where}: {size} {name!r} payload for {len(shard.keys)} keys "
                    f"does not decode: {exc}"
                ) from exc
            if vector is not None:
                worker.apply_answer(s, shard.pull_mode, vector)
        self.extra[s] = answer.extra
        return answer

    def push(self, t: int, vector: np.ndarray, report: RoundReport | None, up: list[int]) -> int:
        """Step 3: one PUSH per shard; adds their bytes to ``up``, returns Snappy's change."""
        ctxs, payloads = encode_pushes(self.job, self.worker, t, self.ratio, self.extra, vector)
        self.round_ctx = list(ctxs)
        part = report.pack() if report is not None else b""
        pushes, lossless_up = [], 0
        for s, pl in enumerate(payloads):
            hdr = Header(
                Kind.PUSH,
                self.p,
                t,
                payload_len=pl.wire_bytes,
                state_len=len(part),
                state_codec=len(part),
                ratio=self.ratio,
            )
            up[s] += self.counted(hdr)
            if self.lossless:
                lossless_up += up[s] - pl.wire_bytes + snappy_bytes(pl)
            parts = [pl.buffer, part] if part else [pl.buffer]
            pushes.append(self.wire.isend(s, hdr, parts, prepost=self.push_capacity[s]))
            self.push_capacity[s] = grown(self.push_capacity[s], hdr)
        for o in pushes:
            o.wait()
        return lossless_up
