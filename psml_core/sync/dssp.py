"""Dynamic stale synchronous parallel (DSSP)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from psml_core.errors import ConfigError
from psml_core.sync.base import SYNC_POLICIES, SyncPolicy

__all__ = ["DSSP"]


@SYNC_POLICIES.register("dssp")
class DSSP(SyncPolicy):
    """Dynamic SSP: a staleness bound in [s_low, s_low + r_max], set at run time.

    Paper: Zhao, An, Liu, Chen, "Dynamic Stale Synchronous Parallel Distributed Training for
    Deep Learning", ICDCS 2019 (arXiv 1908.11848) — the closest documented relative of PCP and
    its optional baseline. Reconstructed from the abstract and recollection [ours].

    The server applies each push as it arrives. A worker at most ``s_low`` ahead of the slowest
    always proceeds. When it would exceed ``s_low``, the server predicts when the slowest worker
    will push next (when its current iteration started, at the server's answer to its pull,
    plus its mean iteration time) and grants the fast worker the number ``r`` of extra
    iterations (0..``r_max``) that it can finish before then — the choice that minimises its
    predicted wait. Iteration times are measured at the server from answer to next push, so
    they exclude waiting. The grant holds until the slowest worker's clock moves; then it is
    recomputed. Staleness never exceeds ``s_low + r_max``.

    Tuning: our design's values s_low = 2, r_max = 6 [ours]; a larger r_max absorbs stragglers
    at the cost of staleness.

    Args:
        s_low: The lower bound s_L >= 0.
        r_max: The largest extra grant >= 0.
        window: Iteration times averaged per worker for the prediction, >= 1.
    """

    barrier = False

    def __init__(self, s_low: int = 2, r_max: int = 6, window: int = 5) -> None:
        for key, value, low in (("s_low", s_low, 0), ("r_max", r_max, 0), ("window", window, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigError(
                    f"sync policy 'dssp': params.{key} must be an integer >= {low}, got {value!r}"
                )
        self.s_low, self.r_max, self.window = s_low, r_max, window
        self._served: dict[int, float] = {}  # when each worker's current iteration started
        self._pushed: dict[int, float] = {}  # its last push
        self._busy: dict[int, list[float]] = {}  # its recent iteration times
        self._grant: dict[int, tuple[int, int]] = {}  # worker -> (min clock at grant, r)

    def observe_serve(self, worker: int, clock: int, now: float) -> None:
        """The worker's pull was answered at ``now``: its next iteration starts."""
        self._served[worker] = now

    def observe_push(self, worker: int, clock: int, now: float) -> None:
        """Record the iteration time (answer to push) and the push time."""
        started = self._served.get(worker)
        if started is not None:
            times = self._busy.setdefault(worker, [])
            times.append(now - started)
            del times[: -self.window]
        self._pushed[worker] = now

    def iteration_time(self, worker: int) -> float | None:
        """Mean of ``worker``'s recent iteration times; None before its first."""
        times = self._busy.get(worker)
        return sum(times) / len(times) if times else None

    def extra(self, worker: int, clocks: Sequence[int]) -> int:
        """The extra iterations granted to ``worker`` beyond ``s_low`` (fixed per slowest clock)."""
        base = min(clocks)
        held = self._grant.get(worker)
        if held is not None and held[0] == base:
            return held[1]
        slowest = min(range(len(clocks)), key=lambda q: (clocks[q], q))
        mine, theirs = self.iteration_time(worker), self.iteration_time(slowest)
        r = 0
        started, now = self._served.get(slowest), self._pushed.get(worker)
        if mine and theirs is not None and started is not None and now is not None:
            r = max(0, min(self.r_max, math.floor((started + theirs - now) / mine)))
        self._grant[worker] = (base, r)
        return r

    def may_proceed(self, worker: int, clocks: Sequence[int]) -> bool:
        """Within s_low always; beyond it only as far as the worker's current grant."""
        lead = clocks[worker] - min(clocks)
        if lead <= self.s_low:
            return True
        return lead <= self.s_low + self.extra(worker, clocks)
