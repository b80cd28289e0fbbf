"""The checkpoint's drain in a simulated run: hold every worker, then save (see ``checkpoint``).

The part of :class:`~psml_core.engine.sim.processes.RunState` that takes checkpoints: a worker
reaching a checkpoint step waits there until every worker has; the last one waits further while
the servers still process pushes, then saves the state and releases the others.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import simpy

from psml_core.engine.progress import Progress
from psml_core.engine.sim.checkpoint import SimCheckpoint, capture_job, save_checkpoint
from psml_core.engine.sim.gate import Gate

__all__ = ["CheckpointDrain"]


class CheckpointDrain:
    """The part of the run state that drains the workers and saves a checkpoint.

    Uses the run state's ``env``, ``job``, ``checkpoint``, ``gates``, ``progress``, its records
    (``applied``, ``evals``, ``rows``, ``feed``, ``extra``), ``_drain``, ``_serving``, ``_idle``
    and ``bytes_so_far``.
    """

    env: simpy.Environment
    job: Any
    checkpoint: Path | None
    gates: list[Gate]
    progress: Progress
    applied: dict[int, int]
    evals: dict[int, tuple[float, float]]
    rows: list[dict[str, Any]]
    feed: Any
    extra: list[list[dict[str, Any]]]
    _drain: dict[int, tuple[simpy.Event, list[int], list[float], list[float]]]
    _serving: int
    _idle: simpy.Event | None

    bytes_so_far: Callable[[], tuple[int, int]]

    def drain(self, p: int, t: int, prev_comm: float) -> Generator[Any, Any, float]:
        """Hold worker ``p`` at iteration ``t`` until all are here; the last saves the state.

        Returns the time ``p`` waited.
        """
        spec = self.job.spec
        if t not in self._drain:
            self._drain[t] = (self.env.event(), [], [0.0] * spec.workers, [0.0] * spec.workers)
        done, order, arrived, prev = self._drain[t]
        order.append(p)
        arrived[p], prev[p] = self.env.now, prev_comm
        if len(order) == spec.workers:
            if self._serving:  # the servers are still processing pushes: nothing in flight
                self._idle = self.env.event()
                yield self._idle
            del self._drain[t]
            self.save(t, order, arrived, prev)
            done.succeed()
        else:
            yield done
        return self.env.now - arrived[p]

    def save(self, t: int, order: list[int], arrived: list[float], prev: list[float]) -> None:
        """Write the checkpoint of the drain before iteration ``t``."""
        assert self.checkpoint is not None
        assert not any(g.waiting for g in self.gates), "not drained"
        workers, shards, parts = capture_job(self.job)
        run = {
            "applied": self.applied,
            "evals": self.evals,
            "rows": self.rows,
            "feed": self.feed,
            "extra": self.extra,
        }
        save_checkpoint(
            self.checkpoint,
            SimCheckpoint(
                config_hash=self.job.spec.config_hash(),
                iteration=t,
                now=self.env.now,
                arrived=list(arrived),
                prev_comm=list(prev),
                # The last to arrive went on at once, the others when the drain released them.
                order=[order[-1], *order[:-1]],
                workers=workers,
                shards=shards,
                run=run,
                job=parts,
            ),
        )
        up, down = self.bytes_so_far()
        self.progress.checkpoint(t, sim_time=self.env.now, bytes_up=up, bytes_down=down)
