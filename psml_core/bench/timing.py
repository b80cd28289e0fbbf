"""Timing for calibration: medians over repeats, linear fits, cost curves, thread counts."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from scipy.optimize import nnls

from psml_core.devices.device import TIME_FLOOR_S

__all__ = [
    "cost_curve",
    "fit_linear",
    "median_time",
    "round_sig",
    "set_threads",
    "time_call",
]


def time_call(fn: Callable[[], Any], repeats: int, min_time: float) -> tuple[float, float]:
    """``(seconds per call, relative spread)`` of ``fn``: one warm-up, then ``repeats`` runs.

    A run loops ``fn`` as often as the warm-up says it takes to last ``min_time`` (at most
    1000 calls), so microsecond operations are not lost in the timer's resolution. The time is
    the median of the runs; the spread is ``(max - min) / median`` (0 for one run).
    """
    t0 = time.perf_counter()
    fn()
    warm = time.perf_counter() - t0
    loops = 1 if warm >= min_time else min(1000, max(1, math.ceil(min_time / max(warm, 1e-7))))
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        times.append((time.perf_counter() - t0) / loops)
    med = statistics.median(times)
    return med, (max(times) - min(times)) / med if med > 0 else 0.0


def median_time(fn: Callable[[], Any], repeats: int, min_time: float) -> float:
    """Seconds per call of ``fn`` (the median of :func:`time_call`)."""
    return time_call(fn, repeats, min_time)[0]


def fit_linear(ns: Sequence[float], ts: Sequence[float]) -> tuple[float, float, float]:
    """``(a, b, max relative error)`` of ``t = a + b n``, a, b >= 0, least relative squares."""
    n = np.asarray(ns, dtype=np.float64)
    t = np.maximum(np.asarray(ts, dtype=np.float64), 1e-12)
    A = np.column_stack([np.ones_like(n), n]) / t[:, None]
    (a, b), _ = nnls(A, np.ones_like(t))
    pred = a + b * n
    return float(a), float(b), float(np.max(np.abs(pred - t) / t))


def round_sig(x: float, digits: int = 4) -> float:
    """``x`` rounded to ``digits`` significant digits (readable, stable YAML)."""
    return float(f"{x:.{digits}g}")


def cost_curve(points: Sequence[tuple[float, float]]) -> dict[str, Any]:
    """The file's form of measured ``(median, spread)`` points, one per size, in size order.

    A median of 0 or less (too fast for the timer) is written as :data:`TIME_FLOOR_S`: the cost
    model interpolates ``log t``, and the loader rejects non-positive times.
    """
    return {
        "times": [max(round_sig(t), TIME_FLOOR_S) for t, _ in points],
        "spread": round_sig(max(sp for _, sp in points), 2),
    }


def set_threads(threads: int) -> Callable[[], None]:
    """Limit torch and the BLAS pools to ``threads``; returns a function that restores them."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    limiter: Any = None
    try:
        from threadpoolctl import threadpool_limits

        limiter = threadpool_limits(threads)
    except ImportError:  # scikit-learn brings threadpoolctl; without it numpy keeps its pool
        pass

    def restore() -> None:
        torch.set_num_threads(before)
        if limiter is not None:
            limiter.restore_original_limits()

    return restore
