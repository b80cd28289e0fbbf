"""Checkpoints of a simulated run: save every N iterations, resume after a kill.

A SimPy simulation's processes are Python generators, which cannot be saved; so a checkpoint is
taken where no process holds anything the state does not: every worker has finished iteration
``N k - 1`` (its pushes applied) and none has started ``N k`` (the *drain*). No message is in
flight then, no pull is parked at a gate, and each worker's loop is fully described by its next
iteration, its previous round's communication time and when it reached the drain.

What is saved (pickle, written atomically to ``checkpoint.pkl`` in the run's output directory):
the shards (values, optimizer state, sync clocks, codec state, pending broadcasts), each
worker's state but its data (replica, batch sampler RNG, codec residuals, optimizers), the
controller, the dynamic partition's statistics, the calibrated compute model, the records and
evaluations so far and the simulated time. Delays and heterogeneity are functions of the seed
and the step, so they need nothing. The checkpoint names the run's ``config_hash``: a checkpoint
of other settings is never resumed.

Fault injection (tests): with ``PSML_FAULT_KILL_AFTER_CHECKPOINT=k`` in the environment the
process kills itself with SIGKILL right after writing its k-th checkpoint; with
``PSML_FAULT_HOLD_AFTER_CHECKPOINT=k`` it stops there for a minute instead, so that a test can
kill whatever runs it (Snakemake itself) while a checkpoint is on disk.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from psml_core.atomic import write_bytes
from psml_core.engine.backend import CHECKPOINT_NAME
from psml_core.engine.job import Job
from psml_core.engine.server import ServerShard
from psml_core.errors import DataError

__all__ = [
    "CHECKPOINT_NAME",
    "FAULT_ENV",
    "HOLD_ENV",
    "SimCheckpoint",
    "load_checkpoint",
    "save_checkpoint",
]

FAULT_ENV = "PSML_FAULT_KILL_AFTER_CHECKPOINT"
HOLD_ENV = "PSML_FAULT_HOLD_AFTER_CHECKPOINT"
_FORMAT = 1
_WORKER_DATA = ("model", "X", "y")  # rebuilt from the data set, never saved


@dataclass
class SimCheckpoint:
    """The state of a simulated run at a drain (see the module docstring).

    Attributes:
        config_hash: The run's settings hash.
        iteration: The iteration every worker starts next.
        now: Simulated time at the drain.
        arrived: Per worker, the simulated time it reached the drain.
        prev_comm: Per worker, its previous round's communication time (PCP reports).
        order: Workers in the order they reached the drain (the order they resume in).
        workers: Per worker, its attributes but its data and model.
        shards: The server shards.
        run: The run state's own fields (records, evaluations, controller feed, ...).
        job: The job's mutable parts (controller, dynamic partition, compute model, keys).
    """

    config_hash: str
    iteration: int
    now: float
    arrived: list[float]
    prev_comm: list[float]
    order: list[int]
    workers: list[dict[str, Any]]
    shards: list[ServerShard]
    run: dict[str, Any]
    job: dict[str, Any] = field(default_factory=dict)
    format: int = _FORMAT


def capture_job(job: Job) -> tuple[list[dict[str, Any]], list[ServerShard], dict[str, Any]]:
    """The job's mutable state: workers (without data), shards, and the job's own parts."""
    workers = [{k: v for k, v in vars(w).items() if k not in _WORKER_DATA} for w in job.workers]
    parts = {
        "controller": job.controller,
        "dynamic": job.dynamic,
        "compute": job.compute,
        "key_owner": job.assignment.key_owner,
    }
    return workers, job.shards, parts


def restore_job(job: Job, ckpt: SimCheckpoint) -> None:
    """Put a checkpoint's state into a freshly built job of the same settings."""
    for w, state in zip(job.workers, ckpt.workers, strict=True):
        vars(w).update(state)
    job.shards[:] = ckpt.shards
    job.controller = ckpt.job["controller"]
    job.dynamic = ckpt.job["dynamic"]
    job.compute = ckpt.job["compute"]
    job.assignment.key_owner[:] = ckpt.job["key_owner"]


_written = 0  # checkpoints written by this process (fault injection counts them)


def save_checkpoint(path: Path, ckpt: SimCheckpoint) -> None:
    """Write ``ckpt`` atomically; then honour the fault-injection variable."""
    global _written
    write_bytes(path, pickle.dumps(ckpt, protocol=pickle.HIGHEST_PROTOCOL))
    _written += 1
    kill_after = os.environ.get(FAULT_ENV)
    if kill_after and _written == int(kill_after):
        print(f"{FAULT_ENV}={kill_after}: killing this process (SIGKILL)", file=sys.stderr)
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    hold_after = os.environ.get(HOLD_ENV)
    if hold_after and _written == int(hold_after):
        print(f"{HOLD_ENV}={hold_after}: holding for 60 s", file=sys.stderr)
        sys.stderr.flush()
        time.sleep(60)


def load_checkpoint(path: Path, config_hash: str) -> SimCheckpoint | None:
    """The checkpoint at ``path`` if it belongs to these settings, else None.

    A checkpoint of other settings (the config changed since) is reported and ignored: the
    run starts over and overwrites it.

    Raises:
        DataError: The file exists but is not a readable checkpoint (names it and the fix).
    """
    if not path.is_file():
        return None
    try:
        ckpt = pickle.loads(path.read_bytes())  # noqa: S301 - our own file in the run directory
    except Exception as exc:  # a truncated or foreign file: any unpickling error
        raise DataError(
            f"checkpoint {str(path)!r} is not readable ({type(exc).__name__}: {exc}); delete it "
            "to start the run over"
        ) from None
    if not isinstance(ckpt, SimCheckpoint) or ckpt.format != _FORMAT:
        raise DataError(
            f"checkpoint {str(path)!r} is not a psml sim checkpoint of format {_FORMAT}; delete "
            "it to start the run over"
        )
    if ckpt.config_hash != config_hash:
        print(
            f"checkpoint {str(path)!r} holds a run of other settings; starting over",
            file=sys.stderr,
        )
        return None
    return ckpt
