"""A shard's sync gate in the simulation: pull requests held until the policy allows them."""

from __future__ import annotations

from collections.abc import Callable

import simpy

__all__ = ["Gate"]


class Gate:
    """Pull requests parked at a shard until its sync policy lets the worker proceed.

    Args:
        env: The run's SimPy environment.
    """

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.waiting: list[tuple[int, int, simpy.Event]] = []

    def wait(self, worker: int, clock: int, allowed: bool) -> simpy.Event:
        """An event that fires when ``worker`` at ``clock`` may be served (now if allowed)."""
        ev = self.env.event()
        if allowed:
            ev.succeed()
        else:
            self.waiting.append((worker, clock, ev))
        return ev

    def release(self, may_serve: Callable[[int, int], bool]) -> None:
        """Fire the parked requests that ``may_serve(worker, clock)`` now allows."""
        still = []
        for worker, clock, ev in self.waiting:
            if may_serve(worker, clock):
                ev.succeed()
            else:
                still.append((worker, clock, ev))
        self.waiting = still
