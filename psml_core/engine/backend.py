"""The Backend ABC: runs a :class:`~psml_core.engine.job.Job` and returns its records."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from psml_core.config import MethodRecipe
from psml_core.engine.job import Job
from psml_core.engine.progress import Progress
from psml_core.metrics.records import IterationRecord
from psml_core.registry import Registry

__all__ = ["BACKENDS", "Backend"]


class Backend(ABC):
    """Moves the messages of a job and keeps its clock.

    Attributes:
        clock: "simulated" (virtual time) or "wall-clock" (real time).
    """

    name: ClassVar[str]
    clock: ClassVar[str]

    @abstractmethod
    def run(self, job: Job, progress: Progress | None = None) -> list[IterationRecord]:
        """Train to the end and return every worker's per-iteration records.

        ``progress`` (default: none) hears of each evaluation, and each iteration where the
        backend knows it (:mod:`psml_core.engine.progress`); it never changes the results.
        """

    def transport(self) -> dict[str, Any]:
        """After :meth:`run`: what moved the messages, for the summary ({}: nothing to say)."""
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
