"""dist wire-layer goodput vs raw gloo send/recv of the same bytes, in the same run.

Two processes on loopback: rank 0 plays a worker, rank 1 a server shard.

* **push**: the worker sends a 64-byte header plus a ``bytes`` payload through
  :class:`~psml_core.engine.torchdist.wire.Wire`; the shard receives the header into one of the
  slots its :class:`~psml_core.engine.torchdist.inbox.Inbox` keeps posted for the worker, and the
  payload into the receive it pre-posted after the previous push, as the shard loop does.
* **pull**: the worker posts the answer's header and payload receives, sends a PULL request,
  the shard answers with header plus payload, the worker receives it: a full request/answer
  round trip, so one more one-way latency than a raw send.
* **raw**: ``dist.send`` / ``dist.recv`` of one preallocated uint8 tensor of the same size in the
  same direction: no header, no request, no allocation.

Each trial moves ``k`` messages (about 100 MB) between two barriers, the same framing for both;
trials of the two methods alternate. Goodput = payload bytes / median trial time; the ratio is
the median over adjacent (raw, wire) trial pairs of raw time / wire time (target >= 0.8), which
cancels most of the drift of a shared machine's load.

With ``--latency-ms D`` (root, network namespaces and TUN devices) it measures instead the time
of single messages across a link of one-way delay D (and ``--rate-mbit``), between two
namespaces joined by the validation's delay line: push and pull against raw gloo, whose
receive from any rank pays a rendezvous (see ``benchmarks/dist_latency.py``). Loopback's
20-us latency hides rendezvous costs; a link's does not.

Usage: python benchmarks/bench_dist.py [--sizes-mb 4,16,64,100] [--trials 41] [--json out.json]
       python benchmarks/bench_dist.py --latency-ms 2 [--rate-mbit 100] [--latency-trials 30]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import queue
import socket
import statistics
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

__all__ = ["main"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _raw(rank: int, buf: torch.Tensor, src: int, k: int) -> None:
    for _ in range(k):
        if rank == src:
            dist.send(buf, 1 - src)
        else:
            dist.recv(buf, src)


def _push(rank: int, wire: Wire, payload: bytes, k: int) -> None:
    # As the worker and shard loops do: the shard's inbox keeps two header slots posted for the
    # worker, and the shard posts the receive of the worker's next push payload as soon as it
    # has the current one, sized like the largest so far (both ends track it: protocol.grown).
    n = len(payload)
    for _ in range(k):
        hdr = Header(Kind.PUSH, 0, 0, payload_len=n)
        if rank == 0:
            wire.send(1, hdr, [payload], prepost=_STATE["capacity"])
        else:
            got, src = _STATE["inbox"].next()
            part, _ = wire.recv_parts(src, got, pre=_STATE.pop("pre", None))
            del part
        _STATE["capacity"] = grown(_STATE["capacity"], hdr)
        if rank == 1 and _STATE["capacity"]:
            _STATE["pre"] = wire.prepost(0, _STATE["capacity"])


def _pull(rank: int, wire: Wire, payload: bytes, k: int) -> None:
    # As the worker does: the answer's slot and payload receive are posted before the request.
    for _ in range(k):
        if rank == 0:
            answer = wire.irecv_header(1)
            cap = _CAPACITY.get(len(payload), 0)
            pre = wire.prepost(1, cap) if cap else None
            wire.send(1, Header(Kind.PULL, 0, 0, prepost=cap))
            hdr = answer.wait()
            part, _ = wire.recv_parts(1, hdr, pre=pre)
            _CAPACITY[len(payload)] = grown(cap, hdr)
            del part
        else:
            hdr, src = _STATE["inbox"].next()
            out = Header(Kind.ANSWER, 0, hdr.clock, payload_len=len(payload))
            wire.send(src, out, [payload], prepost=hdr.prepost)


def _close(rank: int, wire: Wire) -> None:
    """The worker's DONEs close the shard's slots (the first completes its push receive)."""
    if rank == 0:
        for i in range(DEPTH):
            wire.send(1, Header(Kind.DONE, 0), prepost=_STATE["capacity"] if i == 0 else 0)
        return
    inbox = _STATE["inbox"]
    while inbox.pending:
        hdr, src = inbox.next()
        wire.recv_parts(src, hdr, pre=_STATE.pop("pre", None))
    inbox.close()


_CAPACITY: dict[int, int] = {}
_STATE: dict[str, Any] = {"capacity": 0}  # the push path's state across calls, and the inbox


def _timed(fn: Any, *args: Any) -> float:
    dist.barrier()
    t0 = time.perf_counter()
    fn(*args)
    dist.barrier()
    return time.perf_counter() - t0


def _rank(rank: int, port: int, sizes: list[int], trials: int, out: Any) -> None:
    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
    wire = Wire(rank)
    if rank == 1:
        _STATE["inbox"] = Inbox(wire, [0])
    rows = []
    for n in sizes:
        k = max(2, (100 * 10**6) // n)
        # Real bytes on both paths: an all-zero ``bytes(n)`` maps the kernel's zero page, which
        # the socket copy reads from cache and which would flatter the wire path.
        payload = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8).tobytes()
        buf = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
        for direction, src, fn in (("push", 0, _push), ("pull", 1, _pull)):
            t_raw, t_wire = [], []
            _raw(rank, buf, src, 1)  # warm both paths (connections, pooled buffers)
            fn(rank, wire, payload, 1)
            for _ in range(trials):
                t_raw.append(_timed(_raw, rank, buf, src, k))
                t_wire.append(_timed(fn, rank, wire, payload, k))
            raw, wir = statistics.median(t_raw) / k, statistics.median(t_wire) / k
            # Adjacent trials share the machine's load of the moment: their ratio is robust.
            pairs = [r / w for r, w in zip(t_raw, t_wire, strict=True)]
            rows.append(
                {
                    "size_mb": n / 1e6,
                    "direction": direction,
                    "raw_GBps": n / raw / 1e9,
                    "wire_GBps": n / wir / 1e9,
                    "ratio": statistics.median(pairs),
                    "messages": k * trials,
                }
            )
    _close(rank, wire)
    dist.destroy_process_group()
    if rank == 0:
        out.put(rows)


def main() -> None:
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-mb", default="4,16,64,100")
    ap.add_argument("--trials", type=int, default=41)
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--latency-ms", type=float, help="per-message latency across this link")
    ap.add_argument("--rate-mbit", type=float, help="the link's rate (default: unshaped)")
    ap.add_argument("--latency-sizes", default="19240,1000000", help="message bytes")
    ap.add_argument("--latency-trials", type=int, default=30)
    args = ap.parse_args()
    if args.latency_ms:
        _latency(args)
        return
    sizes = [int(float(s) * 10**6) for s in args.sizes_mb.split(",")]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_rank, args=(r, port, sizes, args.trials, out)) for r in (0, 1)]
    for p in procs:
        p.start()
    while True:  # a crashed rank must not leave us waiting forever
        try:
            rows = out.get(timeout=1)
            break
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in procs):
                for p in procs:
                    p.kill()
                raise SystemExit("a benchmark rank failed (see above)") from None
    for p in procs:
        p.join()
    print("| size (MB) | direction | raw gloo (GB/s) | psml wire (GB/s) | wire / raw |")
    print("|---:|---|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['size_mb']:g} | {r['direction']} | {r['raw_GBps']:.2f} | "
            f"{r['wire_GBps']:.2f} | {r['ratio']:.2f} |"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=2)


def _latency(args: argparse.Namespace) -> None:
    from dist_latency import measure  # beside this script

    sizes = [int(s) for s in args.latency_sizes.split(",")]
    rows = measure(args.latency_ms, args.rate_mbit, sizes, args.latency_trials)
    rate = f"{args.rate_mbit:g} Mbit/s" if args.rate_mbit else "unshaped"
    print(f"one-way delay {args.latency_ms:g} ms, {rate}; latencies = (median - transfer) / delay")
    print("| bytes | path | median (ms) | min | max | latencies | messages |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['size']} | {r['path']} | {r['median_ms']:.2f} | {r['min_ms']:.2f} | "
            f"{r['max_ms']:.2f} | {r['latencies']:.2f} | {r['messages']} |"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
