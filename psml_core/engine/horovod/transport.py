"""A Horovod rank's transport: its step's gradient exchange as collectives, on the wall clock.

:class:`HorovodTransport` is the horovod backend's part of
:class:`~psml_core.engine.loop.WorkerLoop`. A rank holds the whole replica, so its pull moves
nothing; its push is the exchange (a dense allreduce or the codec payloads' allgather, see
:mod:`psml_core.engine.horovod.backend`), the optimizer's update of the replica, and one control
allreduce that hands every rank's controller the slowest rank's figures. Time per step:
``compute_s`` the gradient (stretched by the heterogeneity factor when emulating), ``comm_s``
the injected delay, the exchange and the update, ``wait_s`` the control allreduce (a barrier
that absorbs the skew between ranks).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from psml_core.control.base import Observation
from psml_core.engine.job import Job
from psml_core.engine.loop import Pulled, Pushed, Steps, Transport, done
from psml_core.errors import RunError
from psml_core.sync.rounds import RoundReport

__all__ = ["HorovodTransport", "slowest"]

Exchange = Callable[[np.ndarray, int, float], tuple[int, int]]


def slowest(hvd: Any, rank: int, t: int, comm: float, compute: float, ratio: float) -> Observation:
    """Step ``t`` as the controller sees it: the slowest rank's times and the step's ratio.

    Raises:
        RunError: the ranks used different ratios (a controller must be deterministic).
    """
    stats = torch.tensor([comm, compute, ratio, -ratio], dtype=torch.float64)
    mx = hvd.allreduce(stats, op=hvd.Max, name="psml.control").tolist()
    if mx[2] != -mx[3]:
        raise RunError(
            f"rank {rank}: the ranks' controllers disagree on the ratio of step {t} "
            f"(from {-mx[3]} to {mx[2]}); a controller must be deterministic"
        )
    # Every rank encoded at this ratio (checked): the one the observation was measured at.
    return Observation(step=t, comm_s=mx[0], compute_s=mx[1], ratio=mx[2])


class HorovodTransport(Transport):
    """Rank ``rank``'s exchanges; its rows and the controller's observations.

    Args:
        hvd: The initialised ``horovod.torch`` module.
        job: The run (this rank's worker is ``job.workers[rank]``).
        rank: This rank.
        exchange: The step's exchange: (gradient, step, ratio) to (bytes up, bytes down); it
            updates the replica.
        delay: The injected delay per step (``delay_s(t)``), or None.
        emulate: Whether stragglers' slowdowns are emulated by sleeping.
        evaluate: Rank 0: called with (step, replica) after the steps to evaluate.
        t0: The wall-clock origin (every rank's, after a barrier).
    """

    stops_diverged = False  # every rank must reach every collective: a NaN loss is recorded

    def __init__(
        self,
        hvd: Any,
        job: Job,
        rank: int,
        exchange: Exchange,
        delay: Any,
        emulate: bool,
        evaluate: Callable[[int, np.ndarray], None] | None,
        t0: float,
    ) -> None:
        self.hvd, self.job, self.rank = hvd, job, rank
        self.exchange = exchange
        self.delay, self.emulate, self.evaluate = delay, emulate, evaluate
        self.params = job.workers[rank].params
        self.remote = [True]  # one collective, no shards: every byte goes to other ranks
        self.ratio = 1.0
        self.rows: list[dict[str, Any]] = []
        self.observed: list[Observation] = []
        self.t0 = self.mark = self.start = self.compute_end = t0

    def now(self) -> float:
        """Wall-clock seconds since the start, at the end of the last phase."""
        return self.mark - self.t0

    def begin(self, t: int, prev_comm: float) -> Steps:
        """The step's ratio, the same on every rank."""
        self.ratio = float(self.job.controller.ratio(t))
        return done(None)

    def pull(self, t: int) -> Steps:
        """Nothing to pull: the replica holds the last step's update."""
        return done(Pulled(up=[0], down=[0], extra=[{}], wait=0.0, comm=0.0))

    def computed(self, t: int, cost: float) -> float:
        """The measured gradient time, a straggler's slowdown emulated by sleeping."""
        if self.emulate:
            factor = self.job.speed.factor(self.rank, t)
            if factor > 1.0:
                time.sleep((factor - 1.0) * (time.perf_counter() - self.start))
        self.mark = self.compute_end = time.perf_counter()
        return self.compute_end - self.start

    def push(self, t: int, vector: np.ndarray, compute: float, report: RoundReport | None) -> Steps:
        """Exchange, update the replica, then the control allreduce."""
        if self.delay is not None:
            time.sleep(self.delay.delay_s(t))
        up, down = self.exchange(vector, t, self.ratio)  # the replica is updated
        comm_end = time.perf_counter()
        comm = comm_end - self.compute_end
        obs = slowest(self.hvd, self.rank, t, comm, compute, self.ratio)
        self.mark = time.perf_counter()
        self.job.controller.observe(obs)
        self.observed.append(obs)
        return done(
            Pushed(
                up=[up],
                down=[down],
                ratio=self.ratio,
                comm=comm,
                round_comm=comm,
                wait=self.mark - comm_end,
            )
        )

    def record(self, t: int, row: dict[str, Any]) -> None:
        """Keep the row (no per-shard split: there are no shards); rank 0 evaluates."""
        row.update(loss=float(row["loss"]), shard_bytes_up=(), shard_bytes_down=())
        if self.evaluate is not None and self.job.should_evaluate(t):
            self.evaluate(t, self.params)
        self.rows.append(row)
        self.start = self.mark

    def last_row(self) -> dict[str, Any]:
        """This rank's last row."""
        return self.rows[-1]
