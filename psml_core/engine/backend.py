"""The Backend ABC: runs a :class:`~psml_core.engine.job.Job` and returns its records.

What psml knows of a backend before it runs (its clock, processes, checkpointing, refusals) is
its descriptor, :class:`~psml_core.backend_info.BackendInfo`, which names the class; the hooks
here are what :func:`~psml_core.engine.training.train` asks the class while a run goes on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from psml_core.config import MethodRecipe, RunSpec
from psml_core.engine.job import Job
from psml_core.engine.progress import Progress
from psml_core.metrics.records import IterationRecord
from psml_core.registry import Registry

__all__ = ["BACKENDS", "CHECKPOINT_NAME", "Backend"]

CHECKPOINT_NAME = "checkpoint.pkl"
"""A checkpointing backend's file in the run's output directory (removed once results are in)."""


class Backend(ABC):
    """Moves the messages of a job and keeps its clock.

    Attributes:
        clock: "simulated" (virtual time) or "wall-clock" (real time), as its descriptor says.
        keeps_vectors_on_device: Whether a run on a GPU keeps the workers' and shards' vectors
            there (:func:`~psml_core.engine.device_state.keep_on_device`); else the model alone
            moves to the device.
        resumed_at: After :meth:`run`: the iteration a run resumed from its checkpoint, or None.
    """

    name: ClassVar[str]
    clock: ClassVar[str]
    keeps_vectors_on_device: ClassVar[bool] = False
    resumed_at: int | None = None

    @classmethod
    def for_run(cls, spec: RunSpec, checkpoint: Path) -> Backend:
        """The backend for run ``spec``; ``checkpoint``: where its checkpoint would live.

        Only a backend whose descriptor says it checkpoints uses ``checkpoint``.
        """
        return cls()

    @abstractmethod
    def run(self, job: Job, progress: Progress | None = None) -> list[IterationRecord]:
        """Train to the end and return every worker's per-iteration records.

        ``progress`` (default: none) hears of each evaluation, and each iteration where the
        backend knows it (:mod:`psml_core.engine.progress`); it never changes the results.
        """

    def transport(self) -> dict[str, Any]:
        """After :meth:`run`: what moved the messages, for the summary ({}: nothing to say)."""
        return {}

    def describe_time_model(self, job: Job) -> dict[str, Any]:
        """After :meth:`run`: what its clock assumed beyond the compute model, for the summary.

        The sim's overlap, how it computed the gradients and its codec costs; {}: nothing more
        (a wall clock measures).
        """
        return {}

    @classmethod
    def refusal(cls, method: MethodRecipe) -> str | None:
        """Why this backend cannot run ``method`` faithfully, with the fix; None if it can.

        Asked for every recipe of a tier when its config is loaded
        (:func:`psml_core.capabilities.check_backend`), so that no job of a tier the
        backend cannot run starts, and again when the backend runs a job (a run spec written
        by hand).
        """
        return None


BACKENDS: Registry[type[Backend]] = Registry("backend")
