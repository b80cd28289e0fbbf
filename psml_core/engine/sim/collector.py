"""Python's cyclic garbage collector, kept out of a simulation's way.

A simulated run allocates a few hundred short-lived container objects per message (SimPy
events, generators, tuples), and CPython's collector, at its default thresholds, then runs
a young-generation pass every 700 allocations and a full pass over every tracked object (the
job's workers, codecs and tensors' wrappers) every few hundred of those. On the digits MLP at
64 and 256 workers that was 15-25% of the run's wall-clock time (``benchmarks/bench_sim.py``).
Inside :func:`quiet_collector` the objects that existed before the run are frozen (never
traversed) and the collector runs ~70x less often; garbage cycles are still collected, so
memory stays bounded. Nothing a run computes depends on when the collector runs.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["RUN_THRESHOLDS", "quiet_collector"]

RUN_THRESHOLDS = (50_000, 50, 1_000)
"""``gc.set_threshold`` during a run: young passes every 50,000 allocations, rare full ones."""


@contextmanager
def quiet_collector() -> Iterator[None]:
    """Freeze the objects alive now and raise the collector's thresholds, then restore both.

    Nested use is harmless: the inner one freezes what the outer run allocated so far and
    restores the outer run's thresholds.
    """
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*RUN_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()
