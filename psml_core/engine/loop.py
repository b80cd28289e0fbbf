"""The worker's iteration, written once, over a transport that each backend provides.

:class:`WorkerLoop` is what a worker does in a step, on every backend:

1. **begin**: the transport's hook before a step (a simulated checkpoint's drain, an injected
   fault, the step's ratio);
2. **pull** every shard's answer and install it in the replica (:meth:`Transport.pull`); under
   a round policy (PCP) shard 0's answer grants the step budget, and a budget of 0 ends the
   run: that last pull's bytes and time join the worker's last record;
3. **compute** one gradient, or the round's granted local steps
   (:func:`~psml_core.engine.step.compute_step`; the gradient from :meth:`Transport.gradient`
   where the simulator batched it with the step's others), timed by the transport;
4. **push** the result, encoded per shard (:meth:`Transport.push`);
5. **record** the iteration (:func:`~psml_core.engine.step.step_row`) through the transport's
   hook, which keeps the row and feeds progress, the controller and the dynamic placement.

A :class:`Transport` says how messages move and what time it is: SimPy events over the
fair-share network on a simulated clock (``sim``), gloo messages on the wall clock (``dist``),
collectives on the wall clock (``horovod``). The loop is a generator: a simulated transport
suspends it on SimPy events (the loop runs as a SimPy process), while a blocking transport
never suspends it and :func:`run_blocking` runs it to its end.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from psml_core.engine.step import (
    budget_spent,
    compute_step,
    fold_final_pull,
    step_budget,
    step_row,
)
from psml_core.sync.rounds import RoundReport

if TYPE_CHECKING:
    from psml_core.engine.worker import Worker
    from psml_core.models.base import Matrix

__all__ = ["Pulled", "Pushed", "Steps", "Transport", "WorkerLoop", "done", "run_blocking"]

Steps = Generator[Any, Any, Any]


@dataclass
class Pulled:
    """What a worker's pull of one step moved and cost, every shard's answer installed.

    Attributes:
        up: Counted bytes of the request to each shard.
        down: Counted bytes of each shard's answer (plus keys that migrated to this machine).
        extra: Each shard's published state (step budget, DFS masks, ...).
        wait: Time held before the answers (sync gates, a checkpoint's drain, a migration).
        comm: The pull's communication time on the critical path.
        codec: The device's decode time of the answers (sim; 0 where measured in ``comm``).
        staleness: The largest staleness a shard reported.
        lossless_up: The requests' Snappy-coded bytes (``lossless: snappy``), else None.
        lossless_down: The answers' Snappy-coded bytes, else None.
        remote_down: The remote part of ``down`` where it is not the remote shards' (keys
            migrated); None sums the remote shards'.
        migration_bytes: The part of ``down`` that is keys moving to this machine.
    """

    up: Sequence[int]
    down: Sequence[int]
    extra: Sequence[dict[str, Any]]
    wait: float
    comm: float
    codec: float = 0.0
    staleness: int = 0
    lossless_up: int | None = None
    lossless_down: int | None = None
    remote_down: int | None = None
    migration_bytes: int = 0


@dataclass
class Pushed:
    """What a worker's push of one step moved and cost.

    Attributes:
        up: Counted bytes of the push to each shard.
        ratio: The compression ratio the push was encoded at.
        comm: Push time on the critical path (beyond the device's work, or measured).
        round_comm: The push's whole communication time (a round report's figure).
        codec: The device's encode time (sim; 0 where measured in ``comm``).
        wait: Time held after the push (a collective's control barrier).
        lossless_up: The pushes' Snappy-coded bytes, else None.
        down: Counted bytes received during the push (a collective's), added to the pull's;
            empty where a push receives nothing.
    """

    up: Sequence[int]
    ratio: float
    comm: float
    round_comm: float
    codec: float = 0.0
    wait: float = 0.0
    lossless_up: int | None = None
    down: Sequence[int] = ()


class Transport(ABC):
    """How one worker's messages move and what time it is: a backend's part of the loop.

    Every step method is a generator: a simulated transport yields SimPy events, a blocking
    one returns at once (:func:`done`).
    """

    #: Per shard, whether it is on another machine (its bytes cross the network).
    remote: Sequence[bool]
    #: Whether a non-finite step ends the run (:class:`~psml_core.errors.Diverged`); a
    #: collective's ranks must all go on instead, and the record shows the non-finite loss.
    stops_diverged: bool = True

    @abstractmethod
    def now(self) -> float:
        """The clock (seconds since the run started)."""

    def begin(self, t: int, prev_comm: float) -> Steps:
        """Hook before step ``t`` (``prev_comm``: the last round's communication time)."""
        return done(None)

    @abstractmethod
    def pull(self, t: int) -> Steps:
        """Step ``t``'s pull from every shard, answers installed; returns :class:`Pulled`."""

    def gradient(self, worker: Worker, t: int) -> Callable[[], tuple[float, Any]] | None:
        """Where step ``t``'s one gradient comes from; None: ``worker.compute()``.

        The simulator hands out gradients it computed with the step's others
        (:mod:`psml_core.engine.sim.gradients`).
        """
        return None

    def step_cost(self, batch: Matrix) -> float:
        """A gradient step's modelled seconds (sim), or an injected delay's hook (0)."""
        return 0.0

    @abstractmethod
    def computed(self, t: int, cost: float) -> float:
        """The step's compute time, given the summed :meth:`step_cost` of its steps."""

    @abstractmethod
    def push(self, t: int, vector: np.ndarray, compute: float, report: RoundReport | None) -> Steps:
        """Step ``t``'s push of ``vector`` to every shard; returns :class:`Pushed`."""

    @abstractmethod
    def record(self, t: int, row: dict[str, Any]) -> None:
        """Keep step ``t``'s row (and feed progress, the controller, the placement)."""

    @abstractmethod
    def last_row(self) -> dict[str, Any]:
        """This worker's last row (a round policy's last pull is folded into it)."""


class WorkerLoop:
    """One worker's iterations over a transport (see the module docstring).

    Args:
        worker: The worker (its replica, batches and codecs).
        transport: How its messages move and what time it is.
        iterations: The run's iterations.
        rounds: Whether the sync policy runs rounds of local steps (PCP).
    """

    def __init__(self, worker: Worker, transport: Transport, iterations: int, rounds: bool) -> None:
        self.worker, self.transport = worker, transport
        self.iterations, self.rounds = iterations, rounds

    def run(self, first: int = 0, prev_comm: float = 0.0) -> Steps:
        """The iterations from ``first``; ``prev_comm``: the last round's communication time."""
        tr = self.transport
        for t in range(first, self.iterations):
            yield from tr.begin(t, prev_comm)
            pulled: Pulled = yield from tr.pull(t)
            if budget_spent(pulled.extra, self.rounds):
                self._fold(pulled)
                return
            # compute: one gradient, or a round's granted local steps
            steps = step_budget(pulled.extra, self.rounds)
            loss, vector, cost = compute_step(
                self.worker,
                steps,
                self.rounds,
                tr.step_cost,
                t,
                check=tr.stops_diverged,
                gradient=tr.gradient(self.worker, t),
            )
            compute = tr.computed(t, cost)
            report = RoundReport(steps, compute / steps, prev_comm) if self.rounds else None
            pushed: Pushed = yield from tr.push(t, vector, compute, report)
            tr.record(t, self._row(t, pulled, pushed, compute, loss, steps))
            prev_comm = pulled.comm + pushed.round_comm

    def _row(
        self, t: int, pulled: Pulled, pushed: Pushed, compute: float, loss: float, steps: int
    ) -> dict[str, Any]:
        tr = self.transport
        lossless_up = None
        if pulled.lossless_up is not None and pushed.lossless_up is not None:
            lossless_up = pulled.lossless_up + pushed.lossless_up
        return step_row(
            iteration=t,
            worker=self.worker.rank,
            time_s=tr.now(),
            compute_s=compute,
            comm_s=pulled.comm + pushed.comm,
            wait_s=pulled.wait + pushed.wait,
            codec_s=pulled.codec + pushed.codec,
            up=[a + b for a, b in zip(pulled.up, pushed.up, strict=True)],
            down=[a + b for a, b in zip(pulled.down, pushed.down, strict=True)]
            if pushed.down
            else pulled.down,
            remote=tr.remote,
            remote_down=pulled.remote_down,
            ratio=pushed.ratio,
            staleness=pulled.staleness,
            loss=loss,
            local_steps=steps,
            lossless_up=lossless_up,
            lossless_down=pulled.lossless_down,
            migration_bytes=pulled.migration_bytes,
        )

    def _fold(self, pulled: Pulled) -> None:
        """A round policy's budget is spent: the pull that ended the run joins the last row."""
        tr = self.transport
        fold_final_pull(
            tr.last_row(),
            up=pulled.up,
            down=pulled.down,
            remote=tr.remote,
            end=tr.now(),
            comm=pulled.comm,
            wait=pulled.wait,
            codec=pulled.codec,
            lossless_up=pulled.lossless_up,
            lossless_down=pulled.lossless_down,
        )


def done(value: Any) -> Steps:
    """A step that is already over: yielding from it gives ``value`` without suspending."""
    return value
    yield  # a generator that never suspends


def run_blocking(steps: Steps) -> Any:
    """Run a loop over a transport that never suspends it; returns its return value.

    Raises:
        RuntimeError: the transport suspended the loop (it is not a blocking transport).
    """
    try:
        op = next(steps)
    except StopIteration as finished:
        return finished.value
    steps.close()
    raise RuntimeError(f"a blocking transport suspended the worker loop on {op!r}")
