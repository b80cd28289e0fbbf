"""What a training job asks a cluster for: its threads, and memory sized from the run.

A SLURM job that asks for too little memory is killed; one that asks for much too much waits
longer in the queue and holds memory others could use. Every train job used to reserve 4 CPUs
and 16 GB, while the tiers run torch on one thread and a smoke run peaked at 236 MB. The
workflow's train rule now asks for:

* **threads**: ``compute.threads`` per process (torch's thread pool, one by default), so
  ``--cpus-per-task`` is what the run uses; a dist job has P + S such tasks (its backend's
  descriptor counts a run's processes, :class:`~psml_core.backend_info.BackendInfo`).
* **memory**: the peak the job itself reached when it last ran (Snakemake's benchmark file
  records ``max_rss``), with a margin, or else :func:`estimate_mb`, a model fitted to measured
  peaks (``benchmarks/bench_memory.py`` re-measures it): a fixed part per process, the data
  set twice over, and per parameter of the model, a part per worker replica and a part for the
  shards and the global model. A retried job (Snakemake's ``attempt``) asks for that much more.

Measured on the 2-vCPU VM (torch 2.13 CPU, digits MLP, 6 iterations), peak RSS of ``psml
train``: 341 MB (4 workers, 4,810 parameters), 344 MB (32 workers, 4,810), 432 MB (4 workers,
596,490), 821 MB (32 workers, 596,490), 1,301 MB (16 workers, 2,241,546). The fit, 341 MB +
params x (23.3 B x workers + 60 B), predicts the last point within 1 %.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from psml_core.capabilities import backend_info
from psml_core.config import RunSpec

__all__ = [
    "BASE_MB",
    "MARGIN",
    "PER_PARAM_BYTES",
    "PER_REPLICA_PARAM_BYTES",
    "estimate_mb",
    "measured_mb",
    "train_mem_mb",
]

BASE_MB = 341.0
"""One process: Python, torch, NumPy and psml imported, the run's records (measured)."""
PER_REPLICA_PARAM_BYTES = 23.3
"""Per worker and model parameter: the replica, its gradient, codec residuals (measured)."""
PER_PARAM_BYTES = 60.0
"""Per model parameter, once: shard values and optimizer state, the global model (measured)."""
DATA_COPIES = 2.0
"""The prepared data set's bytes are held about twice (the arrays and a split's copy)."""
MARGIN = 1.3
"""Asked for over a measured or estimated peak (allocator slack, a busier node)."""
FLOOR_MB = 500
"""Never less than this."""


def processes(spec: RunSpec) -> int:
    """Processes of the job, as its backend's descriptor counts them (sim 1, dist P + S)."""
    return backend_info(spec.backend).processes(spec.workers, spec.shards)


def estimate_mb(spec: RunSpec, n_params: int, data_bytes: int) -> float:
    """The peak resident memory of one training job, estimated (see the module docstring)."""
    replicas = n_params * (PER_REPLICA_PARAM_BYTES * spec.workers + PER_PARAM_BYTES) / 1e6
    return BASE_MB * processes(spec) + DATA_COPIES * data_bytes / 1e6 + replicas


def measured_mb(benchmark: str | Path) -> float | None:
    """The largest ``max_rss`` (MB) in a Snakemake benchmark file, or None (none, unreadable)."""
    try:
        with open(benchmark, encoding="utf-8", newline="") as fh:
            peaks = [float(row["max_rss"]) for row in csv.DictReader(fh, delimiter="\t")]
    except (OSError, KeyError, ValueError, TypeError):
        return None
    peaks = [p for p in peaks if math.isfinite(p) and p > 0]
    return max(peaks) if peaks else None


def _params(spec: RunSpec, manifest: Mapping[str, Any]) -> int:
    """The model's parameter count for the prepared data set's shape (builds the model)."""
    from psml_core.models import make_model

    features = int(manifest["n_features"])
    hashed = "hashing" in (manifest.get("meta") or {})  # the hash stage's output: m already
    if spec.method.hashing is not None and not hashed:  # jpdc: the model sees m features
        features = spec.method.hashing.buckets_for(features)
    return make_model(spec.workload, features, int(manifest["n_classes"])).n_params


def train_mem_mb(
    spec: RunSpec, manifest: Mapping[str, Any], benchmark: str | Path, attempt: int = 1
) -> int:
    """The memory (MB) a training job asks for: its measured peak, else the estimate.

    Args:
        spec: The run.
        manifest: The prepared data set's ``manifest.json`` (shape and file sizes).
        benchmark: The job's Snakemake benchmark file, from an earlier run of it, if any.
        attempt: Snakemake's attempt (1 first; a retry after running out asks for more).
    """
    peak = measured_mb(benchmark)
    if peak is None:
        data = sum(int(f.get("bytes", 0)) for f in manifest.get("files", {}).values())
        peak = estimate_mb(spec, _params(spec, manifest), data)
    asked = max(FLOOR_MB, MARGIN * peak) * max(1, attempt)
    return int(math.ceil(asked / 100.0) * 100)
