"""Simulator overhead and scale: the sim backend at 16, 64 and 256 workers (see README.md).

For each worker count P it runs dense BSP on the smoke tier's RCV1-calibrated sparse logistic
regression (S = min(P, 16) colocated shards) and prints:

* simulated worker-iterations per wall-clock second;
* the wall-clock time spent outside the gradient computation (event loop, network model,
  encoding, server updates) as a fraction of the gradient computation's own wall-clock time,
  measured in the same run (target: at most 10%).

Usage: python benchmarks/bench_sim.py [--workers 16,64,256] [--iterations 5] [--batch 64]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

from psml_core.config import load_experiment
from psml_core.data.prepare import prepare_dataset
from psml_core.data.store import load_prepared
from psml_core.engine import SimBackend, build_job
from psml_core.engine.worker import Worker

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="16,64,256")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    exp = load_experiment({"tier": "smoke"}, REPO / "config")
    with tempfile.TemporaryDirectory() as tmp:
        prepare_dataset(exp.datasets["zipf_rcv1"], Path(tmp) / "d")
        ds = load_prepared(Path(tmp) / "d")
    base = exp.run("rcv1_logreg", "dense_bsp", "dc_10g", 0)
    original = Worker.compute
    spent = [0.0]

    def timed_compute(self: Worker) -> tuple[float, object]:
        t0 = time.perf_counter()
        out = original(self)
        spent[0] += time.perf_counter() - t0
        return out

    Worker.compute = timed_compute  # type: ignore[method-assign]
    print(
        "| workers | shards | worker-iterations | wall s | iterations/s | gradient s | "
        "overhead / gradient |"
    )
    print("|---|---|---|---|---|---|---|")
    for p in (int(w) for w in args.workers.split(",")):
        wl = dataclasses.replace(base.workload, iterations=args.iterations, batch_size=args.batch)
        spec = dataclasses.replace(base, workers=p, shards=min(p, 16), workload=wl)
        job = build_job(spec, ds)
        spent[0] = 0.0
        t0 = time.perf_counter()
        recs = SimBackend().run(job)
        wall = time.perf_counter() - t0
        print(
            f"| {p} | {spec.shards} | {len(recs)} | {wall:.2f} | {len(recs) / wall:.1f} | "
            f"{spent[0]:.3f} | {(wall - spent[0]) / spent[0]:.1f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
