"""The dist backend: the engine's workers and server shards as real processes.

Transport: ``torch.distributed`` point-to-point with the **gloo** backend. Payloads are the
codecs' byte buffers on the CPU; NCCL moves GPU tensors between GPUs and has no anysource
receive, so gloo is the transport even on GPU nodes. With ``device: cuda`` each rank's model
computes on its own GPU (:func:`~psml_core.engine.torch_device.rank_device`: local rank modulo
the GPUs seen) and what crosses the wire is still the encoded bytes, counted exactly as on CPU.

Ranks (:class:`~psml_core.engine.dist.settings.Layout`): ``0..S-1`` server shards,
``S..S+P-1`` workers; rank 0 (shard 0) evaluates and gathers the results. Every rank builds the
same :class:`~psml_core.engine.job.Job` from the same RunSpec, data and placement
(deterministic from the seed) and runs its role (:mod:`.roles`); the message layout and byte
accounting are in :mod:`.wire`; failure handling in :mod:`.session`.

``run(job)`` has two modes:

* inside a launched rank (``python -m psml_core.engine.dist.launch`` under torchrun or srun,
  which opens a :class:`~psml_core.engine.dist.session.Session` first), it runs this rank's
  role; rank 0 returns every worker's records, the other ranks return ``[]`` — the launcher
  calls :func:`psml_core.engine.run.train` on rank 0 only, so only rank 0 writes results;
* in a plain process (``psml train``, tests), it starts the P + S ranks itself
  (:mod:`.spawn`) and returns rank 0's records; then ``train`` writes them.

After a run on rank 0 (or in the spawning process) ``job.shards[s].values`` hold the final
values of every shard, so ``job.global_params()`` is the trained model as in sim, and
``backend.result`` holds the per-rank wire statistics.
"""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from psml_core.control.base import Controller
from psml_core.engine.backend import BACKENDS, Backend
from psml_core.engine.dist.roles import ShardLoop, run_worker
from psml_core.engine.dist.session import Session, current_session
from psml_core.engine.torch_device import rank_device
from psml_core.engine.dist.settings import DistOptions, Faults
from psml_core.engine.dist.wire import Channel, Header, Kind, PeerLost, Wire, WireStats
from psml_core.engine.job import Job
from psml_core.errors import ConfigError, RunError
from psml_core.metrics.records import IterationRecord

__all__ = ["DistBackend", "DistResult", "check_supported"]


@dataclass
class DistResult:
    """What rank 0 assembles at the end of a run.

    Attributes:
        records: Every worker's records, with test metrics, sorted by (iteration, worker).
        values: Final values of each shard.
        wire: Wire statistics of each rank.
    """

    records: list[IterationRecord]
    values: dict[int, np.ndarray]
    wire: dict[int, WireStats] = field(default_factory=dict)


@BACKENDS.register("dist")
class DistBackend(Backend):
    """Real processes over torch.distributed (gloo); see the module docstring.

    Args:
        options: Backend options (default: from the ``PSML_DIST_*`` environment). A launched
            rank uses its session's options, which the launcher read from the environment.
    """

    name = "dist"
    clock = "wall-clock"

    def __init__(self, options: DistOptions | None = None) -> None:
        self.options = options or DistOptions.from_env()
        self.result: DistResult | None = None

    def run(self, job: Job) -> list[IterationRecord]:
        """Run the job's ranks (spawned here, or this launched rank); records on rank 0."""
        check_supported(job)
        session = current_session()
        if session is None:
            from psml_core.engine.dist.spawn import spawn_local

            result: DistResult | None = spawn_local(job, self.options)
        else:
            result = run_rank(job, session)
        if result is None:
            return []
        for s, values in result.values.items():
            job.shards[s].values[:] = values
        self.result = result
        return result.records


def check_supported(job: Job) -> None:
    """Refuse what the dist backend cannot run faithfully (a ConfigError naming the fix).

    Round policies (PCP), delta pulls and adaptive controllers are supported (run on shard 0,
    see :mod:`.roles`). The dynamic placement is not: moving keys between shard processes
    needs a migration message the dist protocol does not have.
    """
    if job.spec.workers < 1 or job.spec.shards < 1:
        raise ConfigError("the dist backend needs at least one worker and one shard")
    if job.dynamic is not None:
        raise ConfigError(
            f"method {job.spec.method.name!r}: placement 'dynamic' moves keys between shards "
            f"mid-run, which the dist backend cannot do yet; run it on the sim backend"
        )


def run_rank(job: Job, session: Session) -> DistResult | None:
    """This launched rank's part of the run; the assembled result on rank 0, else None."""
    layout, rank = session.layout, session.rank
    spec = job.spec
    if (spec.shards, spec.workers) != (layout.shards, layout.workers):
        raise RunError(
            f"the job has {spec.shards} shards and {spec.workers} workers; the session {layout}"
        )
    # device: cuda puts this rank's model on its own GPU (local rank modulo the GPUs seen).
    job.model.to(rank_device(spec.device, session.env.local_rank))
    wire = Wire(rank)
    faults = Faults.from_env()
    try:
        t0 = session.start_clock()  # after every rank has built its job
        mine: dict[str, Any] = {"rows": [], "values": {}}
        evals: dict[int, tuple[float, float]] = {}
        if layout.is_shard(rank):
            loop = ShardLoop(job, rank, wire, layout, faults)
            loop.run()
            mine["values"] = {rank: job.shards[rank].values.copy()}
            if loop.evaluator is not None:
                evals = loop.evaluator.results()
        else:
            mine["rows"] = run_worker(
                job, layout.index(rank), wire, layout, session.options, faults, t0
            )
        if rank != 0:
            mine["wire"] = wire.stats
            blob = pickle.dumps(mine, protocol=pickle.HIGHEST_PROTOCOL)
            wire.send(0, Header(Kind.RESULT, rank, payload_len=len(blob)), [blob], Channel.RESULT)
            session.close()
            return None
        gathered = {0: mine}
        for r in range(1, layout.world_size):
            hdr, _ = wire.recv_header(r, Channel.RESULT)
            blob_in, _ = wire.recv_parts(r, hdr, Channel.RESULT)
            assert blob_in is not None
            gathered[r] = pickle.loads(blob_in)
    except PeerLost as exc:
        session.peer_lost(exc, exc.peer)
    session.close()
    gathered[0]["wire"] = wire.stats
    return _assemble(gathered, evals)


def _assemble(
    gathered: dict[int, dict[str, Any]], evals: dict[int, tuple[float, float]]
) -> DistResult:
    records = []
    for part in gathered.values():
        for row in part["rows"]:
            loss, acc = evals.get(row["iteration"], (math.nan, math.nan))
            records.append(
                IterationRecord(**row, test_loss=loss, test_accuracy=acc, clock="wall-clock")
            )
    records.sort(key=lambda r: (r.iteration, r.worker))
    values: dict[int, np.ndarray] = {}
    for part in gathered.values():
        values.update(part["values"])
    return DistResult(records, values, {r: part["wire"] for r, part in gathered.items()})
