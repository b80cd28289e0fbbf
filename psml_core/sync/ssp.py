"""Stale synchronous parallel (SSP)."""

from __future__ import annotations

from collections.abc import Sequence

from psml_core.errors import ConfigError
from psml_core.sync.base import SYNC_POLICIES, SyncPolicy

__all__ = ["SSP"]


@SYNC_POLICIES.register("ssp")
class SSP(SyncPolicy):
    """Stale synchronous parallel (Ho et al., NIPS 2013), staleness bound ``s``.

    The server applies each push as it arrives. A worker that has completed ``c`` iterations may
    start the next only while ``c - min_q c_q <= s``: no worker runs more than ``s`` iterations
    ahead of the slowest, so every gradient is computed on parameters that miss at most ``s``
    rounds of other workers' updates. ``s = 0`` behaves like BSP without the averaged barrier
    update; large ``s`` approaches ASP.

    Tuning: the bound trades waiting for staleness; the PCP paper's complaint is that ``s`` is
    "set by experience" — the suite sweeps s in {1, 2, 4, 8}.

    Args:
        staleness: The bound s >= 0.
    """

    barrier = False

    def __init__(self, staleness: int = 2) -> None:
        if not isinstance(staleness, int) or staleness < 0:
            raise ConfigError(
                f"sync policy 'ssp': params.staleness must be an integer >= 0, got {staleness!r}"
            )
        self.s = staleness

    def may_proceed(self, worker: int, clocks: Sequence[int]) -> bool:
        """While the worker is at most ``s`` iterations ahead of the slowest."""
        return clocks[worker] - min(clocks) <= self.s
