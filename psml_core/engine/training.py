"""Run one training job end to end: load data, build, run the backend, write results."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from psml_core.backend_info import BackendInfo
from psml_core.capabilities import backend_info
from psml_core.config import RunSpec
from psml_core.data.base import Dataset
from psml_core.data.store import load_prepared, manifest_sha256
from psml_core.engine.backend import CHECKPOINT_NAME, Backend
from psml_core.engine.device_state import keep_on_device
from psml_core.engine.job import Job, build_job
from psml_core.engine.progress import Progress
from psml_core.engine.stages import hash_stage, place_stage
from psml_core.engine.torch_device import device_provenance, resolve_device
from psml_core.errors import ConfigError, DataError
from psml_core.metrics.records import IterationRecord
from psml_core.metrics.summary import build_summary, write_summary
from psml_core.metrics.writer import write_metrics
from psml_core.placement import Assignment

__all__ = ["configure_torch", "load_assignment", "train"]


def configure_torch(spec: RunSpec) -> None:
    """Torch settings every process of a run uses: the configured threads, deterministic ops."""
    torch.set_num_threads(spec.compute.threads)
    # What torch.use_deterministic_algorithms(True) does for eager ops, without its other step,
    # configuring torch.compile's inductor (unused here), whose import costs every run ~1 s.
    set_deterministic = getattr(torch._C, "_set_deterministic_algorithms", None)
    if set_deterministic is None:
        torch.use_deterministic_algorithms(True)
    else:
        set_deterministic(True, warn_only=False)


def _place(job: Job, backend: Backend, device: torch.device) -> None:
    """Move the model to ``device``; a backend that keeps its vectors there moves them too."""
    job.model.to(device)
    if backend.keeps_vectors_on_device and device.type != "cpu":
        reason = keep_on_device(job, device)
        if reason is not None:
            print(
                f"{job.spec.run_id}: device {device}: the gradients come back to the host for "
                f"the codecs and shards, because {reason}",
                file=sys.stderr,
            )


def _time_model(job: Job, backend: Backend, device: torch.device) -> dict[str, Any]:
    """What the run's clock assumed (compute model, codec costs) and what it computed on."""
    out = job.compute.describe()
    out["torch_device"] = device_provenance(device)
    if transport := backend.transport():
        out["transport"] = transport
    out.update(backend.describe_time_model(job))
    return out


def load_assignment(path: str | Path) -> Assignment:
    """Read an assignment written by ``psml partition``; a bad file is a DataError naming it."""
    p = Path(path)
    try:
        with np.load(p) as z:
            return Assignment(sample_owner=z["sample_owner"], key_owner=z["key_owner"])
    except (OSError, KeyError, ValueError) as exc:
        raise DataError(
            f"{p}: not a readable assignment ({exc}); delete it and re-run `psml partition`"
        ) from None


def _data_files(data_dir: str | Path, dataset: Dataset) -> dict[str, str]:
    """SHA-256 of the files the run read; a hashed data set's names say so (``psml hash``)."""
    files = manifest_sha256(data_dir)
    done = dataset.meta.get("hashing")
    if not done:
        return files
    tag = f"hashed m={done['buckets']} seed {done['seed']}"
    return {f"{tag}/{name}": sha for name, sha in files.items()}


def _backend(spec: RunSpec, info: BackendInfo, checkpoint: Path) -> Backend:
    """The run's backend, as its descriptor names it; one that does not checkpoint says so."""
    cls = info.load()
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise ConfigError(
            f"backend {info.name!r}: {info.backend} is {cls!r}, not a Backend subclass; "
            "point the descriptor's backend at the class"
        )
    if spec.checkpoint_every > 0 and not info.checkpoints:
        print(
            f"{spec.run_id}: checkpoint_every is ignored on the {spec.backend!r} backend "
            "(its runs do not checkpoint); a killed run starts over",
            file=sys.stderr,
        )
    return cls.for_run(spec, checkpoint)


