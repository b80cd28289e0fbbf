"""The horovod backend: data-parallel allreduce training of a Job over Horovod's Gloo controller.

What it runs. Each Horovod rank is one worker ``p = hvd.rank()`` of the same
:class:`~psml_core.engine.job.Job` (every rank builds it from the same RunSpec, data and seed,
so the data split, batch order and initial parameters are the sim backend's). There are no
server shards: ``spec.shards`` and the key placement are ignored (an allreduce has no key
ranges; the placement still decides which samples each worker trains on). Every rank holds a
full replica of the parameters and one optimizer (the workload's, over all keys) and applies
the same averaged gradient each step, so the replicas stay bit-identical (checked at the end).
Only bulk-synchronous recipes (``sync: bsp``) fit; ASP/SSP have no allreduce counterpart.

Two exchanges (``HorovodOptions.collective``; ``auto`` picks by codec):

* **dense allreduce** (codec ``none``): ``hvd.allreduce(grad, op=Sum)`` then a division by
  ``float32(P)``, the PS shard's "sum, then average" (``ServerShard.push``). The sum runs in
  Gloo's ring order, not the sim server's worker order: equal for P = 2, float32 rounding apart
  for P > 2.
* **compressed allgather** (any other codec; GRACE's ``Allgather`` communicator): each rank
  encodes its gradient with its own codec instance (one per rank, so error feedback keeps a
  per-rank residual over the whole vector), the payload bytes travel as a ``uint8`` tensor
  through ``hvd.allgather`` (ranks may send different sizes; an ``int64`` allgather of the
  sizes goes first to split the result), and every rank decodes all P payloads in rank order,
  sums them with the codec's server side (``ServerCodec.aggregate``) and divides by P. These
  are the P pushes of one BSP iteration to a PS shard over all keys, and every rank serves
  them exactly so: a replicated :class:`~psml_core.engine.server.ServerShard`, driven through
  its :class:`~psml_core.engine.shard_service.ShardService`, whose values *are* the rank's
  replica. With ``pull: aggregate`` the shard also runs ``encode_down``/``decode_down`` and
  answers every worker's next pull with the broadcast, whose ``shared()`` state goes into the
  next step's context (no bytes move for it). Top-k etc. are whole-model here, not per shard.

Byte accounting (per rank and step; payload bytes only, never Gloo/TCP framing):

* dense: ``bytes_up = 4n`` (the gradient a rank contributes) and ``bytes_down = 4n`` (the
  average it receives), the PS convention for a dense push and pull. A ring allreduce really
  sends and receives ``2 (P-1)/P * 4n`` bytes per rank: the same 4n for P = 2, up to 2x that
  for large P.
* allgather: ``bytes_up`` = the rank's payload (``Payload.wire_bytes``), ``bytes_down`` = the
  payloads of the other P - 1 ranks (what the allgather delivers). A ring allgather also
  forwards the others' payloads: the real bytes sent per rank are ``sum(sizes) - own`` too.
  The 8-byte size word and Horovod's own negotiation messages are control traffic, not counted.
* every byte goes to another rank (one rank per machine): ``remote_bytes_* = bytes_*``;
  ``shard_bytes_*`` are empty (there are no shards).

Time (wall clock, seconds since every rank had built its job). Per step ``compute_s`` is the
gradient (stretched by the heterogeneity factor when emulating); ``comm_s`` the exchange:
injected delay, encode, collectives, decode and the optimizer update; ``wait_s`` the step's
control allreduce, a barrier that absorbs the skew between ranks. The three add up to the step.

Controller (the DC2 hook). The ratio of step t is ``job.controller.ratio(t)`` on every rank;
after the exchange one ``allreduce(op=Max)`` of ``(comm_s, compute_s, ratio, -ratio)`` gives the
slowest rank's figures, which every rank's controller observes (so all controllers stay
identical); a rank whose ratio differed from the others' is a RunError.

Evaluation: rank 0 evaluates its replica (= the global model, one part) after the steps that
``Job.should_evaluate`` selects, in a background thread so that the next step is not held up
(:mod:`psml_core.engine.evaluations`).
"""

from __future__ import annotations

import hashlib
import sys
import time
from typing import Any

import numpy as np
import torch

