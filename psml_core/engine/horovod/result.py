"""What a Horovod rank hands back at the end of a run (pickled from the ranks to the spawner)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from psml_core.control.base import Controller, Observation
from psml_core.metrics.records import IterationRecord

__all__ = ["HorovodResult"]


@dataclass
class HorovodResult:
    """What a rank holds at the end of a run (records only on rank 0).

    Attributes:
        records: Every worker's records with test metrics, sorted by (iteration, worker); empty
            on ranks other than 0.
        params: The final parameters (identical on every rank).
        collective: ``allreduce`` or ``allgather``.
        observations: Per rank, the observations its controller was given, one per step.
        controller: Rank 0's controller after the run (the spawner installs it into the job).
    """

    records: list[IterationRecord]
    params: np.ndarray
    collective: str
    observations: dict[int, list[Observation]] = field(default_factory=dict)
    controller: Controller | None = None
