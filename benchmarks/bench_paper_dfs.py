"""The paper tier's DFS experiment on one machine: its projected wall time against the floor.

The paper tier's ``dfs`` experiment is ResNet-18 on CIFAR-10 at 16 workers, 3,000 iterations
per run, for 7 methods x 2 scenarios x 3 seeds. This benchmark runs a few iterations of each
method on the sim backend (``dc_10g``; the scenario changes the simulated clock, not the wall
time), on CIFAR-shaped synthetic images (the rate does not depend on the pixels), times one
evaluation of the test set, and projects the whole experiment's wall time on this machine:

    run   = 3,000 x (mean wall-clock iteration) + (evaluations per run) x (one evaluation)
    total = sum over the methods of run x 2 scenarios x 3 seeds

(one evaluation: CIFAR-10's 10,000 test images).

The mean iteration is taken after the first (a warm-up: allocations, kernels chosen), from the
wall clock at each iteration's last record (``Progress.tick``). In the same run it times the
floor under every method's rate, **one model's forward and backward pass on all P x B images
at once** (P = 16 workers, B = 32: the FLOPs of an iteration's gradients at the device's best
batch), and the P workers' gradients as the engine computes them outside a run (one replica
after another, and batched: ``Model.loss_grads``). Each method's row gives its mean iteration
over the floor.

Goals (issue 46), on one H100 or H200 (``--device cuda``): the projection at most 2 h, and the
DFS method's mean iteration at most 2.5x the floor. Each row also gives the engine's own
software per iteration, the same method run with vectors too small to cost anything
(:func:`software_s`): the part of the iteration no device shortens. On a GPU the run keeps its
vectors there (:mod:`psml_core.engine.device_state`) and computes a step's 16 gradients in one
batched pass (:mod:`psml_core.engine.sim.gradients`), as ``psml train`` does. ``--json FILE``
writes the rows and the totals (``scripts/gpu_check.sh`` prints them in its final table).

Usage: python benchmarks/bench_paper_dfs.py [--device cpu|cuda|auto] [--iterations 3]
       [--methods dfs,dense_bsp,...] [--rows 2000] [--workers P (a quick check only)]
       [--json FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from psml_core.data.prepare import prepare_dataset
from psml_core.data.store import load_prepared
from psml_core.engine import SimBackend, staged_job
from psml_core.engine.device_state import keep_on_device
from psml_core.engine.progress import NullProgress
from psml_core.engine.torch_device import device_provenance, resolve_device
from psml_core.models import resnet
from psml_core.recipes import load_experiment

REPO = Path(__file__).resolve().parents[1]
TEST_IMAGES = 10_000  # CIFAR-10's test_batch
GOAL_H = 2.0  # the projection on one H100 or H200
GOAL_FLOOR = 2.5  # DFS's mean iteration over the one-model floor


class IterationClock(NullProgress):
    """The wall clock at each iteration's last record (every worker's record of it in)."""

    def __init__(self, workers: int) -> None:
        super().__init__()
        self.workers, self.seen, self.at = workers, {}, {}

    def tick(self, iteration: int, sim_time: float | None = None) -> None:
        """One worker's record of ``iteration``."""
        self.seen[iteration] = self.seen.get(iteration, 0) + 1
        if self.seen[iteration] == self.workers:
            self.at[iteration] = time.perf_counter()

    def mean_iteration(self) -> float:
        """Mean wall seconds per iteration after the first (the first with one iteration)."""
        done = sorted(self.at)
        if len(done) < 2:
            return float("nan")
        return (self.at[done[-1]] - self.at[done[0]]) / (len(done) - 1)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def best_of(fn: Any, device: torch.device, repeats: int = 3) -> float:
    """Best wall seconds of ``fn()`` over ``repeats`` after one warm-up call."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best


def gradient_paths(spec: Any, ds: Any, device: torch.device) -> dict[str, float]:
    """Seconds of one iteration's P gradients by each path, and the one-model floor."""
    job = staged_job(spec, ds)
    job.model.to(device)
    keep_on_device(job, device)
    model, workers = job.model, job.workers
    batches = [w.X[w.next_batch()] for w in workers]
    labels = [w.y[w.next_batch()] for w in workers]
    params = [w.params for w in workers]
    X_all = np.concatenate([np.asarray(b) for b in batches])
    y_all = np.concatenate(labels)
    one = params[0]
    return {
        "floor": best_of(lambda: _one_pass(model, one, X_all, y_all), device),
        "per_replica": best_of(lambda: model.loss_grads(params, batches, labels), device),
        "batched": best_of(lambda: model.loss_grads(params, batches, labels, batched=True), device),
    }


