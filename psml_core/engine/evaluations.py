"""Evaluation of the global model: iteration t evaluated once every shard's part of it is in.

One :class:`EvalCollector` per run (the sim backend's, dist's rank 0) takes each shard's
completion of an iteration the run evaluates (:attr:`~.shard_service.Settled.completed`), with
that shard's values or without, and hands the assembled model to its evaluator (a horovod
rank 0's replica is the whole model, with no parts to collect): the sim evaluates at once
(simulated time stands still), the wall-clock backends in a background thread
(:class:`BackgroundEvaluations`) so that serving is not held up.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from psml_core.engine.job import Job
from psml_core.engine.progress import NO_PROGRESS, Progress

__all__ = ["BackgroundEvaluations", "EvalCollector"]


class EvalCollector:
    """Each shard's part of an iteration; the model evaluated once all of them are in.

    Args:
        job: The run (its shards, ``should_evaluate``).
        evaluate: Called with (iteration, global parameters) of each evaluated iteration.
        assemble: The global parameters from the parts (default: each shard's values at its
            keys); the sim passes ``job.global_params()`` at the instant the last part is in.
        parts: How many parts an iteration has (default: one per shard).
    """

    def __init__(
        self,
        job: Job,
        evaluate: Callable[[int, np.ndarray], None],
        assemble: Callable[[dict[int, Any]], np.ndarray] | None = None,
        parts: int | None = None,
    ) -> None:
        self.job, self.evaluate = job, evaluate
        self.assemble = assemble or self._placed
        self.n_parts = len(job.shards) if parts is None else parts
        self.parts: dict[int, dict[int, Any]] = {}

    def add(self, clock: int, part: int, values: Any = None) -> None:
        """Part ``part`` (a shard) has all of iteration ``clock``; evaluate once all are in.

        Only for an iteration the run evaluates (``Job.should_evaluate``): the driver asks,
        since a part may arrive before this process's shards know it ends the run (dist).
        """
        parts = self.parts.setdefault(clock, {})
        parts[part] = values
        if len(parts) == self.n_parts:
            del self.parts[clock]
            self.evaluate(clock, self.assemble(parts))

    def _placed(self, parts: dict[int, Any]) -> np.ndarray:
        params = np.empty(self.job.model.n_params, dtype=np.float32)
        for s, vals in parts.items():
            params[self.job.shards[s].keys] = vals
        return params


class BackgroundEvaluations:
    """Evaluate models in a background thread; :meth:`results` waits for them all.

    Args:
        job: The run (its model and test data).
        progress: Reports each finished evaluation (from the evaluating thread).
        traffic: Reads the bytes up and down so far when an evaluation is submitted (or None).
        scope: The progress reports' scope.
    """

    def __init__(
        self,
        job: Job,
        progress: Progress | None = None,
        traffic: Callable[[], tuple[int, int]] | None = None,
        scope: str = "shard0",
    ) -> None:
        self.job = job
        self.progress = progress or NO_PROGRESS
        self.traffic, self.scope = traffic, scope
        self.pending: dict[int, Future[tuple[float, float]]] = {}
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="psml-eval")

    def __call__(self, clock: int, params: np.ndarray) -> None:
        """Evaluate ``params``, the model after iteration ``clock`` (kept, not copied)."""
        ds = self.job.dataset
        future = self._pool.submit(self.job.model.evaluate, params, ds.X_test, ds.y_test)
        self.pending[clock] = future
        if self.progress.enabled:
            future.add_done_callback(self._reporter(clock))

    def _reporter(self, clock: int) -> Callable[[Future[tuple[float, float]]], None]:
        """Report the evaluation of ``clock`` with the traffic so far (read now)."""
        up, down = self.traffic() if self.traffic is not None else (None, None)

        def report(future: Future[tuple[float, float]]) -> None:
            if future.exception() is None:  # a failure is raised by results()
                loss, acc = future.result()
                self.progress.evaluation(
                    clock, loss=loss, accuracy=acc, bytes_up=up, bytes_down=down, scope=self.scope
                )

        return report

    def results(self) -> dict[int, tuple[float, float]]:
        """Wait for every evaluation: iteration -> (test loss, test accuracy)."""
        out = {t: f.result() for t, f in self.pending.items()}
        self._pool.shutdown()
        return out
