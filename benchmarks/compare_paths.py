"""The sim paths the smoke tier does not take, dumped for a comparison of two checkouts.

``compare_cores.py`` re-runs a finished tier's train jobs, and the smoke tier has no
checkpointed run and no key moves. This script runs those paths under the checkout on
``PYTHONPATH`` and writes every record as JSON: checkpointed runs (a drain every 3 steps) of
dense BSP and ASP on both smoke workloads, each run again from its last checkpoint (a resumed
run), and JPDC's dynamic placement forced to move every chunk to the next shard at each
decision step (as ``tests/unit/engine/test_engine_migration.py`` does). It also runs
``bench_sim.py``'s scale (64 and 256 workers, 16 shards), where hundreds of flows share the
links at once and the network model takes its compiled max-min kernel, which the smoke tier's
few flows never reach: dense BSP on RCV1 with the scenario's rate window and with the exact
fluid model, ASP and DFS on RCV1, top-k on the digits MLP, dense BSP at 256 workers. Two
checkouts agree when the files are byte-identical.

Usage (one copy of this script and its ``config/`` for both; ``PYTHONPATH`` picks the
``psml_core`` that runs):
    PYTHONPATH=SRC_A python benchmarks/compare_paths.py a.json
    PYTHONPATH=SRC_B python benchmarks/compare_paths.py b.json
    cmp a.json b.json
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from psml_core.config import BlockSpec
from psml_core.data.prepare import prepare_dataset
from psml_core.data.store import load_prepared
from psml_core.engine import SimBackend, staged_job
from psml_core.net import network
from psml_core.net.fair_share import _FEW_FLOWS as FEW_FLOWS
from psml_core.placement import DynamicChunkPartition, Reassignment
from psml_core.recipes import load_experiment, load_methods

REPO = Path(__file__).resolve().parents[1]


def _rotate(self: DynamicChunkPartition, step: int) -> Reassignment | None:
    """Every chunk moves to the next shard at each decision step (forces the migration path)."""
    if step <= 0 or step % self.period:
        return None
    new = ((self.chunk_owner + 1) % self.shards).astype(np.int32)
    moved = np.flatnonzero(new != self.chunk_owner)
    self.chunk_owner = new
    size = int(4 * self.chunk_sizes[moved].sum())
    return Reassignment(step, new.copy(), self.key_owner, moved, size, 0.0)


def _at_scale(exp: Any) -> list[tuple[str, Any, bool]]:
    """bench_sim's scale: 64 and 256 workers on 16 shards, 6 iterations of batch 64."""
    cases = []
    for wl, method, workers, window in (
        ("rcv1_logreg", "dense_bsp", 64, None),
        ("rcv1_logreg", "dense_bsp", 64, 0.0),
        ("rcv1_logreg", "dense_asp", 64, None),
        ("rcv1_logreg", "dfs", 64, None),
        ("digits_mlp", "topk_ef", 64, 0.0),
        ("digits_mlp", "dense_bsp", 256, None),
    ):
        run = exp.run(wl, method, "dc_10g", 0)
        if window is not None:
            run = dataclasses.replace(
                run, scenario=dataclasses.replace(run.scenario, rate_window=window)
            )
        workload = dataclasses.replace(run.workload, iterations=6, batch_size=64)
        spec = dataclasses.replace(run, workers=workers, shards=16, workload=workload)
        cases.append((f"{wl}/{method}/workers={workers}/rate_window={window}", spec, False))
    return cases


def _count_many_flows() -> list[int]:
    """Count the network's fair-share calls with more flows than the Python path takes."""
    many = [0]
    inner = network.two_link_rates

    def counted(src: np.ndarray, *args: Any) -> np.ndarray:
        many[0] += src.size > FEW_FLOWS
        return inner(src, *args)

    network.two_link_rates = counted  # type: ignore[assignment]
    return many


def main() -> None:
    torch.set_num_threads(1)
    DynamicChunkPartition.maybe_reassign = _rotate  # type: ignore[method-assign]
    exp = load_experiment({"tier": "smoke"}, REPO / "config")
    cases: list[tuple[str, Any, bool]] = []
    for wl in ("digits_mlp", "rcv1_logreg"):
        for method in ("dense_bsp", "dense_asp"):
            run = exp.run(wl, method, "dc_10g", 0)
            workload = dataclasses.replace(run.workload, iterations=10)
            spec = dataclasses.replace(run, checkpoint_every=3, workload=workload)
            cases.append((f"{wl}/{method}/checkpoint_every=3", spec, True))
    run = exp.run("digits_mlp", "dense_bsp", "dc_10g", 0)
    base = load_methods()["jpdc_dynamic"]
    placement = BlockSpec("dynamic", {**base.placement.params, "chunk": 256, "period": 3})
    method = dataclasses.replace(base, placement=placement)
    workload = dataclasses.replace(run.workload, iterations=10)
    spec = dataclasses.replace(run, workload=workload, workers=4, shards=4, method=method)
    cases.append(("digits_mlp/jpdc_dynamic/rotating", spec, False))
    cases += _at_scale(exp)
    out: dict[str, list[dict[str, Any]]] = {}
    many = _count_many_flows()
    with tempfile.TemporaryDirectory() as tmp:
        data: dict[str, Any] = {}
        for name, spec, checkpointed in cases:
            ds = spec.dataset.name
            if ds not in data:
                prepare_dataset(exp.datasets[ds], Path(tmp) / ds)
                data[ds] = load_prepared(Path(tmp) / ds)
            ckpt = Path(tmp) / f"{len(out)}.ckpt" if checkpointed else None
            recs = SimBackend(checkpoint=ckpt).run(staged_job(spec, data[ds]))
            out[name] = [dataclasses.asdict(r) for r in recs]
            moved = sum(r.migration_bytes for r in recs)
            print(f"{name}: {len(recs)} records, {moved} bytes moved, {many[0]} fair-share "
                  f"calls above {FEW_FLOWS} flows")  # fmt: skip
            many[0] = 0
            if ckpt is not None:  # again, resumed from the run's last checkpoint
                backend = SimBackend(checkpoint=ckpt)
                again = backend.run(staged_job(spec, data[ds]))
                out[f"{name}/resumed"] = [dataclasses.asdict(r) for r in again]
                print(f"{name}/resumed from {backend.resumed_at}: {len(again)} records, "
                      f"{many[0]} fair-share calls above {FEW_FLOWS} flows")  # fmt: skip
                many[0] = 0
    Path(sys.argv[1]).write_text(json.dumps(out, sort_keys=True, default=repr))


if __name__ == "__main__":
    main()
