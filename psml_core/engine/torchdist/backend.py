"""The dist backend: the engine's workers and server shards as real processes.

Transport: ``torch.distributed`` point-to-point. Payloads are the codecs' byte buffers on the
CPU. Every receive names its peer (a shard keeps header slots posted per worker, :mod:`.inbox`;
parts beyond a slot follow between the same pair as body messages). Headers go over **gloo**;
body messages over gloo too, or over **NCCL** between GPUs where every rank has one of its own
(``PSML_DIST_BODIES``, :mod:`.bodies`). With ``device: cuda`` each rank's model computes on its
own GPU (:func:`~psml_core.engine.torch_device.rank_device`: local rank modulo the GPUs seen)
and what crosses the wire is still the encoded bytes, counted exactly as on CPU.

Ranks (:class:`~psml_core.engine.torchdist.settings.Layout`): ``0..S-1`` server shards,
``S..S+P-1`` workers; rank 0 (shard 0) evaluates and gathers the results. Every rank builds the
same :class:`~psml_core.engine.job.Job` from the same RunSpec, data and placement
(deterministic from the seed) and runs its role (:mod:`.shard_loop`, :mod:`.transport`);
the message layout and byte accounting are in :mod:`.wire`; failure handling in :mod:`.session`.

``run(job)`` has two modes:

* inside a launched rank (``python -m psml_core.engine.torchdist.launch`` under torchrun or srun,
  which opens a :class:`~psml_core.engine.torchdist.session.Session` first), it runs this rank's
  role; rank 0 returns every worker's records, the other ranks return ``[]`` — the launcher
  calls :func:`psml_core.engine.training.train` on rank 0 only, so only rank 0 writes results;
* in a plain process (``psml train``, tests), it starts the P + S ranks itself
  (:mod:`.spawn`) and returns rank 0's records; then ``train`` writes them.

After a run on rank 0 (or in the spawning process) ``job.shards[s].values`` hold the final
values of every shard, so ``job.global_params()`` is the trained model as in sim, and
``backend.result`` holds the per-rank wire statistics.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from psml_core.capabilities import dist_refusal
from psml_core.config import MethodRecipe, RunSpec
from psml_core.engine.backend import BACKENDS, Backend
from psml_core.engine.job import Job
from psml_core.engine.progress import NO_PROGRESS, Progress
from psml_core.engine.torchdist.rank import check_supported, run_rank
from psml_core.engine.torchdist.rank_log import LOG_DIR_ENV, log_dir
from psml_core.engine.torchdist.result import DistResult
from psml_core.engine.torchdist.session import current_session
from psml_core.engine.torchdist.settings import DistOptions
from psml_core.engine.torchdist.spawn import spawn_local
from psml_core.errors import ConfigError
from psml_core.metrics.records import IterationRecord

__all__ = ["DistBackend", "DistOptions", "DistResult", "check_supported"]


@contextlib.contextmanager
def _logs_in(logs: Path | None) -> Iterator[None]:
    """``$PSML_DIST_LOG_DIR`` set to ``logs`` while the spawned ranks run (they inherit it)."""
    if logs is None or os.environ.get(LOG_DIR_ENV):
        yield
        return
    os.environ[LOG_DIR_ENV] = str(logs)
    try:
        yield
    finally:
        del os.environ[LOG_DIR_ENV]


@BACKENDS.register("dist")
class DistBackend(Backend):
    """Real processes over torch.distributed (gloo); see the module docstring.

    Args:
        options: Backend options (default: from the ``PSML_DIST_*`` environment). A launched
            rank uses its session's options, which the launcher read from the environment.
    """

    clock = "wall-clock"

    def transport(self) -> dict[str, Any]:
        """Where the body messages went (``gloo``, ``nccl``, ``gloo-ordered``), after a run."""
        return {"body_messages": self.result.bodies} if self.result is not None else {}

    @classmethod
    def refusal(cls, method: MethodRecipe) -> str | None:
        """Placements that move keys (:func:`psml_core.capabilities.dist_refusal`)."""
        return dist_refusal(method)

    def __init__(self, options: DistOptions | None = None, logs: Path | None = None) -> None:
        self.options = options or DistOptions.from_env()
        self.logs = logs
        self.result: DistResult | None = None

    @classmethod
    def for_run(cls, spec: RunSpec, checkpoint: Path) -> DistBackend:
        """A run's backend: its spawned ranks send torch's C++ output to ``<out>.ranks/``.

        The ranks' logs go to ``rank<r>.log`` there, not to the terminal
        (:mod:`~psml_core.engine.torchdist.rank_log`), unless ``$PSML_DIST_LOG_DIR`` says where.
        """
        return cls(logs=log_dir(os.environ, checkpoint.parent))

    def run(self, job: Job, progress: Progress | None = None) -> list[IterationRecord]:
        """Run the job's ranks (spawned here, or this launched rank); records on rank 0.

        ``progress``: rank 0 (shard 0) reports each evaluation and each iteration it completed,
        on the wall clock, with shard 0's traffic (a spawned rank 0 reports to the same stream,
        as :meth:`Progress.settings` describes).
        """
        check_supported(job)
        if self.options.bodies == "nccl" and job.spec.torch_device == "cpu":
            raise ConfigError(
                "PSML_DIST_BODIES=nccl needs device: cuda (NCCL moves data between GPUs only); "
                "use PSML_DIST_BODIES=auto or gloo on the CPU"
            )
        progress = progress or NO_PROGRESS
        session = current_session()
        if session is None:
            with _logs_in(self.logs):
                result: DistResult | None = spawn_local(job, self.options, progress)
        else:
            result = run_rank(job, session, progress)
        if result is None:
            return []
        for s, values in result.values.items():
            job.shards[s].values[:] = values
        self.result = result
        return result.records
