"""The SyncPolicy ABC and its registry.

A server shard keeps one clock per worker: the number of pushes it has applied from that worker.
Before it answers a worker's pull for the worker's next iteration, it asks the policy whether the
worker may proceed given every worker's clock. BSP, ASP and SSP(s) differ only in that answer;
PCP (later) also sees predicted arrival times.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from psml_core.config import BlockSpec
from psml_core.errors import ConfigError
from psml_core.registry import Registry

__all__ = ["SYNC_POLICIES", "SyncPolicy", "make_sync_policy"]


class SyncPolicy(ABC):
    """Decides when a worker may start its next iteration.

    Attributes:
        barrier: True if the server applies the pushes of one clock together, as one averaged
            update (BSP); False if it applies each push as it arrives.
    """

    name: ClassVar[str]
    barrier: ClassVar[bool]

    @abstractmethod
    def may_proceed(self, worker: int, clocks: Sequence[int]) -> bool:
        """May ``worker``, whose pushes up to ``clocks[worker]`` are applied, pull and go on?"""

    def staleness(self, worker: int, clocks: Sequence[int]) -> int:
        """How far ``worker`` is ahead of the slowest worker."""
        return clocks[worker] - min(clocks)


SYNC_POLICIES: Registry[type[SyncPolicy]] = Registry("sync policy")


def make_sync_policy(spec: BlockSpec) -> SyncPolicy:
    """Instantiate a sync policy from its recipe block."""
    cls = SYNC_POLICIES.get(spec.name, where="sync.name")
    try:
        return cls(**spec.params)
    except TypeError as exc:
        raise ConfigError(
            f"sync policy {spec.name!r}: bad params {spec.params!r} ({exc})"
        ) from None
