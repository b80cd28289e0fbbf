"""A SimPy process whose generator starts at once, inside the step that creates it.

``simpy.Process`` starts its generator from an ``Initialize`` event, scheduled as urgent at
the current time. A simulated run starts two processes per message (each pull, each push),
and those start events are a tenth of all the events it schedules. :class:`Started` runs the
generator's first part where it is created instead; everything after is ``simpy.Process``'s
own code (resumes, the end event that a condition waits for, failures).

When it is the same order. An urgent start event runs after the rest of the step that
created it and before any other event of the same instant. So starting at once differs only
if code between the creation and the end of that step touches what the generator's first
part touches. In the simulator the processes created are a worker's pulls (created together,
then waited for) and its pushes (likewise); what runs after them in the step is the same
worker's wait and, in a drain's release, other workers' loops reaching their own pulls: those
touch only their own state before their own pulls start, and every worker's pulls start in
the order the urgent events would have run them. ``benchmarks/compare_cores.py`` checks it:
every smoke run is byte-identical to the core with start events (docs/measurement.md).
"""

from __future__ import annotations

from typing import Any

import simpy
from simpy.events import ProcessGenerator

__all__ = ["Started"]


class _Go:
    """The value a generator starts with: an event that succeeded with None."""

    _ok = True
    _value: Any = None


_GO = _Go()


class Started(simpy.Process):
    """``env.process(generator)``, with the generator run up to its first wait right away.

    Args:
        env: The run's SimPy environment.
        generator: The process's generator.
    """

    def __init__(self, env: simpy.Environment, generator: ProcessGenerator) -> None:
        self.env = env
        self.callbacks = []
        self._generator = generator
        self._target = _GO  # type: ignore[assignment]
        active = env.active_process
        self._resume(_GO)  # type: ignore[arg-type]
        env._active_proc = active  # noqa: SLF001  (the creator is still running)
