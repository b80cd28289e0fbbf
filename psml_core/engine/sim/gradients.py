"""The workers' gradients of a step handed to the device together, the run's results unchanged.

A simulated run computes each worker's gradient at the worker's compute start, one replica at
a time: sixteen ResNet-18 passes of batch 32 one after another use a GPU at a fraction of what
one pass over all 512 images does. :class:`BatchedGradients` computes the gradients of every
worker that is about to compute the same step in one call (``Model.loss_grads``, batched on
the device), at the first of their compute starts, and hands each worker its gradient at its
own compute start, where the simulation asks for it.

**Exact by construction.** A worker's gradient depends on its replica and its mini-batch. Its
mini-batch is known ahead (its sampler is its own: ``Worker.next_batch`` draws ahead without
changing the order). Its replica at its compute start is *predicted*: it is the replica of the
worker that computes first, which is what a barrier gives every worker (the same answers
installed into every replica). When the worker's compute starts, the prediction is checked
(the replica equal, element for element, to the one the gradient was computed at, and the same
batch): only then is the gradient handed over; otherwise it is computed there and then, as the
unbatched engine does. Nothing else moves: every event runs where it ran, so the simulated
clock, every byte and every record are the unbatched engine's. With the per-replica pass
(``PSML_SIM_BATCH=loop``, or the CPU) the gradients are bit for bit the unbatched engine's; the
device's batched pass (``on``; ``auto`` on a GPU) differs from it only in float32 rounding.

A run whose replicas differ (no barrier: ASP, SSP; per-key pulls) mostly misses: the
prediction is given up once misses outnumber a quarter of the hits (plus a grace of
:data:`GRACE` misses), and the run computes one gradient at a time from then on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from psml_core.errors import ConfigError

if TYPE_CHECKING:
    from psml_core.engine.worker import Worker
    from psml_core.models.base import Model

__all__ = ["GRACE", "MODES", "BatchedGradients", "batch_mode"]

MODES = ("auto", "off", "loop", "on")
"""``PSML_SIM_BATCH``: ``auto`` batches on a GPU (the model's batched pass) and not on the CPU;
``off`` never; ``loop`` predicts and checks as batching does but computes the gradients one
replica after another (bit for bit the unbatched engine's: a check of the machinery); ``on``
batches wherever the run allows it."""

GRACE = 4
"""Misses allowed before the hit rate decides whether predicting is worth it."""


def batch_mode(on_gpu: bool, environ: Mapping[str, str] | None = None) -> tuple[bool, bool]:
    """Whether to compute a step's gradients together, and whether in one batched pass.

    Args:
        on_gpu: Whether the run keeps its vectors on a GPU (``engine.device_state``).
        environ: The environment (default ``os.environ``).

    Raises:
        ConfigError: ``PSML_SIM_BATCH`` is not one of :data:`MODES`.
    """
    mode = (os.environ if environ is None else environ).get("PSML_SIM_BATCH", "auto")
    if mode not in MODES:
        raise ConfigError(
            f"PSML_SIM_BATCH={mode!r}: not a batching mode; use one of {', '.join(MODES)} "
            "(or unset it: auto)"
        )
    if mode == "auto":
        return on_gpu, on_gpu
    return mode != "off", mode == "on"


@dataclass
class _Ahead:
    """A gradient computed before its worker's compute start, with what it was computed at."""

    step: int
    params: Any  # the predicted replica (a snapshot shared by the batch)
    batch: np.ndarray  # the mini-batch's indices
    result: tuple[float, Any]


def _same(a: Any, b: Any) -> bool:
    """Whether two replicas are equal element for element (host arrays or device tensors)."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    return np.array_equal(a, b)


class BatchedGradients:
    """Each worker's gradient at its compute start, computed with its step's others.

    Args:
        workers: The run's workers.
        model: The job's model (``Model.loss_grads``).
        batched: Compute a step's gradients in one batched pass (else one replica at a time).
    """

    def __init__(self, workers: Sequence[Worker], model: Model, batched: bool) -> None:
        self.workers, self.model, self.batched = list(workers), model, batched
        self.ahead: dict[int, _Ahead] = {}
        self.last_step = [-1] * len(self.workers)  # the step each worker computed last
        self.hits = self.misses = 0
        self.sizes: list[int] = []  # gradients per call (benchmarks and tests)

    def predicting(self) -> bool:
        """Whether predictions still pay: misses at most a quarter of the hits plus a grace."""
        return self.misses <= GRACE + self.hits // 4

    def compute(self, worker: Worker, step: int) -> tuple[float, Any]:
        """Worker ``worker``'s loss and gradient of ``step`` on its next mini-batch.

        Called at its compute start; takes the batch as ``Worker.compute`` does.
        """
        rank = worker.rank
        batch = worker.next_batch()
        ahead = self.ahead.pop(rank, None)
        X, y = worker.take_batch()
        self.last_step[rank] = step
        if ahead is not None:
            if (
                ahead.step == step
                and (ahead.batch is batch or np.array_equal(ahead.batch, batch))
                and _same(ahead.params, worker.params)
            ):
                self.hits += 1
                return ahead.result
            self.misses += 1
        others = self._others(rank, step) if self.predicting() else []
        if not others:
            self.sizes.append(1)
            return self.model.loss_grads([worker.params], [X], [y])[0]
        snapshot = _copy(worker.params)
        batches = [w.next_batch() for w in others]
        out = self.model.loss_grads(
            [snapshot] * (len(others) + 1),  # one object: the model may share it in its pass
            [X, *[w.X[b] for w, b in zip(others, batches, strict=True)]],
            [y, *[w.y[b] for w, b in zip(others, batches, strict=True)]],
            batched=self.batched,
        )
        self.sizes.append(len(out))
        for w, b, result in zip(others, batches, out[1:], strict=True):
            self.ahead[w.rank] = _Ahead(step, snapshot, b, result)
        return out[0]

    def _others(self, rank: int, step: int) -> list[Worker]:
        """The workers whose next gradient is this step's and not yet computed."""
        return [
            w
            for w in self.workers
            if w.rank != rank and self.last_step[w.rank] == step - 1 and w.rank not in self.ahead
        ]


def _copy(params: Any) -> Any:
    """A snapshot of a replica that later updates of the replica leave alone."""
    return params.clone() if isinstance(params, torch.Tensor) else np.array(params, copy=True)
