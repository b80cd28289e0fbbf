"""What a simulated run keeps per worker and per shard between its messages.

:class:`~psml_core.engine.sim.processes.RunState` holds the run's own state (its rows,
evaluations and controller feed) and one of these per worker and per shard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import simpy

from psml_core.engine.server import ServerShard
from psml_core.engine.shard_service import ShardService
from psml_core.engine.sim.thread import ServerThread

__all__ = ["ShardState", "WorkerState"]


@dataclass
class WorkerState:
    """A simulated worker's state between its messages.

    Attributes:
        extra: Per shard, the codec state the shard published for this worker's next push (DFS
            masks, a round policy's step budget); saved in a checkpoint.
        landing: Per shard, this worker's last push until the shard has served it: the shard
            takes the worker's next request, queued behind the push on their connection, only
            after it.
    """

    extra: list[dict[str, Any]]
    landing: list[simpy.Event | None]

    @classmethod
    def of(cls, shards: int) -> WorkerState:
        """A worker's state before its first message."""
        return cls([{} for _ in range(shards)], [None] * shards)


@dataclass
class ShardState:
    """A simulated shard's service and server thread.

    Attributes:
        service: The shard's service: it holds the pulls the sync policy does not let through
            (each with the SimPy event its pull waits on) and releases them as pushes apply.
        thread: The server thread: decoding pushes, aggregating, encoding answers.
    """

    service: ShardService
    thread: ServerThread

    @classmethod
    def of(cls, env: simpy.Environment, shard: ServerShard) -> ShardState:
        """A shard's state before the first message."""
        return cls(ShardService(shard), ServerThread(env))
