"""Bulk-synchronous parallel (BSP)."""

from __future__ import annotations

from collections.abc import Sequence

from psml_core.sync.base import SYNC_POLICIES, SyncPolicy

__all__ = ["BSP"]


@SYNC_POLICIES.register("bsp")
class BSP(SyncPolicy):
    """Bulk-synchronous parallel: every worker waits for the slowest at every iteration.

    The server averages the P gradients of clock t into one update; no worker starts iteration
    t + 1 before all have pushed iteration t. Staleness is always 0. This is the baseline every
    paper in the suite measures against (SSP with s = 0).
    """

    barrier = True

    def may_proceed(self, worker: int, clocks: Sequence[int]) -> bool:
        """Only when every worker has reached this worker's clock."""
        return min(clocks) >= clocks[worker]