def _one_pass(model: Any, params: Any, X: Any, y: Any) -> None:
    """One forward and backward pass on all rows: the FLOPs of an iteration, in one batch."""
    if isinstance(params, torch.Tensor):
        model.loss_grad_tensor(params, X, y)
    else:
        model.loss_grad(params, X, y)


def run_method(exp: Any, method: str, args: Any, ds: Any, device: torch.device) -> dict:
    """A few iterations of ``method``: its mean wall iteration and how its gradients went."""
    spec = exp.run("resnet18_cifar10", method, "dc_10g", exp.seeds[0])
    wl = dataclasses.replace(spec.workload, iterations=args.iterations, eval_every=10**9)
    spec = dataclasses.replace(spec, workload=wl, torch_device=args.device)
    if args.workers:
        spec = dataclasses.replace(spec, workers=args.workers, shards=args.workers)
    job = staged_job(spec, ds)
    job.model.to(device)
    reason = keep_on_device(job, device)
    clock = IterationClock(spec.workers)
    backend = SimBackend()
    t0 = time.perf_counter()
    backend.run(job, clock)
    wall = time.perf_counter() - t0
    g = backend.gradients
    return {
        "method": method,
        "iterations": args.iterations,
        "wall_s": wall,
        "mean_iteration_s": clock.mean_iteration(),
        "host_vectors": reason,
        "gradient_calls": None if g is None else len(g.sizes),
        "gradients_handed_over": None if g is None else g.hits,
        "predictions_missed": None if g is None else g.misses,
    }


