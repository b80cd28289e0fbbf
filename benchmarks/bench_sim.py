"""Simulator overhead and scale: the sim backend at 16, 64 and 256 workers (see README.md).

For each worker count P it runs dense BSP on one of the smoke tier's workloads (default: the
RCV1-calibrated sparse logistic regression; S = min(P, 16) colocated shards) and prints:

* simulated worker-iterations per wall-clock second (goal at 256 workers: at least 500);
* the wall-clock time spent outside the gradient computation (event loop, network model,
  encoding, server updates) over the gradient computation's own wall-clock time, measured in
  the same run (goals: at most 0.5x at 16 workers, at most 1x at 64);
* the part of that overhead which is the method's own work, run for real as a deployment
  runs it: the workers' encodes of their pushes and their replicas' updates from the answers,
  the shards' decodes and aggregation of the pushes with the server's optimizer step, their
  answers' encodes and the decodes of those answers (``Worker.encode_push``,
  ``apply_answer``, ``apply_touched``; ``ServerShard.push``, ``pull``, ``decode_pull``,
  ``decode_touched``; none calls another), over the gradient's time: what a simulator that
  runs the methods for real cannot go below. The rest is the simulator's own (event loop,
  network model, pricing, bookkeeping, and these timers, about 1%);
* what the event core did per worker-iteration: SimPy events scheduled, and fair-share
  recomputations (``FairShareNetwork._reschedule``), the two costs the overhead is made of.

``--rate-window 0`` runs the exact fluid network model instead of the scenario's rate window.

Usage: python benchmarks/bench_sim.py [--workers 16,64,256] [--iterations 5] [--batch 64]
       [--workload rcv1_logreg|digits_mlp] [--rate-window W]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import simpy
import torch

from psml_core.data.prepare import prepare_dataset
from psml_core.data.store import load_prepared
from psml_core.engine import SimBackend, staged_job
from psml_core.engine.server import ServerShard
from psml_core.engine.worker import Worker
from psml_core.net.fair_share import load_kernel
from psml_core.net.network import FairShareNetwork
from psml_core.recipes import load_experiment

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="16,64,256")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workload", default="rcv1_logreg", choices=["rcv1_logreg", "digits_mlp"])
    ap.add_argument("--rate-window", type=float, default=None, help="default: the scenario's")
    args = ap.parse_args()
    exp = load_experiment({"tier": "smoke"}, REPO / "config")
    base = exp.run(args.workload, "dense_bsp", "dc_10g", 0)
    # As `psml train` does (engine/training.py): torch's default of one thread per core makes a
    # tiny gradient wait on a busy machine, and the overhead ratio meaningless.
    torch.set_num_threads(base.compute.threads)
    if args.rate_window is not None:
        sc = dataclasses.replace(base.scenario, rate_window=args.rate_window)
        base = dataclasses.replace(base, scenario=sc)
    with tempfile.TemporaryDirectory() as tmp:
        prepare_dataset(exp.datasets[base.dataset.name], Path(tmp) / "d")
        ds = load_prepared(Path(tmp) / "d")
    spent, work, counts = _instrument()
    # Untimed warm-up: torch's first gradients and the lazy imports would land on the first row.
    warm = dataclasses.replace(base.workload, iterations=2, batch_size=args.batch)
    SimBackend().run(staged_job(dataclasses.replace(base, workers=4, shards=2, workload=warm), ds))
    t0 = time.perf_counter()
    load_kernel()  # a run with more than a few flows at once loads it on its first such instant
    print(f"Fair-share kernel (Numba) loaded in {time.perf_counter() - t0:.2f} s wall-clock, "
          "once per process, outside the rows.\n")  # fmt: skip
    print(
        "| workers | shards | worker-iterations | wall s | iterations/s | gradient s | "
        "overhead / gradient | of which codecs and servers | events / worker-it | "
        "rate recomputations / worker-it |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for p in (int(w) for w in args.workers.split(",")):
        wl = dataclasses.replace(base.workload, iterations=args.iterations, batch_size=args.batch)
        spec = dataclasses.replace(base, workers=p, shards=min(p, 16), workload=wl)
        job = staged_job(spec, ds)
        spent[0] = work[0] = 0.0
        counts.update(events=0, rates=0)
        t0 = time.perf_counter()
        recs = SimBackend().run(job)
        wall = time.perf_counter() - t0
        print(
            f"| {p} | {spec.shards} | {len(recs)} | {wall:.2f} | {len(recs) / wall:.1f} | "
            f"{spent[0]:.3f} | {(wall - spent[0]) / spent[0]:.1f}x | {work[0] / spent[0]:.1f}x | "
            f"{counts['events'] / len(recs):.0f} | {counts['rates'] / len(recs):.1f} |",
            flush=True,
        )


def _instrument() -> tuple[list[float], list[float], dict[str, int]]:
    """Time the gradient and the method's own work, count events and rate recomputations.

    Returns the seconds in ``Worker.compute``, the seconds in the method's work (see the module
    docstring) and the counts, each reset by the caller before a run.
    """
    spent, work = [0.0], [0.0]

    def timed(fn: Callable[..., Any], into: list[float]) -> Callable[..., Any]:
        def wrapper(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                into[0] += time.perf_counter() - t0

        return wrapper

    Worker.compute = timed(Worker.compute, spent)  # type: ignore[method-assign]
    for cls, names in (
        (Worker, ("encode_push", "apply_answer", "apply_touched")),
        (ServerShard, ("push", "pull", "decode_pull", "decode_touched")),
    ):
        for name in names:
            setattr(cls, name, timed(getattr(cls, name), work))
    # Counted by wrapping, not sampled: every event SimPy queues and every rate recomputation.
    counts = {"events": 0, "rates": 0}
    schedule, reschedule = simpy.Environment.schedule, FairShareNetwork._reschedule

    def counted_schedule(self: simpy.Environment, *a: object, **k: object) -> None:
        counts["events"] += 1
        schedule(self, *a, **k)  # type: ignore[arg-type]

    def counted_reschedule(self: FairShareNetwork) -> None:
        counts["rates"] += 1
        reschedule(self)

    simpy.Environment.schedule = counted_schedule  # type: ignore[method-assign]
    FairShareNetwork._reschedule = counted_reschedule  # type: ignore[method-assign]
    return spent, work, counts


if __name__ == "__main__":
    main()
