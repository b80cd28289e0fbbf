"""Placement: which worker holds which samples, which shard holds which parameters.

Importing this package registers every placement in :data:`PLACEMENTS`: ``range``, ``random``,
``hash``, ``parsa``, ``metis`` and ``dynamic`` (whose run-time reassignment is
:class:`DynamicChunkPartition`).
"""

from psml_core.placement.base import PLACEMENTS, Assignment, Placement, PlacementProblem
from psml_core.placement.cost import predicted_traffic
from psml_core.placement.dynamic import DynamicChunkPartition, DynamicPlacement, Reassignment
from psml_core.placement.hash import HashPlacement
from psml_core.placement.metis import MetisPlacement
from psml_core.placement.parsa import ParsaPlacement
from psml_core.placement.random import RandomPlacement
from psml_core.placement.range import RangePlacement

__all__ = [
    "PLACEMENTS",
    "Assignment",
    "DynamicChunkPartition",
    "DynamicPlacement",
    "HashPlacement",
    "MetisPlacement",
    "ParsaPlacement",
    "Placement",
    "PlacementProblem",
    "RandomPlacement",
    "RangePlacement",
    "Reassignment",
    "predicted_traffic",
]
