"""Per-message latency of the dist wire across a shaped link (``bench_dist.py --latency-ms``).

Two namespaces joined by the delay line (:mod:`psml_core.validate.netns`); rank 0 plays a
worker, rank 1 a server shard. Each path sends one message at a time, spaced so that none
overlaps the next, and times it on the host's one CLOCK_MONOTONIC (both namespaces share it):

* ``push``: the worker sends a PUSH through :class:`~psml_core.engine.torchdist.wire.Wire`;
  the shard receives it through its :class:`~psml_core.engine.torchdist.inbox.Inbox`, as the
  shard loop does. Time: send to payload in hand, one way;
* ``pull``: the worker posts the answer's slot (and pre-posted payload receive), sends a PULL,
  the shard answers with the payload. Time: request sent to answer in hand, a round trip;
* ``raw_named`` / ``raw_any``: plain ``dist.send`` into a receive posted in advance from rank 0,
  or from any rank (gloo's rendezvous), one way.

Ideal: push and raw_named one latency plus the transfer, pull two latencies plus the transfer.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from psml_core.engine.torchdist.header import Header, Kind
from psml_core.engine.torchdist.inbox import DEPTH, Inbox
from psml_core.engine.torchdist.protocol import grown
from psml_core.engine.torchdist.wire import Wire

__all__ = ["PATHS", "measure"]

PATHS = ("push", "pull", "raw_named", "raw_any")
PORT = 29600
TCP_EFFICIENCY = 1448 / 1500  # TCP/IPv4 payload per 1500-byte packet (tbf counts IP bytes)


def _now() -> int:
    return time.monotonic_ns()


class _Rank:
    """One side of the benchmark; ``stamps[(size, path)]`` are its nanosecond readings."""

    def __init__(self, rank: int, gap_s: float) -> None:
        self.rank, self.gap_s = rank, gap_s
        self.wire = Wire(rank)
        self.inbox = Inbox(self.wire, [0]) if rank == 1 else None
        self.push_cap = 0  # both ends track the shard's pre-posted push receive
        self.push_pre: Any = None
        self.pull_cap = 0
        self.stamps: dict[str, list[int]] = {}

    def push(self, payload: bytes) -> int:
        hdr = Header(Kind.PUSH, 0, 0, payload_len=len(payload), ratio=1.0)
        if self.rank == 0:
            time.sleep(self.gap_s)
            t0 = _now()
            self.wire.send(1, hdr, [payload], prepost=self.push_cap)
            self.push_cap = grown(self.push_cap, hdr)
            return t0
        assert self.inbox is not None
        got, _ = self.inbox.next()
        part, _ = self.wire.recv_parts(0, got, pre=self.push_pre)
        t1 = _now()
        self.push_cap = grown(self.push_cap, got)
        self.push_pre = self.wire.prepost(0, self.push_cap) if self.push_cap else None
        assert part is not None and len(part) == len(payload)
        return t1

    def pull(self, payload: bytes) -> int:
        if self.rank == 0:
            time.sleep(self.gap_s)
            answer = self.wire.irecv_header(1)
            pre = self.wire.prepost(1, self.pull_cap) if self.pull_cap else None
            t0 = _now()
            self.wire.send(1, Header(Kind.PULL, 0, 0, prepost=self.pull_cap))
            hdr = answer.wait()
            part, _ = self.wire.recv_parts(1, hdr, pre=pre)
            t1 = _now()
            self.pull_cap = grown(self.pull_cap, hdr)
            assert part is not None and len(part) == len(payload)
            return t1 - t0
        assert self.inbox is not None
        req, _ = self.inbox.next()
        out = Header(Kind.ANSWER, 0, req.clock, payload_len=len(payload))
        self.wire.send(0, out, [payload], prepost=req.prepost)
        return 0

    def raw(self, buf: torch.Tensor, any_source: bool) -> int:
        if self.rank == 0:
            time.sleep(self.gap_s)
            t0 = _now()
            dist.send(buf, 1, tag=7)
            return t0
        work = dist.irecv(buf, src=None if any_source else 0, tag=7)
        work.wait()
        return _now()

    def close(self) -> None:
        if self.rank == 0:
            for i in range(DEPTH):
                self.wire.send(1, Header(Kind.DONE, 0), prepost=self.push_cap if i == 0 else 0)
            return
        assert self.inbox is not None
        while self.inbox.pending:
            hdr, _ = self.inbox.next()
            self.wire.recv_parts(0, hdr, pre=self.push_pre)
            self.push_pre = None
        self.inbox.close()


def rank_main(rank: int, sizes: list[int], trials: int, gap_s: float) -> None:
    """One rank inside its namespace: the measurements, as JSON on standard output."""
    torch.set_num_threads(1)
    store = dist.TCPStore("10.77.0.1", PORT, 2, rank == 0, timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
    me = _Rank(rank, gap_s)
    for n in sizes:
        payload = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8).tobytes()
        buf = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
        for path in PATHS:
            dist.barrier()
            stamps = []
            for _ in range(trials + 2):  # two warm-up messages: connections, capacities
                if path in ("push", "pull"):
                    stamps.append(getattr(me, path)(payload))
                else:
                    stamps.append(me.raw(buf, any_source=path == "raw_any"))
            me.stamps[f"{n}/{path}"] = stamps[2:]
    me.close()
    dist.barrier()
    dist.destroy_process_group()
    print(json.dumps(me.stamps), flush=True)


def measure(
    latency_ms: float, rate_mbit: float | None, sizes: list[int], trials: int
) -> list[dict[str, Any]]:
    """Build the two-namespace testbed, run both ranks in it, return one row per size and path."""
    from psml_core.validate.netns import Link, Testbed, preflight

    why = preflight()
    if why is not None:
        raise SystemExit(f"bench_dist --latency-ms: {why}")
    link = Link(rate_mbit, latency_ms * 1000)
    gap_s = 3 * latency_ms / 1000 + 0.005
    argv = [sys.executable, os.path.abspath(__file__), "--sizes", ",".join(map(str, sizes))]
    argv += ["--trials", str(trials), "--gap-s", str(gap_s)]
    with Testbed(2, link, max_seconds=1800) as tb:
        # The ranks run under SCHED_FIFO, as psml validate's: the host's other load must not
        # delay their wake-ups by a scheduler slice (milliseconds on a busy 2-vCPU machine).
        procs = [
            tb.popen(
                r,
                ["chrt", "-f", "5", *argv, "--rank", str(r)],
                stdout=subprocess.PIPE,
                env={**os.environ, "GLOO_SOCKET_IFNAME": tb.nodes[r].ifname},
            )
            for r in (0, 1)
        ]
        outs = [p.communicate(timeout=1800)[0] for p in procs]
        if any(p.returncode for p in procs):
            raise SystemExit("a latency benchmark rank failed (see above)")
    worker, shard = (json.loads(o.decode().strip().splitlines()[-1]) for o in outs)
    rows = []
    for n in sizes:
        transfer_ms = n / (rate_mbit * 1e6 / 8 * TCP_EFFICIENCY) * 1e3 if rate_mbit else 0.0
        for path in PATHS:
            key = f"{n}/{path}"
            if path == "pull":
                ms = np.array(worker[key]) / 1e6
            else:
                ms = (np.array(shard[key]) - np.array(worker[key])) / 1e6
            rows.append(
                {
                    "size": n,
                    "path": path,
                    "median_ms": float(np.median(ms)),
                    "min_ms": float(ms.min()),
                    "max_ms": float(ms.max()),
                    "latencies": float((np.median(ms) - transfer_ms) / latency_ms),
                    "messages": len(ms),
                }
            )
    print(f"delay line: {tb.report}", file=sys.stderr)
    return rows


def main() -> None:
    """The rank entry point (internal; ``bench_dist.py --latency-ms`` starts it)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--sizes", required=True)
    ap.add_argument("--trials", type=int, required=True)
    ap.add_argument("--gap-s", type=float, required=True)
    args = ap.parse_args()
    rank_main(args.rank, [int(s) for s in args.sizes.split(",")], args.trials, args.gap_s)


if __name__ == "__main__":
    main()