from psml_core.capabilities import horovod_refusal
from psml_core.codecs.base import Codec, Payload
from psml_core.config import BlockSpec, MethodRecipe
from psml_core.control.base import Observation
from psml_core.engine.backend import BACKENDS, Backend
from psml_core.engine.evaluations import BackgroundEvaluations
from psml_core.engine.horovod.result import HorovodResult
from psml_core.engine.horovod.runtime import HorovodOptions, import_horovod, in_horovod_rank
from psml_core.engine.horovod.transport import HorovodTransport
from psml_core.engine.job import Job, make_worker_codec, update_momentum
from psml_core.engine.loop import WorkerLoop, run_blocking
from psml_core.engine.optim import ServerOptimizer, make_optimizer
from psml_core.engine.progress import Progress
from psml_core.engine.server import ServerShard
from psml_core.engine.shard_service import PullMsg, PushMsg, ShardService
from psml_core.engine.step import to_records
from psml_core.engine.torch_device import rank_device
from psml_core.errors import ConfigError, RunError
from psml_core.metrics.records import IterationRecord
from psml_core.net.delay import make_delay
from psml_core.sync.bsp import BSP

__all__ = ["HorovodBackend", "HorovodResult", "check_job", "collective_for", "run_rank"]


def _dense_codec(codec: BlockSpec) -> bool:
    return codec.name == "none" and not codec.params.get("error_feedback", False)


def collective_for(job: Job, options: HorovodOptions) -> str:
    """The exchange this job uses: ``allreduce`` or ``allgather``.

    Raises:
        ConfigError: ``allreduce`` was asked for a compressing codec.
    """
    dense = _dense_codec(job.spec.method.codec)
    if options.collective == "auto":
        return "allreduce" if dense else "allgather"
    if options.collective == "allreduce" and not dense:
        raise ConfigError(
            f"PSML_HOROVOD_COLLECTIVE=allreduce needs the dense codec 'none'; method "
            f"{job.spec.method.name!r} uses {job.spec.method.codec.name!r} — use allgather or auto"
        )
    return options.collective


def check_job(job: Job) -> None:
    """Reject recipes an allreduce cannot run (:func:`~psml_core.capabilities.horovod_refusal`).

    Raises:
        ConfigError: naming why and the backend to use.
    """
    if (why := horovod_refusal(job.spec.method)) is not None:
        raise ConfigError(why)


@BACKENDS.register("horovod")
class HorovodBackend(Backend):
    """Allreduce data-parallel training over Horovod (Gloo); see the module docstring.

    ``run(job)`` has two modes:

    * inside a rank started by ``horovodrun`` (:mod:`psml_core.engine.horovod.launch`), it runs
      this rank's part; rank 0 returns every worker's records, the other ranks ``[]``;
    * in a plain process (``psml train``, tests), it starts ``horovodrun -np P`` on this host
      (:mod:`.spawn`), ships the job to every rank and returns rank 0's records.

    Either way the job ends holding the final model: ``job.global_params()`` and every
    worker's ``params`` are the trained replica, as after a sim run.

    Args:
        options: Backend options (default: from the ``PSML_HOROVOD_*`` environment).
    """

    clock = "wall-clock"

    @classmethod
    def refusal(cls, method: MethodRecipe) -> str | None:
        """What an allreduce cannot run (:func:`psml_core.capabilities.horovod_refusal`)."""
        return horovod_refusal(method)

    def __init__(self, options: HorovodOptions | None = None) -> None:
        self.options = options or HorovodOptions.from_env()
        self.result: HorovodResult | None = None

    def run(self, job: Job, progress: Progress | None = None) -> list[IterationRecord]:
        """Train the job with P Horovod ranks; records on rank 0 (or in the spawning process).

        ``progress`` is not fed: this backend reports nothing before the run ends.
        """
        check_job(job)
        collective_for(job, self.options)  # fail before starting any process
        if in_horovod_rank():
            result = run_rank(job, self.options)
        else:
            from psml_core.engine.horovod.spawn import spawn_local

            result = spawn_local(job, self.options)
        install(job, result)
        self.result = result
        return result.records


def install(job: Job, result: HorovodResult) -> None:
    """Put the final model (and rank 0's controller, if sent back) into ``job``."""
    for shard in job.shards:
        shard.values[:] = result.params[shard.keys]
    for worker in job.workers:
        worker.params[:] = result.params
    if result.controller is not None:
        job.controller = result.controller


