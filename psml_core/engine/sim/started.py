"""A SimPy process whose generator starts at once, inside the step that creates it.

``simpy.Process`` starts its generator from an ``Initialize`` event, scheduled as urgent at
the current time. A simulated run starts two processes per message (each pull, each push),
and those start events were a tenth of all the events it scheduled. :class:`Started` runs the
generator's first part where it is created instead; everything after is ``simpy.Process``'s
own code (resumes, the end event that a condition waits for, failures).

When it keeps the order of events. An urgent start event runs after the rest of the step
that created it, after the urgent events queued before it, and before every normal event of
the instant. Starting at once moves the first part ahead of exactly those: the rest of the
creating step, and the urgent events already queued. It keeps the run's order when neither
touches what a first part touches or schedules an event of the same instant that could
interleave with a first part's. In the simulator:

* a worker's pulls are created together and then waited for, and so are its pushes: the rest
  of the step is that worker's ``all_of`` (and, for pushes, its device's timeout, whose only
  callback counts the condition's events);
* several workers resume in one step from a shared event (a checkpoint drain's release), and
  the backend queues every worker's loop as an urgent start at time 0 and on a resume. Each
  worker's code before its pulls (``begin``, its batch's keys) touches only its own state and
  schedules nothing, and its pulls start in the order the urgent events would have run them;
* the only other process, a dynamic placement's migration (``moves.py``), is created by a
  worker that then waits, so no first part runs between its creation and its start.

An exception raised in a first part fails the process as ``simpy.Process`` would (whoever
waits for it gets the exception, else ``env.step`` raises it); only a first part that yields
something other than an event raises at once, into the creator.
``benchmarks/compare_cores.py`` and ``benchmarks/compare_paths.py`` check the order: every
smoke run, checkpointed runs with their resumes and forced key moves are byte-identical to the
core with start events (docs/measurement.md). SimPy's process internals are used, so
``pyproject.toml`` pins SimPy's minor version.
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
    callbacks = None  # already processed: what a resume-in-progress target looks like


_GO = _Go()


class Started(simpy.Process):
    """``env.process(generator)``, with the generator run up to its first wait right away.

    Args:
        env: The run's SimPy environment.
        generator: The process's generator.

    Raises:
        ValueError: ``generator`` is not a generator (as ``simpy.Process``).
    """

    def __init__(self, env: simpy.Environment, generator: ProcessGenerator) -> None:
        if not hasattr(generator, "throw"):
            raise ValueError(f"{generator} is not a generator.")
        self.env = env
        self.callbacks = []
        self._generator = generator
        self._target = _GO  # type: ignore[assignment]
        creator = env.active_process
        try:
            self._resume(_GO)  # type: ignore[arg-type]
        finally:
            env._active_proc = creator  # noqa: SLF001  (the creator is still running)
