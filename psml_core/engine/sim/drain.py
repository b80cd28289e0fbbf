"""The checkpoint's drain in a simulated run: hold every worker, then save (see ``checkpoint``).

A worker reaching a checkpoint step waits there until every worker has; the last one waits
further while the servers still process pushes, then saves the state and releases the others.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any, Protocol

import simpy

from psml_core.engine.job import Job
from psml_core.engine.progress import Progress
from psml_core.engine.sim.checkpoint import SimCheckpoint, capture_job, save_checkpoint
from psml_core.engine.sim.state import ShardState

__all__ = ["CheckpointDrain"]


class _Run(Protocol):
    """What the drain needs of the run's state (:class:`~.processes.RunState`)."""

    env: simpy.Environment
    job: Job
    progress: Progress
    shard_state: list[ShardState]

    def saved(self) -> dict[str, Any]: ...

    def bytes_so_far(self) -> tuple[int, int]: ...


class CheckpointDrain:
    """Drains a run's workers at its checkpoint steps and saves the checkpoint.

    Args:
        run: The run's state (its records, feed and workers' codec state are saved).
        path: Where the checkpoint goes.
    """

    def __init__(self, run: _Run, path: Path) -> None:
        self.run, self.path = run, path
        # Per checkpoint step: the release event, the arrival order, when each worker arrived
        # and its previous round's communication time.
        self._held: dict[int, tuple[simpy.Event, list[int], list[float], list[float]]] = {}
        self.in_flight = 0  # pushes sent and not yet served: a drain waits until none is left
        self._idle: simpy.Event | None = None

    def push_sent(self) -> None:
        """A push left a worker: the run is not drained until the shard has served it."""
        self.in_flight += 1

    def push_served(self) -> None:
        """A shard served a push; the last one releases a drain waiting for the servers."""
        self.in_flight -= 1
        if self.in_flight == 0 and self._idle is not None:
            self._idle.succeed()
            self._idle = None

    def drain(self, p: int, t: int, prev_comm: float) -> Generator[Any, Any, float]:
        """Hold worker ``p`` at iteration ``t`` until all are here; the last saves the state.

        Returns the time ``p`` waited.
        """
        env, workers = self.run.env, self.run.job.spec.workers
        if t not in self._held:
            self._held[t] = (env.event(), [], [0.0] * workers, [0.0] * workers)
        done, order, arrived, prev = self._held[t]
        order.append(p)
        arrived[p], prev[p] = env.now, prev_comm
        if len(order) == workers:
            if self.in_flight:  # the servers are still processing pushes: nothing in flight
                self._idle = env.event()
                yield self._idle
            del self._held[t]
            self.save(t, order, arrived, prev)
            done.succeed()
        else:
            yield done
        return env.now - arrived[p]

    def save(self, t: int, order: list[int], arrived: list[float], prev: list[float]) -> None:
        """Write the checkpoint of the drain before iteration ``t``."""
        run = self.run
        assert all(s.service.idle() for s in run.shard_state), "not drained"
        workers, shards, parts = capture_job(run.job)
        save_checkpoint(
            self.path,
            SimCheckpoint(
                config_hash=run.job.spec.config_hash(),
                iteration=t,
                now=run.env.now,
                arrived=list(arrived),
                prev_comm=list(prev),
                # The last to arrive went on at once, the others when the drain released them.
                order=[order[-1], *order[:-1]],
                workers=workers,
                shards=shards,
                run=run.saved(),
                job=parts,
            ),
        )
        up, down = run.bytes_so_far()
        run.progress.checkpoint(t, sim_time=run.env.now, bytes_up=up, bytes_down=down)
