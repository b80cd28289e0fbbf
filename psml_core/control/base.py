"""The Controller ABC: the compression ratio for the next step, from what was observed."""

from __future__ import annotations

import math
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
        comm_s: The step's network delay ``D_t``: the time its messages spent on the network,
            from a message's first byte handed to the network to its last byte arriving, not
            the compute, encode, decode, sync wait or server processing around them (the sim
            backend measures it so; see :class:`~psml_core.control.feed.ControllerFeed`).
        compute_s: Compute time of the step.
        ratio: The ratio the step's messages were encoded at (NaN where unknown); the feed
            fills it in, so a controller can correct from the ratio an observation was
            measured at rather than from the one in force when it arrives.
    """

    step: int
    comm_s: float
    compute_s: float
    ratio: float = math.nan


class Controller(ABC):
    """Chooses the compression ratio, shared by all workers, for each step."""

    name: ClassVar[str]

    @abstractmethod
    def ratio(self, step: int) -> float:
        """The ratio in force for ``step``, in (0, 1]."""

    def observe(self, obs: Observation) -> None:  # noqa: B027 - optional hook, default no-op
        """Take in the figures of a finished step (static controllers ignore them)."""


CONTROLLERS: Registry[type[Controller]] = Registry("controller")
