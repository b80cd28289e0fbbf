"""The controller feed: workers' per-step figures in, one ratio per step out.

What a delay-aware controller is fed is the step's *network delay* ``D_t``, not its
communication time on the critical path (the records' ``comm_s``, a different quantity). A
message's transfer time runs from its first byte handed to the network to its last byte
arriving: per-message overhead, the fair-share transfer, latency and any delay process, but
not the compute, encode or decode on the device, the time a sync policy holds a pull, or the
server thread's queue and processing around it. For one worker, step ``t`` and shard ``s``
the *round* is the sum of the transfer times of the step's messages on that path: the push
(encoded at step ``t``'s ratio) and the pull that follows it, request and answer (under
update broadcast the answer carries step ``t``'s aggregate, encoded at the same ratio). The
worker's ``D_t`` is its slowest round over the shards, and the controller sees the slowest
worker's. So codec costs never move ``D_t``, and no ratio is asked to shorten time that
compression cannot touch.

Why per shard and not the union of the step's transfer intervals: under wait-free backprop
the pushes leave one by one as backward produces each shard's gradient, and a union would
add one latency per shard, a floor that no ratio shortens; pushes that do share the NIC still
slow each other, so each one's transfer time shows the contention.
"""

from __future__ import annotations

import math

from psml_core.control.base import Controller, Observation

__all__ = ["ControllerFeed"]


class ControllerFeed:
    """Feeds a controller complete steps in order and fixes each step's ratio once.

    A step is complete when every worker has reported its figures; the controller observes the
    slowest worker's (the max over workers, as BSP is gated by it), with the ratio the step ran
    at. A backend reports either finished figures (:meth:`report`: the dist backend's shard 0,
    from the figures its pull requests carry) or, as the sim backend does, each message's
    transfer time as it happens (:meth:`open_step`, :meth:`transfer`, :meth:`close_step`),
    and the feed takes the slowest shard's round (see the module docstring). The open steps
    are part of the feed, so a checkpoint that pickles it keeps them.

    Args:
        controller: The job's controller.
        workers: Number of workers P (a step is complete when all P reported).
    """

    def __init__(self, controller: Controller, workers: int) -> None:
        self.controller, self.workers = controller, workers
        self.figures: dict[int, dict[int, tuple[float, float]]] = {}
        self.fed = 0
        self.ratios: dict[int, float] = {}
        # (worker, step) -> (compute seconds, shard -> its messages' transfer seconds so far)
        self.open: dict[tuple[int, int], tuple[float, dict[int, float]]] = {}

    def report(self, worker: int, step: int, comm_s: float, compute_s: float) -> None:
        """Worker ``worker``'s figures of ``step``: its network delay and compute time."""
        self.figures.setdefault(step, {})[worker] = (comm_s, compute_s)

    def open_step(self, worker: int, step: int, compute_s: float) -> None:
        """Start collecting worker ``worker``'s transfers of ``step`` (its compute time known)."""
        self.open[(worker, step)] = (compute_s, {})

    def transfer(self, worker: int, step: int, shard: int, seconds: float) -> None:
        """One message of ``step`` between the worker and ``shard`` took ``seconds`` on the wire.

        Ignored for a step not opened (a pull before the first push has no step to join).
        """
        entry = self.open.get((worker, step))
        if entry is not None:
            entry[1][shard] = entry[1].get(shard, 0.0) + seconds

    def close_step(self, worker: int, step: int) -> None:
        """Worker ``worker``'s messages of ``step`` are all in: report its slowest round."""
        entry = self.open.pop((worker, step), None)
        if entry is not None:
            compute, rounds = entry
            self.report(worker, step, max(rounds.values(), default=0.0), compute)

    def ratio(self, step: int) -> float:
        """Step ``step``'s ratio, fixed the first time it is asked."""
        if step not in self.ratios:
            while self.fed < step and len(self.figures.get(self.fed, {})) == self.workers:
                figures = self.figures.pop(self.fed).values()
                self.controller.observe(
                    Observation(
                        step=self.fed,
                        comm_s=max(c for c, _ in figures),
                        compute_s=max(k for _, k in figures),
                        ratio=self.ratios.get(self.fed, math.nan),
                    )
                )
                self.fed += 1
            self.ratios[step] = self.controller.ratio(step)
        return self.ratios[step]
