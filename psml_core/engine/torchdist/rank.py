"""One launched rank of a dist run: its role to the end, and rank 0's gathering of results.

Each rank runs its role (shard or worker) and rank 0 gathers every rank's records, values and
wire statistics. :class:`~psml_core.engine.torchdist.backend.DistBackend` calls :func:`run_rank`
inside a launched rank; the launcher and the local spawner's children call it directly.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

from psml_core.capabilities import dist_refusal
from psml_core.engine.job import Job
from psml_core.engine.progress import Progress
from psml_core.engine.step import to_records
from psml_core.engine.torch_device import rank_device
from psml_core.engine.torchdist.bodies import open_bodies
from psml_core.engine.torchdist.result import DistResult
from psml_core.engine.torchdist.session import Session
from psml_core.engine.torchdist.settings import Faults
from psml_core.engine.torchdist.shard_loop import ShardLoop
from psml_core.engine.torchdist.transport import run_worker
from psml_core.engine.torchdist.wire import Channel, Header, Kind, PeerLost, Wire
from psml_core.errors import ConfigError, RunError

__all__ = ["check_supported", "run_rank"]


def check_supported(job: Job) -> None:
    """Refuse what the dist backend cannot run faithfully (a ConfigError naming the fix).

    Round policies (PCP), delta pulls and adaptive controllers are supported (run on shard 0,
    see :mod:`.shard_loop`). The dynamic placement is not: moving keys between shard processes
    needs a migration message the dist protocol does not have.
    """
    if job.spec.workers < 1 or job.spec.shards < 1:
        raise ConfigError("the dist backend needs at least one worker and one shard")
    if (why := dist_refusal(job.spec.method)) is not None:
        raise ConfigError(why)


def run_rank(job: Job, session: Session, progress: Progress | None = None) -> DistResult | None:
    """This launched rank's part of the run; the assembled result on rank 0, else None.

    ``progress``: what rank 0 (shard 0) reports to (:class:`.shard_loop.ShardLoop`).
    """
    layout, rank = session.layout, session.rank
    spec = job.spec
    if (spec.shards, spec.workers) != (layout.shards, layout.workers):
        raise RunError(
            f"the job has {spec.shards} shards and {spec.workers} workers; the session {layout}"
        )
    # device: cuda puts this rank's model on its own GPU (local rank modulo the GPUs seen).
    device = rank_device(spec.torch_device, session.env.local_rank)
    job.model.to(device)
    faults = Faults.from_env()
    wire = Wire(rank)
    try:
        # Where bodies travel: agreed by every rank (a collective), NCCL on GPUs of their own.
        opts = session.options
        wire.pairs = open_bodies(opts.bodies, device, rank, layout, opts.op_timeout_s)
        t0 = session.start_clock()  # after every rank has built its job
        mine: dict[str, Any] = {"rows": [], "values": {}}
        evals: dict[int, tuple[float, float]] = {}
        if layout.is_shard(rank):
            loop = ShardLoop(job, rank, wire, layout, faults, progress if rank == 0 else None)
            loop.run()
            mine["values"] = {rank: job.shards[rank].values.copy()}
            if loop.evaluations is not None:
                evals = loop.evaluations.results()
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
            hdr = wire.recv_header(r, Channel.RESULT)
            blob_in, _ = wire.recv_parts(r, hdr, Channel.RESULT)
            assert blob_in is not None
            gathered[r] = pickle.loads(blob_in)
    except PeerLost as exc:
        session.peer_lost(exc, exc.peer)
    session.close()
    gathered[0]["wire"] = wire.stats
    return _assemble(gathered, evals, wire.bodies)


def _assemble(
    gathered: dict[int, dict[str, Any]], evals: dict[int, tuple[float, float]], bodies: str
) -> DistResult:
    rows = [row for part in gathered.values() for row in part["rows"]]
    records = to_records(rows, evals, "wall-clock")
    values: dict[int, np.ndarray] = {}
    for part in gathered.values():
        values.update(part["values"])
    wire = {r: part["wire"] for r, part in gathered.items()}
    return DistResult(records, values, wire, bodies)