def nccl_device(hvd: Any, device: torch.device) -> torch.device | None:
    """The GPU whose tensors Horovod moves over NCCL, or None (its CPU path).

    With ``device: cuda`` and a Horovod built with NCCL (``HOROVOD_GPU_OPERATIONS=NCCL``), the
    exchanged tensors (the dense gradient, the payloads' bytes) go on the rank's GPU, so that
    Horovod moves them with NCCL; the small size and control collectives stay on its CPU path.
    Otherwise everything goes through the CPU path, and a GPU run says why once.
    """
    if device.type != "cuda":
        return None
    if bool(hvd.nccl_built()):
        return device
    print(
        "horovod: device cuda, but this Horovod was built without NCCL "
        "(HOROVOD_GPU_OPERATIONS=NCCL): the payloads go through its CPU path",
        file=sys.stderr,
    )
    return None


def replicated_service(
    job: Job, size: int, codec: Codec, optimizer: ServerOptimizer, replica: np.ndarray
) -> ShardService:
    """A rank's copy of the server: one BSP shard over all keys, whose values are ``replica``.

    Every rank serves the same P pushes in the same (rank) order, so every copy, and every
    replica, stays bit-identical; the shard's optimizer step updates ``replica`` in place.
    """
    n = job.model.n_params
    pull = "aggregate" if job.spec.method.pull == "aggregate" else "params"
    shard = ServerShard(
        0, np.arange(n), replica, size, BSP(), codec, codec, optimizer, pull_mode=pull
    )
    shard.values = replica  # the replica itself, not a copy: no second model per rank
    return ShardService(shard)


class _Exchange:
    """One rank's step: dense allreduce, or codec payloads through allgather into the service.

    Either way the exchange updates the replica with ``optimizer`` and returns this rank's
    bytes up and down.
    """

    def __init__(
        self,
        hvd: Any,
        job: Job,
        rank: int,
        collective: str,
        optimizer: ServerOptimizer,
        nccl: torch.device | None = None,
    ) -> None:
        self.hvd, self.job, self.rank, self.collective = hvd, job, rank, collective
        self.nccl = nccl  # where the exchanged tensors go (NCCL), or None (the CPU path)
        self.size = hvd.size()
        self.n = job.model.n_params
        self.optimizer = optimizer
        self.params = job.workers[rank].params
        self.codec: Codec = make_worker_codec(job.spec, rank)  # momentum correction included
        self.service = replicated_service(job, self.size, self.codec, optimizer, self.params)
        self.extra: dict[str, Any] = {}  # what the replicated server published for the next step

    def __call__(self, grad: np.ndarray, step: int, ratio: float) -> tuple[int, int]:
        """Exchange the step's gradient and update the replica; this rank's bytes up and down."""
        if self.collective == "allreduce":
            return self._allreduce(grad)
        return self._allgather(grad, step, ratio)

    def _allreduce(self, grad: np.ndarray) -> tuple[int, int]:
        g = torch.from_numpy(np.ascontiguousarray(grad, dtype=np.float32))
        if self.nccl is not None:
            g = g.to(self.nccl)
        total = self.hvd.allreduce(g, op=self.hvd.Sum, name="psml.grad").cpu().numpy()
        avg = total / np.float32(self.size)
        self.optimizer.step(self.params, avg.astype(np.float32, copy=False))
        return 4 * self.n, 4 * self.n

    def _gathered(self, mine: Payload) -> list[Payload]:
        """Every rank's payload, in rank order (sizes first, then the bytes)."""
        hvd = self.hvd
        sizes = hvd.allgather(
            torch.tensor([mine.wire_bytes], dtype=torch.int64), name="psml.sizes"
        ).tolist()
        if sizes[self.rank] != mine.wire_bytes:
            raise RunError(f"rank {self.rank}: the size allgather returned {sizes}")
        buf = torch.frombuffer(bytearray(mine.buffer), dtype=torch.uint8) if mine.buffer else None
        if sum(sizes) == 0:
            gathered = b""
        else:
            if buf is None:
                buf = torch.empty(0, dtype=torch.uint8)
            if self.nccl is not None:
                buf = buf.to(self.nccl)
            gathered = hvd.allgather(buf, name="psml.payload").cpu().numpy().tobytes()
        if len(gathered) != sum(sizes):
            raise RunError(
                f"rank {self.rank}: allgather delivered {len(gathered)} bytes, sizes say {sizes}"
            )
        payloads: list[Payload] = []
        offset = 0
        for r, nbytes in enumerate(sizes):
            if r == self.rank:
                payloads.append(mine)
            else:
                payloads.append(Payload(mine.codec, self.n, gathered[offset : offset + nbytes]))
            offset += nbytes
        return payloads

    def _allgather(self, grad: np.ndarray, step: int, ratio: float) -> tuple[int, int]:
        ctx = self.job.ctx(step, ratio, self.extra)
        mine = self.codec.encode(grad, ctx)
        payloads = self._gathered(mine)
        service = self.service
        applied = False
        for r, payload in enumerate(payloads):  # the P pushes of the step, in rank order
            msg = PushMsg(r, step, payload, ctx)
            applied = service.push(msg)
        if not applied:
            raise RunError(f"rank {self.rank}: step {step}'s {len(payloads)} pushes did not apply")
        service.settle(msg)
        if service.shard.pull_mode == "aggregate":  # every worker's next pull: the broadcast
            for r in range(self.size):
                nxt = PullMsg(r, step + 1)
                if not service.pull(nxt):
                    raise RunError(f"rank {self.rank}: the server holds pull {step + 1} of {r}")
                answer = service.answer(nxt, ctx)
                if r == self.rank:
                    self.extra = answer.pull.extra
        down = sum(p.wire_bytes for p in payloads) - mine.wire_bytes
        return mine.wire_bytes, down


