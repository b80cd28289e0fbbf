"""dist wire-layer goodput vs raw gloo send/recv of the same bytes, in the same run.

Two processes on loopback: rank 0 plays a worker, rank 1 a server shard.

* **push**: the worker sends a 64-byte header plus a ``bytes`` payload through
  :class:`~psml_core.engine.torchdist.wire.Wire`; the shard receives the header from *any* rank
  into a receive posted before the header was sent, and the payload into the receive it
  pre-posted after the previous push, as the shard loop does.
* **pull**: the worker posts the answer's header and payload receives, sends a PULL request,
  the shard answers with header plus payload, the worker receives it: a full request/answer
  round trip, so one more one-way latency than a raw send.
* **raw**: ``dist.send`` / ``dist.recv`` of one preallocated uint8 tensor of the same size in the
  same direction: no header, no request, no allocation.

Each trial moves ``k`` messages (about 100 MB) between two barriers, the same framing for both;
trials of the two methods alternate. Goodput = payload bytes / median trial time; the ratio is
the median over adjacent (raw, wire) trial pairs of raw time / wire time (target >= 0.8), which
cancels most of the drift of a shared machine's load.

Usage: python benchmarks/bench_dist.py [--sizes-mb 4,16,64,100] [--trials 41] [--json out.json]
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

from psml_core.engine.torchdist.wire import Header, Kind, Wire

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
    # As the worker and shard loops do: the shard keeps a header receive from any rank posted,
    # re-posting it as soon as a push's header is in, and posts the receive of the worker's
    # next push payload as soon as it has the current one, sized like the largest so far (both
    # ends know it). ``_drain_push`` completes both before the size changes, as DONE does.
    n = len(payload)
    for _ in range(k):
        if rank == 0:
            cap = _PUSH.pop("capacity", 0)
            wire.send(1, Header(Kind.PUSH, 0, 0, payload_len=n), [payload], prepost=cap)
            _PUSH["capacity"] = n
        else:
            incoming = _PUSH.pop("incoming", None) or wire.irecv_header(None)
            hdr, src = incoming.wait_from()
            _PUSH["incoming"] = wire.irecv_header(None)
            part, _ = wire.recv_parts(src, hdr, pre=_PUSH.pop("pre", None))
            _PUSH["pre"] = wire.prepost(src, hdr.payload_len)
            del part


def _drain_push(rank: int, wire: Wire) -> None:
    if rank == 0:
        wire.send(1, Header(Kind.DONE, 0), prepost=_PUSH.pop("capacity", 0))
    else:
        hdr, src = _PUSH.pop("incoming").wait_from()
        wire.recv_parts(src, hdr, pre=_PUSH.pop("pre", None))


def _pull(rank: int, wire: Wire, payload: bytes, k: int) -> None:
    # As the worker does: the answer's payload receive is pre-posted, sized like the last one.
    for _ in range(k):
        if rank == 0:
            answer = wire.irecv_header(1)
            cap = _CAPACITY.get(len(payload), 0)
            pre = wire.prepost(1, cap) if cap else None
            wire.send(1, Header(Kind.PULL, 0, 0, prepost=cap))
            hdr = answer.wait()
            part, _ = wire.recv_parts(1, hdr, pre=pre)
            _CAPACITY[len(payload)] = hdr.payload_len
            del part
        else:
            hdr, src = wire.recv_header()
            out = Header(Kind.ANSWER, 0, hdr.clock, payload_len=len(payload))
            wire.send(src, out, [payload], prepost=hdr.prepost)


_CAPACITY: dict[int, int] = {}
_PUSH: dict[str, Any] = {}  # the push path's posted receives and capacity, across calls


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
            if direction == "push":
                _drain_push(rank, wire)
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
    dist.destroy_process_group()
    if rank == 0:
        out.put(rows)


def main() -> None:
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-mb", default="4,16,64,100")
    ap.add_argument("--trials", type=int, default=41)
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
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


if __name__ == "__main__":
    main()
