"""The controller feed: workers' per-step figures in, one ratio per step out."""

from __future__ import annotations

from psml_core.control.base import Controller, Observation

__all__ = ["ControllerFeed"]


class ControllerFeed:
    """Feeds a controller complete steps in order and fixes each step's ratio once.

    A step is complete when every worker has reported its figures; the controller observes the
    slowest worker's (the max over workers, as BSP is gated by it). The sim backend reports when
    a worker's pushes land, the dist backend's shard 0 when pull requests carry the figures.

    Args:
        controller: The job's controller.
        workers: Number of workers P (a step is complete when all P reported).
    """

    def __init__(self, controller: Controller, workers: int) -> None:
        self.controller, self.workers = controller, workers
        self.figures: dict[int, dict[int, tuple[float, float]]] = {}
        self.fed = 0
        self.ratios: dict[int, float] = {}

    def report(self, worker: int, step: int, comm_s: float, compute_s: float) -> None:
        """Worker ``worker``'s figures of ``step``."""
        self.figures.setdefault(step, {})[worker] = (comm_s, compute_s)

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
                    )
                )
                self.fed += 1
            self.ratios[step] = self.controller.ratio(step)
        return self.ratios[step]