def _gather(
    hvd: Any,
    params: np.ndarray,
    rows: list[dict[str, Any]],
    observed: list[Observation],
    evaluations: BackgroundEvaluations | None,
) -> tuple[list[IterationRecord], dict[int, list[Observation]]]:
    """Every rank's rows and observations; rank 0 (the evaluator's) turns them into records.

    Raises:
        RunError: a replica differs from rank 0's after the run.
    """
    digest = hashlib.sha256(params.tobytes()).hexdigest()
    parts = hvd.allgather_object(
        {"rows": rows, "observed": observed, "digest": digest}, name="psml.result"
    )
    digests = [p["digest"] for p in parts]
    if len(set(digests)) != 1:
        differ = [r for r, d in enumerate(digests) if d != digests[0]]
        raise RunError(f"the replicas of ranks {differ} differ from rank 0's after the run")
    observations = {r: p["observed"] for r, p in enumerate(parts)}
    records: list[IterationRecord] = []
    if evaluations is not None:
        rows = [row for part in parts for row in part["rows"]]
        records = to_records(rows, evaluations.results(), "wall-clock")
    return records, observations


def run_rank(job: Job, options: HorovodOptions) -> HorovodResult:
    """This Horovod rank's part of the run (initialises Horovod if needed).

    Raises:
        ConfigError: the number of ranks is not the run's number of workers.
        RunError: the ranks' ratios or final replicas disagree.
    """
    hvd = import_horovod()
    if not hvd.is_initialized():
        hvd.init()
    rank, size = hvd.rank(), hvd.size()
    spec = job.spec
    if size != spec.workers:
        raise ConfigError(
            f"run {spec.run_id!r} has {spec.workers} workers but horovodrun started {size} "
            f"ranks; use horovodrun -np {spec.workers}"
        )
    # device: cuda puts this rank's model on its own GPU; the payloads are host bytes that
    # Horovod moves over NCCL where it was built with NCCL (nccl_device), else its CPU path.
    device = rank_device(spec.torch_device, hvd.local_rank())
    job.model.to(device)
    collective = collective_for(job, options)
    worker = job.workers[rank]
    optimizer = make_optimizer(spec.workload, job.model.n_params, update_momentum(spec))
    exchange = _Exchange(hvd, job, rank, collective, optimizer, nccl_device(hvd, device))
    emulate_delay = options.emulate and bool(spec.scenario.delay)
    delay = make_delay(spec.scenario.delay, spec.seed) if emulate_delay else None
    # Rank 0's replica is the whole model (no parts to collect): evaluated from a copy in the
    # background.
    evaluations = BackgroundEvaluations(job) if rank == 0 else None
    hvd.barrier()  # every rank has built its job: start the clock together
    tr = HorovodTransport(
        hvd,
        job,
        rank,
        exchange=exchange,
        delay=delay,
        emulate=options.emulate,
        evaluate=(lambda t, params: evaluations(t, params.copy()))
        if evaluations is not None
        else None,
        t0=time.perf_counter(),
    )
    run_blocking(WorkerLoop(worker, tr, spec.workload.iterations, rounds=False).run())
    records, observations = _gather(hvd, worker.params, tr.rows, tr.observed, evaluations)
    return HorovodResult(
        records=records,
        params=worker.params.copy(),
        collective=collective,
        observations=observations,
        controller=job.controller if rank == 0 else None,
    )
