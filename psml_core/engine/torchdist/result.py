"""What rank 0 of a dist run assembles at the end (pickled from rank 0 to the spawner)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from psml_core.engine.torchdist.wire import WireStats
from psml_core.metrics.records import IterationRecord

__all__ = ["INPUTS", "RESULT", "DistResult"]

INPUTS = "inputs.pkl"
"""The local spawner's file of the ranks' inputs (spec, data, placement, options)."""
RESULT = "result.pkl"
"""The file where rank 0 of a locally spawned run leaves its :class:`DistResult`."""


@dataclass
class DistResult:
    """What rank 0 assembles at the end of a run.

    Attributes:
        records: Every worker's records, with test metrics, sorted by (iteration, worker).
        values: Final values of each shard.
        wire: Wire statistics of each rank.
        bodies: Where the body messages of DATA went: ``gloo`` (tagged), ``nccl`` or
            ``gloo-ordered`` (:mod:`.bodies`).
    """

    records: list[IterationRecord]
    values: dict[int, np.ndarray]
    wire: dict[int, WireStats] = field(default_factory=dict)
    bodies: str = "gloo"
