"""Placement: which worker holds which samples, which shard holds which parameters."""

from psml_core.placement.base import (
    PLACEMENTS,
    Assignment,
    Placement,
    PlacementProblem,
    make_placement,
)
from psml_core.placement.cost import predicted_traffic
from psml_core.placement.range import RangePlacement

__all__ = [
    "PLACEMENTS",
    "Assignment",
    "Placement",
    "PlacementProblem",
    "RangePlacement",
    "make_placement",
    "predicted_traffic",
]
