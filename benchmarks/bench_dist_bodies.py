"""The dist backend's body transports, timed in one run: tagged gloo, gloo-ordered and NCCL.

One dist job (the smoke tier's digits MLP widened to ``--hidden`` units, so every dense push
and answer is a body message beyond the 64 KiB header slot; one shard, ``--workers`` workers)
runs once per transport (``PSML_DIST_BODIES``, :mod:`psml_core.engine.torchdist.bodies`), in
the same process, alternately ``--repeats`` times. It prints, per transport, the median
wall-clock iteration and communication time over the workers and iterations after the first
two, their ratio to tagged gloo's, and checks that every transport moved the same bytes.

``gloo-ordered`` is a checking transport (each body's size goes first and is checked), so its
time says what the check costs, not what NCCL would take. NCCL needs a GPU per rank: where
there are fewer GPUs than ranks (or none) its row says why it was not measured.

Usage: python benchmarks/bench_dist_bodies.py [--device cpu|cuda] [--hidden 4096]
       [--workers 2] [--iterations 20] [--repeats 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
from pathlib import Path

import torch

from psml_core.data.prepare import prepare_dataset
from psml_core.data.store import load_prepared
from psml_core.engine import staged_job
from psml_core.engine.torch_device import device_provenance, resolve_device
from psml_core.engine.torchdist import DistOptions
from psml_core.engine.torchdist.backend import DistBackend
from psml_core.engine.torchdist.bodies import Seat, why_not_nccl
from psml_core.recipes import load_experiment

REPO = Path(__file__).resolve().parents[1]


def _why_no_nccl(device: torch.device, ranks: int) -> str:
    """The dist backend's own rule, on the seats the local spawner gives the ranks."""
    gpus = torch.cuda.device_count() if device.type == "cuda" else 0
    seats = [Seat("local", f"cuda:{r % gpus}" if gpus else None) for r in range(ranks)]
    return why_not_nccl(seats, torch.distributed.is_nccl_available())


def _times(recs: list) -> tuple[float, float]:
    """Median iteration and communication wall-clock seconds, the first two iterations left out."""
    steps, comms = [], []
    for p in sorted({r.worker for r in recs}):
        mine = sorted((r for r in recs if r.worker == p), key=lambda r: r.iteration)
        for prev, r in zip(mine, mine[1:], strict=False):
            if r.iteration >= 2:
                steps.append(r.time_s - prev.time_s)
                comms.append(r.comm_s)
    return statistics.median(steps), statistics.median(comms)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    device = resolve_device(args.device)
    smoke = load_experiment({"tier": "smoke", "torch_device": args.device}, REPO / "config")
    run = smoke.run("digits_mlp", "dense_bsp", "dc_10g", smoke.seeds[0])
    wl = dataclasses.replace(
        run.workload, iterations=args.iterations, hidden=(args.hidden,), eval_every=args.iterations
    )
    spec = dataclasses.replace(
        run, workload=wl, workers=args.workers, shards=1, backend="dist", device=args.device
    )
    ranks = spec.workers + spec.shards
    why = _why_no_nccl(device, ranks)
    transports = ["gloo", "gloo-ordered"] + ([] if why else ["nccl"])
    print(f"device: {device_provenance(device)}")
    with tempfile.TemporaryDirectory() as tmp:
        prepare_dataset(smoke.datasets["digits"], Path(tmp) / "digits")
        ds = load_prepared(Path(tmp) / "digits")
        n_params = staged_job(spec, ds).model.n_params
        print(
            f"digits MLP 64-{args.hidden}-10 ({n_params:,} parameters, dense push "
            f"{4 * n_params:,} B), {spec.workers} workers + 1 shard, {args.iterations} "
            f"iterations, {args.repeats} repeats alternately"
        )
        seen: dict[str, list[tuple[float, float]]] = {t: [] for t in transports}
        moved: dict[str, list[tuple[int, int, int, int]]] = {}
        for _ in range(args.repeats):
            for t in transports:
                backend = DistBackend(DistOptions(bodies=t))
                recs = backend.run(staged_job(spec, ds))
                assert backend.result is not None and backend.result.bodies == t
                seen[t].append(_times(recs))
                moved[t] = [(r.iteration, r.worker, r.bytes_up, r.bytes_down) for r in recs]
    base_step = statistics.median(s for s, _ in seen["gloo"])
    base_comm = statistics.median(c for _, c in seen["gloo"])
    print("| body transport | iteration ms (median) | comm ms (median) | iteration / gloo |")
    print("|---|---|---|---|")
    for t in transports:
        step = statistics.median(s for s, _ in seen[t])
        comm = statistics.median(c for _, c in seen[t])
        print(f"| {t} | {step * 1e3:.2f} | {comm * 1e3:.2f} | {step / base_step:.2f}x |")
    if why:
        print(f"| nccl | not measured: {why} | | |")
    same = all(moved[t] == moved["gloo"] for t in transports)
    print(f"bytes per record identical across transports: {'yes' if same else 'NO'}")
    print(f"(gloo: comm {base_comm * 1e3:.2f} ms of {base_step * 1e3:.2f} ms per iteration)")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
