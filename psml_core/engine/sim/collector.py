"""Python's cyclic garbage collector, kept out of a simulation's way.

A simulated run allocates a few hundred short-lived container objects per message (SimPy
events, generators, tuples). At CPython's default thresholds the collector then runs a
young-generation pass every 700 allocations, and its older passes traverse every tracked
object, the job's workers and codecs included. On the digits MLP at 64 and 256 workers that
was 15-25% of the run's wall-clock time (``benchmarks/bench_sim.py`` with the collector
switched off). Inside :func:`quiet_collector` the objects alive at its start are frozen (never
traversed; garbage among them waits for the end of the run), young passes run every 50,000
allocations, middle ones every 2.5 million and full ones every 25 million. The short cycles a
run makes (an event and the process it resumes) die young and are collected by the young
passes. Nothing a run computes depends on when the collector runs.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["RUN_THRESHOLDS", "quiet_collector"]

RUN_THRESHOLDS = (50_000, 50, 10)
"""``gc.set_threshold`` during a run (CPython's default: 700, 10, 10)."""


@contextmanager
def quiet_collector() -> Iterator[None]:
    """Freeze the objects alive now and raise the collector's thresholds; restore both after.

    For one run at a time in a process (the thresholds are the process's). A freeze that was
    in force before (the host's, or an enclosing run's) is left in force at the end: only a
    freeze this call started is undone.
    """
    old = gc.get_threshold()
    frozen_before = gc.get_freeze_count() > 0
    gc.freeze()
    gc.set_threshold(*RUN_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*old)
        if not frozen_before:
            gc.unfreeze()