def _run(
    spec: RunSpec,
    data_dir: str | Path,
    checkpoint: Path,
    assignment_path: str | Path | None,
    progress: Progress,
) -> tuple[Dataset, torch.device, Backend, Job, list[IterationRecord], float]:
    """Load the data, build the job and run the backend; what :func:`train` writes from.

    Returns:
        The data set as read (its files' provenance), the torch device, the backend, the job,
        the records and the wall-clock seconds from the backend's start (placement, build and
        run).
    """
    progress.stage("data")  # heartbeats from here on name the step they wait in
    loaded = load_prepared(data_dir)  # verifies every file's SHA-256 first
    configure_torch(spec)
    # Here: sim's models, or the device of rank 0 of a launched dist run (each rank of a
    # multi-process run takes its own GPU, engine.torch_device.rank_device).
    device = resolve_device(spec.torch_device)
    info = backend_info(spec.backend)
    backend = _backend(spec, info, checkpoint)
    t0 = time.perf_counter()
    # The stages the workflow runs as jobs of their own (hash, partition), run here when their
    # outputs are not handed over.
    progress.stage("placement")
    dataset = hash_stage(spec, loaded)
    if assignment_path:
        assignment = load_assignment(assignment_path)
    else:
        assignment = place_stage(spec, dataset).assignment
    progress.stage("build")  # the job: model replicas, codec costs
    job = build_job(spec, dataset, assignment)
    _place(job, backend, device)
    progress.stage("train")
    if not info.in_process:
        progress.handover()  # the ranks report (rank 0), each with its own heartbeat
    records = backend.run(job, progress)
    return loaded, device, backend, job, records, time.perf_counter() - t0


def train(
    spec: RunSpec,
    data_dir: str | Path,
    out_dir: str | Path,
    assignment_path: str | Path | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Train one run and write ``metrics.parquet`` then ``summary.json`` into ``out_dir``.

    Both files are written atomically, the summary last, so a crashed run leaves neither a
    half-written file nor a summary without its metrics.

    Args:
        spec: The run's settings.
        data_dir: Directory of the prepared data set (with its manifest).
        out_dir: Output directory.
        assignment_path: The placement computed once by ``psml partition``; computed here if None.
        progress: Where the run reports its progress (a first line, then one per evaluation and
            checkpoint, :mod:`psml_core.engine.progress`); None: stderr, as ``PSML_PROGRESS``
            says. It never changes the results.

    Returns:
        The summary.
    """
    out = Path(out_dir)
    wl = spec.workload
    mark = spec.method.calibrated
    if mark and "factor" not in mark:  # its params are still in the paper's units
        raise ConfigError(
            f"run {spec.run_id!r}: {mark['params'][0]} is in the paper's units until calibration "
            f"{mark['id']!r} maps it; train it with `psml train --calibration FILE`"
        )
    if progress is None:
        clock = backend_info(spec.backend).clock
        progress = Progress.from_env(spec.run_id, wl.iterations, clock)
    # First, so that a log shows the run within seconds (before data, placement, calibration).
    progress.start(
        iterations=wl.iterations,
        workers=spec.workers,
        shards=spec.shards,
        backend=spec.backend,
        eval_every=wl.eval_every,
        checkpoint_every=spec.checkpoint_every or None,
    )
    checkpoint = out / CHECKPOINT_NAME
    try:  # the heartbeat stops however the run ends (a bad data file, a failed placement)
        dataset, device, backend, job, records, wall = _run(
            spec, data_dir, checkpoint, assignment_path, progress
        )
    finally:
        progress.close()
    if backend.resumed_at is not None:
        print(f"{spec.run_id}: resumed from its checkpoint at iteration {backend.resumed_at}")
    write_metrics(out / "metrics.parquet", records)
    summary = build_summary(
        records,
        spec,
        clock=backend.clock,
        data_sha256=_data_files(data_dir, dataset),
        wall_clock_s=wall,
        compute_model=_time_model(job, backend, device),
        placement_decisions=None
        if job.dynamic is None
        else [dataclasses.asdict(d) for d in job.dynamic.decisions],
        n_classes=job.model.n_classes,
        test_samples=int(len(job.dataset.y_test)),
    )
    write_summary(out / "summary.json", summary)
    checkpoint.unlink(missing_ok=True)  # the results are in: nothing left to resume
    return summary
