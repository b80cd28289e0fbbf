"""Synthetic plants for DC2's closed-loop tests, fed through ControllerFeed with a lag.

The sim backend observes step t once its pushes and the next pull are in, so step t's figures
reach the controller one or two steps after its ratio was fixed; ``LAGS`` covers that and
more. Plants are delays as functions of the ratio: ``D = a + b r`` (latency plus bytes).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from psml_core.control import ControllerFeed, DC2Controller

COMPUTE_S = 0.01
LAGS = [1, 2, 3]

Plant = Callable[[int, float], float]  # (step, ratio) -> the step's network delay


def settling(lag: int) -> int:
    """Steps within which the proportional law settles after a change.

    Bounded: it moves once per round trip of ``lag`` steps, and about five moves close a 10x
    change.
    """
    return 6 * lag + 6


def closed_loop(
    ctl: DC2Controller, plant: Plant, steps: int, lag: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """Run ``steps`` steps; step t's delay is reported ``lag`` steps after its ratio was fixed."""
    feed = ControllerFeed(ctl, workers=1)
    ratios: list[float] = []
    delays: list[float] = []
    for t in range(steps):
        if t >= lag:
            feed.report(0, t - lag, delays[t - lag], COMPUTE_S)
        ratios.append(feed.ratio(t))
        delays.append(plant(t, ratios[-1]))
    return np.asarray(ratios), np.asarray(delays)


def linear(a: Callable[[int], float], b: Callable[[int], float]) -> Plant:
    """``D = a(t) + b(t) r``: latency that no ratio shortens plus bytes at the link's rate."""
    return lambda t, r: a(t) + b(t) * r


def spread(x: np.ndarray) -> float:
    """max / min of a positive series."""
    return float(x.max() / x.min())