def software_s(exp: Any, method: str, args: Any, ds: Any) -> float:
    """The engine's own software per iteration: ``method`` at width 4, its gradients free.

    The same run (16 workers, 16 shards, the method's codecs, servers and simulated network)
    with ResNet-18 at 4 channels (45k parameters, so every vector operation is nearly free)
    and each worker handed one precomputed gradient: what remains is the per-message and
    per-operation software, on the host, which no device makes faster. Vectors kept on the
    CPU's torch paths, as on a GPU.
    """
    spec = exp.run("resnet18_cifar10", method, "dc_10g", exp.seeds[0])
    wl = dataclasses.replace(spec.workload, iterations=6, eval_every=10**9)
    spec = dataclasses.replace(spec, workload=wl, torch_device="cpu")
    if args.workers:
        spec = dataclasses.replace(spec, workers=args.workers, shards=args.workers)
    real = resnet.ResNet18.__init__

    def narrow(self: Any, d: int, k: int, w: Any, width: int = 64, groups: int = 32) -> None:
        real(self, d, k, w, width=4, groups=2)

    resnet.ResNet18.__init__ = narrow  # type: ignore[method-assign]
    try:
        job = staged_job(spec, ds)
    finally:
        resnet.ResNet18.__init__ = real  # type: ignore[method-assign]
    keep_on_device(job, torch.device("cpu"), force=True)
    grad = torch.randn(job.model.n_params, generator=torch.Generator().manual_seed(0))
    given = 1.0, grad * 0.01
    job.model.loss_grads = lambda params, *_, **__: [(given[0], given[1].clone()) for _ in params]
    job.model.loss_grad_tensor = lambda *_: (given[0], given[1].clone())
    clock = IterationClock(spec.workers)
    SimBackend().run(job, clock)
    return clock.mean_iteration()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto", choices=["cpu", "cuda", "auto"])
    ap.add_argument("--iterations", type=int, default=3, help="per method; the first warms up")
    ap.add_argument("--methods", default=None, help="default: the experiment's")
    ap.add_argument("--rows", type=int, default=2000, help="synthetic images (20%% test)")
    ap.add_argument(
        "--workers", type=int, default=None, help="a quick check only: not the tier's 16"
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = ap.parse_args()
    args.iterations = max(args.iterations, 2)
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
    spec = exp.run("resnet18_cifar10", methods[0], "dc_10g", exp.seeds[0])
    if args.workers:
        spec = dataclasses.replace(spec, workers=args.workers, shards=args.workers)
    full = spec.workload
    eval_s, evals = _evaluation(spec, ds, device)
    paths = gradient_paths(spec, ds, device)
    floor = paths["floor"]
    print(
        f"one iteration's {spec.workers} x {full.batch_size} images, wall-clock ms: one model on "
        f"all at once (the floor) {1e3 * floor:.1f}; one replica after another "
        f"{1e3 * paths['per_replica']:.1f} ({paths['per_replica'] / floor:.2f}x); batched "
        f"{1e3 * paths['batched']:.1f} ({paths['batched'] / floor:.2f}x)"
    )
    print(
        "| method | iterations | mean iteration ms | x floor | software alone ms | "
        "projected run (min) | gradients |"
    )
    print("|---|---|---|---|---|---|---|")
    rows, total = [], 0.0
    for method in methods:
        row = run_method(exp, method, args, ds, device)
        it = row["mean_iteration_s"]
        row["x_floor"] = it / floor
        row["software_s"] = software_s(exp, method, args, ds)
        row["projected_run_s"] = full.iterations * it + evals * eval_s
        total += row["projected_run_s"] * runs_per_method
        how = (
            "one at a time"
            if row["gradient_calls"] is None
            else f"{row['gradient_calls']} calls, {row['gradients_handed_over']} handed over"
        )
        if row["host_vectors"]:
            how += f"; host vectors: {row['host_vectors']}"
        print(
            f"| {method} | {row['iterations']} | {1e3 * it:.1f} | {row['x_floor']:.2f} | "
            f"{1e3 * row['software_s']:.1f} | {row['projected_run_s'] / 60:.1f} | {how} |",
            flush=True,
        )
        rows.append(row)
    print(
        f"\none evaluation of {TEST_IMAGES} images: {eval_s:.1f} s ({evals} per run); "
        f"{len(methods)} methods x {runs_per_method} runs (scenarios x seeds) of "
        f"{full.iterations} iterations: projected {total / 3600:.2f} h on this machine "
        f"(goals on one H100 or H200: at most {GOAL_H:g} h; DFS within {GOAL_FLOOR:g}x the floor)"
    )
    if args.json is not None:
        out = {
            "device": device_provenance(device),
            "workers": spec.workers,
            "batch": full.batch_size,
            "gradient_paths_s": paths,
            "evaluation_s": eval_s,
            "methods": rows,
            "projected_h": total / 3600,
            "goal_h": GOAL_H,
            "goal_x_floor": GOAL_FLOOR,
        }
        args.json.write_text(json.dumps(out, indent=1, default=str))


def _evaluation(spec: Any, ds: Any, device: torch.device) -> tuple[float, int]:
    """One 10,000-image evaluation's seconds (scaled from the synthetic test set), per run."""
    job = staged_job(spec, ds)
    job.model.to(device)
    params = job.global_params()
    job.model.evaluate(params, ds.X_test[:64], ds.y_test[:64])  # warm-up
    _sync(device)
    t0 = time.perf_counter()
    job.model.evaluate(params, ds.X_test, ds.y_test)
    _sync(device)
    eval_s = (time.perf_counter() - t0) * TEST_IMAGES / len(ds.y_test)
    wl = spec.workload
    return eval_s, -(-wl.iterations // wl.eval_every)  # after every eval_every-th and the last


if __name__ == "__main__":
    main()
