"""Even range placement: PS-lite's default."""

from __future__ import annotations

import numpy as np

from psml_core.errors import ConfigError
from psml_core.placement.base import PLACEMENTS, Assignment, Placement, PlacementProblem

__all__ = ["RangePlacement", "even_ranges"]


def even_ranges(n: int, parts: int) -> np.ndarray:
    """Owner of each of ``n`` items when split into ``parts`` contiguous, near-equal ranges."""
    if parts > n:
        raise ConfigError(f"cannot split {n} items over {parts} parts; use fewer workers/shards")
    return (np.arange(n, dtype=np.int64) * parts // n).astype(np.int32)


@PLACEMENTS.register("range")
class RangePlacement(Placement):
    """Contiguous, even ranges: samples by row order, keys by index (PS-lite's key-range split).

    Prepared data sets are already shuffled, so contiguous sample ranges are a random split.
    """

    def assign(self, problem: PlacementProblem, workers: int, shards: int) -> Assignment:
        """Split samples over workers and keys over shards in contiguous ranges."""
        return Assignment(
            sample_owner=even_ranges(problem.n_samples, workers),
            key_owner=even_ranges(problem.n_keys, shards),
        )
