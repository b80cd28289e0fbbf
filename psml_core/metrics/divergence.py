"""Whether a run diverged: the test behind the DIVERGED run status and the tuning's exclusions.

A run *diverged* when any of these holds, checked in this order:

1. **non-finite**: a training loss is NaN or infinite;
2. **returned to chance**: the smoothed training loss fell clearly below ln C (to at most
   ``FELL`` x ln C) and ends back within 5% of ln C or above it (at least ``RETURNED`` x ln C):
   the model learned, then lost it (random-k with error feedback under heavy momentum climbs to
   6 and settles at ln 10);
3. **ends at chance**: the mean test accuracy of the last evaluations is at most ``1/C +
   CHANCE_MARGIN``, whatever the loss did.

The smoothing is a moving mean over ``max(5, n // 20)`` iterations, so one bad mini-batch does
not count. C is the number of classes; ln C is the loss of a uniform prediction.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = [
    "CHANCE_MARGIN",
    "FELL",
    "LAST_EVALUATIONS",
    "RETURNED",
    "diverged",
    "run_series",
    "smoothed",
]

FELL = 0.9
"""The smoothed loss must once reach this fraction of ln C for a return to count."""
RETURNED = 0.95
"""A final smoothed loss at or above this fraction of ln C is back at chance (within 5%)."""
CHANCE_MARGIN = 0.05
"""Accuracy above 1/C that still counts as chance (0.15 for 10 classes, 0.55 for 2)."""
LAST_EVALUATIONS = 3
"""Evaluations averaged for the final accuracy."""


def smoothed(losses: Sequence[float]) -> np.ndarray:
    """The moving mean of ``losses`` over ``max(5, n // 20)`` iterations (shorter at the start)."""
    x = np.asarray(losses, dtype=np.float64)
    w = max(5, x.size // 20)
    csum = np.concatenate([[0.0], np.cumsum(x)])
    idx = np.arange(1, x.size + 1)
    lo = np.maximum(idx - w, 0)
    return (csum[idx] - csum[lo]) / (idx - lo)


def diverged(evals: Sequence[float], losses: Sequence[float], classes: int) -> str | None:
    """Why a run diverged, or None when it did not.

    Args:
        evals: The test accuracy of every evaluation, in order.
        losses: The training loss of every iteration, in order (the mean over the workers'
            mini-batches of the iteration).
        classes: The number of classes C (2 for a binary model).

    Returns:
        One line giving the reason and the numbers, or None.
    """
    if classes < 2:
        raise ValueError(f"classes must be >= 2, got {classes}")
    x = np.asarray(losses, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(x))
    if bad.size:
        return f"loss non-finite ({x[bad[0]]}) at iteration {int(bad[0])}"
    chance_loss = math.log(classes)
    if x.size:
        s = smoothed(x)
        low = int(np.argmin(s))
        if s[low] <= FELL * chance_loss and s[-1] >= RETURNED * chance_loss:
            return (
                f"loss fell to {s[low]:.3g} (iteration {low}), then returned to {s[-1]:.3g} "
                f"at the end, within 5% of ln C = {chance_loss:.3g} or above"
            )
    if len(evals):
        acc = float(np.mean(np.asarray(evals, dtype=np.float64)[-LAST_EVALUATIONS:]))
        if acc <= 1.0 / classes + CHANCE_MARGIN:
            return (
                f"ends at chance: final test accuracy {acc:.3f} <= 1/C + {CHANCE_MARGIN} "
                f"= {1.0 / classes + CHANCE_MARGIN:.3f}"
            )
    return None


def run_series(
    iteration: Sequence[int], loss: Sequence[float], test_accuracy: Sequence[float]
) -> tuple[list[float], list[float]]:
    """:func:`diverged`'s ``evals`` and ``losses`` from a run's records (one row per worker).

    Args:
        iteration: Each record's iteration.
        loss: Each record's mini-batch loss.
        test_accuracy: Each record's test accuracy (NaN where the run did not evaluate).

    Returns:
        The test accuracy of each evaluated iteration, and the mean loss of each iteration,
        both in iteration order (the columns of ``metrics.parquet`` or the
        :class:`~psml_core.metrics.records.IterationRecord` fields give them).
    """
    it = np.asarray(iteration, dtype=np.int64)
    lo = np.asarray(loss, dtype=np.float64)
    acc = np.asarray(test_accuracy, dtype=np.float64)
    iters, inv = np.unique(it, return_inverse=True)
    losses = np.bincount(inv, weights=lo) / np.bincount(inv)
    done = ~np.isnan(acc)
    # One accuracy per evaluated iteration: the first record's that carries one.
    first = {int(i): float(a) for i, a in zip(it[done][::-1], acc[done][::-1], strict=True)}
    return [first[int(i)] for i in iters if int(i) in first], [float(v) for v in losses]
