"""Asynchronous parallel (ASP)."""

from __future__ import annotations

from collections.abc import Sequence

from psml_core.sync.base import SYNC_POLICIES, SyncPolicy

__all__ = ["ASP"]


@SYNC_POLICIES.register("asp")
class ASP(SyncPolicy):
    """Asynchronous parallel: no worker ever waits for another (SSP with s = infinity).

    The server applies each push as it arrives (scaled by 1/P) and answers every pull at once
    with its current parameters, however stale the puller's gradient was. Fast workers never
    idle; the price is stale gradients, unbounded in principle.
    """

    barrier = False

    def may_proceed(self, worker: int, clocks: Sequence[int]) -> bool:
        """Always."""
        return True
