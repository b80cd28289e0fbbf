"""The Controller ABC: the compression ratio for the next step, from what was observed."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from psml_core.registry import Registry

__all__ = ["CONTROLLERS", "Controller", "Observation"]


@dataclass(frozen=True)
class Observation:
    """What a controller sees after a step (the slowest worker's figures, as BSP is gated by it).

    Attributes:
        step: The step just finished.
        comm_s: Communication time of the step.
        compute_s: Compute time of the step.
    """

    step: int
    comm_s: float
    compute_s: float


class Controller(ABC):
    """Chooses the compression ratio, shared by all workers, for each step."""

    name: ClassVar[str]

    @abstractmethod
    def ratio(self, step: int) -> float:
        """The ratio in force for ``step``, in (0, 1]."""

    def observe(self, obs: Observation) -> None:  # noqa: B027 - optional hook, default no-op
        """Take in the figures of a finished step (static controllers ignore them)."""


CONTROLLERS: Registry[type[Controller]] = Registry("controller")
