"""Batched against per-worker gradients: P replicas in one ``loss_grad_batch`` call.

For each model shape it times P = 16 replicas' losses and gradients computed one call per
replica (``Model.loss_grad``, the sim backend's path today) against one batched call
(``loss_grad_batch``: ``torch.func.vmap`` over the replicas), in adjacent trials of the same
run, and prints the median ratio per-worker / batched (above 1: batching is faster). One
intra-op thread, as the sim backend runs. ``--device cuda`` computes on the GPU (the
gradients come back to the host either way, as in the sim backend).

Usage: python benchmarks/bench_batch_grad.py [--workers 16] [--trials 15] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from psml_core.config import WorkloadSpec
from psml_core.engine.torch_device import device_provenance, resolve_device
from psml_core.models import make_model
from psml_core.models.base import Model

SHAPES = (
    # name, features, hidden, classes, batch
    ("digits MLP (small tier)", 64, (64,), 10, 32),
    ("MNIST-size MLP (784-128-64-10)", 784, (128, 64), 10, 64),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--trials", type=int, default=15)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    args = ap.parse_args()
    torch.set_num_threads(1)
    device = resolve_device(args.device)
    print(f"device: {device_provenance(device)}")
    rng = np.random.default_rng(0)
    print("| model | P | per-worker ms | batched ms | per-worker / batched |")
    print("|---|---|---|---|---|")
    for name, d, hidden, k, b in SHAPES:
        wl = WorkloadSpec(
            name="w", dataset="d", model="mlp", hidden=hidden, batch_size=b, lr=0.1, iterations=1
        )
        model = make_model(wl, d, k)
        p = args.workers
        # Initialised on the host, as build_job does, then moved: the same replicas anywhere.
        params = np.stack([model.init_params(s) for s in range(p)])
        model.to(device)
        Xs = [rng.standard_normal((b, d)).astype(np.float32) for _ in range(p)]
        ys = [rng.integers(0, k, b) for _ in range(p)]
        loop, batched, ratios = [], [], []
        for _ in range(args.trials):
            t0 = time.perf_counter()
            Model.loss_grad_batch(model, params, Xs, ys)
            t1 = time.perf_counter()
            model.loss_grad_batch(params, Xs, ys)
            t2 = time.perf_counter()
            loop.append(t1 - t0)
            batched.append(t2 - t1)
            ratios.append((t1 - t0) / (t2 - t1))
        print(
            f"| {name} | {p} | {statistics.median(loop) * 1e3:.2f} | "
            f"{statistics.median(batched) * 1e3:.2f} | {statistics.median(ratios):.1f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
