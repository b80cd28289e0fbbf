"""The paper tier's DFS experiment on one machine: simulated iterations per wall-clock second.

The paper tier's ``dfs`` experiment is ResNet-18 on CIFAR-10 at 16 workers, 3,000 iterations
per run, for 7 methods x 2 scenarios x 3 seeds. This benchmark runs a few iterations of each
method on the sim backend (``dc_10g``; the scenario changes the simulated clock, not the wall
time), on CIFAR-shaped synthetic images (the rate does not depend on the pixels), times one
evaluation of the test set, and projects the whole experiment's wall time on this machine:

    run   = 3,000 / (iterations per second) + (evaluations per run) x (one 10,000-image evaluation)
    total = sum over the methods of run x 2 scenarios x 3 seeds

Goal (issue 16): at most 60 minutes on one H100 (``--device cuda``). The projection assumes the
runs go one after another on the one device. On a GPU the run keeps its vectors there
(:mod:`psml_core.engine.device_state`: gradients, codecs, aggregation; only payloads cross to
the host), as ``psml train`` does. It also times the P workers' gradients alone (one
iteration's compute, no codec, no simulation), the floor under every method's rate.

Usage: python benchmarks/bench_paper_dfs.py [--device cpu|cuda|auto] [--iterations 3]
       [--methods dfs,dense_bsp,...] [--rows 2000] [--workers P (a quick check only)]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import torch

from psml_core.data.prepare import prepare_dataset
from psml_core.data.store import load_prepared
from psml_core.engine import SimBackend, staged_job
from psml_core.engine.device_state import keep_on_device
from psml_core.engine.torch_device import device_provenance, resolve_device
from psml_core.recipes import load_experiment

REPO = Path(__file__).resolve().parents[1]
TEST_IMAGES = 10_000  # CIFAR-10's test_batch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto", choices=["cpu", "cuda", "auto"])
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--methods", default=None, help="default: the experiment's")
    ap.add_argument("--rows", type=int, default=2000, help="synthetic images (20%% test)")
    ap.add_argument(
        "--workers", type=int, default=None, help="a quick check only: not the tier's 16"
    )
    args = ap.parse_args()
    device = resolve_device(args.device)
    data = {"cifar10": {"source": "synthetic_images", "rows": args.rows}}
    exp = load_experiment({"tier": "paper", "datasets": data}, REPO / "config")
    grid = exp.experiments["dfs"]
    methods = args.methods.split(",") if args.methods else list(grid.methods)
    runs_per_method = len(grid.scenarios) * len(exp.seeds)
    with tempfile.TemporaryDirectory() as tmp:
        prepare_dataset(exp.datasets["cifar10"], Path(tmp) / "d")
        ds = load_prepared(Path(tmp) / "d")
    print(f"device: {device_provenance(device)}; torch threads: {torch.get_num_threads()}")
    print(
        "| method | iterations | wall s | iterations/s | worker-iterations/s | "
        "projected run (min) |"
    )
    print("|---|---|---|---|---|---|")
    total = 0.0
    for i, method in enumerate(methods):
        spec = exp.run("resnet18_cifar10", method, "dc_10g", exp.seeds[0])
        full = spec.workload
        # One evaluation, after the last iteration (timed below and taken off the run's time).
        wl = dataclasses.replace(full, iterations=args.iterations, eval_every=args.iterations)
        spec = dataclasses.replace(spec, workload=wl, device=args.device)
        if args.workers:
            spec = dataclasses.replace(spec, workers=args.workers, shards=args.workers)
        job = staged_job(spec, ds)
        job.model.to(device)
        reason = keep_on_device(job, device)
        if reason is not None:
            print(f"{method}: vectors on the host: {reason}")
        if i == 0:  # one evaluation, scaled to CIFAR-10's test set
            params = job.global_params()
            job.model.evaluate(params, ds.X_test[:64], ds.y_test[:64])  # warm-up
            t0 = time.perf_counter()
            job.model.evaluate(params, ds.X_test, ds.y_test)
            eval_test = time.perf_counter() - t0
            eval_s = eval_test * TEST_IMAGES / len(ds.y_test)
            evals = -(-full.iterations // full.eval_every)  # after every eval_every-th and the last
            grad_s = _gradients_alone(spec, ds, device)
        t0 = time.perf_counter()
        SimBackend().run(job)
        wall = time.perf_counter() - t0 - eval_test
        rate = args.iterations / wall
        run_s = full.iterations / rate + evals * eval_s
        total += run_s * runs_per_method
        print(
            f"| {method} | {args.iterations} | {wall:.1f} | {rate:.3f} | "
            f"{rate * spec.workers:.2f} | {run_s / 60:.1f} |",
            flush=True,
        )
    floor = grad_s * full.iterations * runs_per_method * len(methods)
    print(
        f"\nthe {spec.workers} workers' gradients alone: {grad_s:.3f} s per iteration "
        f"({spec.workers / grad_s:.1f} worker-iterations/s): {floor / 3600:.2f} h of the "
        "projection below at the least"
    )
    print(
        f"one evaluation of {TEST_IMAGES} images: {eval_s:.1f} s ({evals} per run); "
        f"{len(methods)} methods x {runs_per_method} runs (scenarios x seeds) of "
        f"{full.iterations} iterations: projected {total / 3600:.2f} h on this machine "
        f"(goal on one H100: at most 1 h)"
    )


def _gradients_alone(spec: object, ds: object, device: torch.device) -> float:
    """Seconds of one iteration's P gradients (no codec, no simulation), best of 3."""
    job = staged_job(spec, ds)  # type: ignore[arg-type]
    job.model.to(device)
    keep_on_device(job, device)
    best = float("inf")
    for _ in range(4):  # the first is a warm-up
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        for w in job.workers:
            w.compute()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - t0)
    return best


if __name__ == "__main__":
    main()
