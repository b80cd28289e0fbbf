"""The SyncPolicy ABC and its registry.

A server shard keeps one clock per worker: the number of pushes it has applied from that worker.
Before it answers a worker's pull for the worker's next iteration, it asks the policy whether the
worker may proceed given every worker's clock. BSP, ASP and SSP(s) differ only in that answer;
DSSP also sees when pushes arrive (:meth:`SyncPolicy.observe_push`); PCP (a *round* policy,
:attr:`SyncPolicy.rounds`) replaces per-iteration pushes by rounds of local steps whose number the
server sets per worker from predicted iteration times (:mod:`.pcp`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from psml_core.registry import Registry

__all__ = ["SYNC_POLICIES", "SyncPolicy"]


class SyncPolicy(ABC):
    """Decides when a worker may start its next iteration.

    Attributes:
        barrier: True if the server applies the pushes of one clock together, as one averaged
            update (BSP); False if it applies each push as it arrives.
        rounds: True for round policies (PCP): a clock is a round of server-granted local steps,
            and a push carries the worker's accumulated model change, merged by weight.
    """

    name: ClassVar[str]
    barrier: ClassVar[bool]
    rounds: ClassVar[bool] = False

    def observe_serve(self, worker: int, clock: int, now: float) -> None:  # noqa: B027
        """``worker``'s pull for iteration ``clock`` was answered at ``now`` (default: ignored)."""

    def observe_push(self, worker: int, clock: int, now: float) -> None:  # noqa: B027
        """A push of ``worker``'s iteration ``clock`` arrived at time ``now`` (default: ignored).

        ``now`` is on the run's clock (simulated or wall-clock); policies that predict from
        arrival times (DSSP) keep what they need.
        """

    @abstractmethod
    def may_proceed(self, worker: int, clocks: Sequence[int]) -> bool:
        """May ``worker``, whose pushes up to ``clocks[worker]`` are applied, pull and go on?"""

    def staleness(self, worker: int, clocks: Sequence[int]) -> int:
        """How far ``worker`` is ahead of the slowest worker."""
        return clocks[worker] - min(clocks)


SYNC_POLICIES: Registry[type[SyncPolicy]] = Registry("sync policy", key="sync")
