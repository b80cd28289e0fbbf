"""A shard's server thread in the simulation: one request at a time, first come first served."""

from __future__ import annotations

from collections import deque

import simpy

__all__ = ["ServerThread"]


class ServerThread:
    """A FIFO lock on one simulated CPU core, without events when nobody waits.

    ``simpy.Resource`` costs a request event and a release event per use even when the core
    is free; a shard's thread is free for most of its uses, and the simulator pays that on
    every message. Here a free thread is taken at once (:meth:`acquire` returns None) and
    only a request that must queue gets an event, fired when the thread is handed to it. The
    order is the resource's: requests are served in the order they asked.

    Args:
        env: The run's SimPy environment.
    """

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.busy = False
        self.queue: deque[simpy.Event] = deque()

    def acquire(self) -> simpy.Event | None:
        """Take the thread: None when it was free, else an event fired when it is yours."""
        if not self.busy:
            self.busy = True
            return None
        turn = self.env.event()
        self.queue.append(turn)
        return turn

    def release(self) -> None:
        """Hand the thread to the oldest waiting request, or free it."""
        assert self.busy, "released a thread nobody holds"
        if self.queue:
            self.queue.popleft().succeed()
        else:
            self.busy = False
