"""DC2: delay-aware compression control (Abdelmoniem & Canini, INFOCOM 2021).

The paper's control law is not public; this module is the suite's reconstruction
(``specs/methods.md``, section 4). Every constant and design choice here is [ours].
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

from psml_core.control.base import CONTROLLERS, Controller, Observation
from psml_core.errors import ConfigError

__all__ = ["LAWS", "DC2Controller", "DelayMonitor", "HistoryEntry"]

LAWS: tuple[str, ...] = ("aimd", "proportional")

#: One row of :attr:`DC2Controller.history`: ``(step, ratio, d_hat, target)``; ``d_hat`` is NaN
#: before the first observation and ``target`` NaN until the warm-up has ended.
HistoryEntry = tuple[int, float, float, float]


class DelayMonitor:
    """Smoothed communication delay, smoothed compute time and the warm-up baseline delay.

    Each :meth:`update` takes one step's figures (the slowest worker's, as BSP is gated by it)
    and smooths both with the same exponential moving average [ours]::

        D_hat <- D_hat + alpha * (D_t - D_hat)     (the first sample initialises D_hat)

    The baseline ``D_0`` is the minimum ``D_hat`` over the first ``warmup`` updates; it is fixed
    from the ``warmup``-th update on. During warm-up it is the running minimum so far.

    Args:
        alpha: EMA weight of the newest sample, in (0, 1]; 1 disables smoothing.
        warmup: Number of updates that define the baseline, an integer >= 0 (0: no baseline,
            ``D_0 = 0``).
    """

    def __init__(self, alpha: float = 0.2, warmup: int = 20) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
        if warmup < 0:
            raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
        self.alpha = float(alpha)
        self.warmup = int(warmup)
        self.count = 0
        self.delay = math.nan  # D_hat
        self.compute = math.nan  # T_hat
        self._min_delay = math.inf

    def _smooth(self, old: float, new: float) -> float:
        # The increment form keeps a constant input exactly constant (no rounding drift).
        return new if math.isnan(old) else old + self.alpha * (new - old)

    def update(self, comm_s: float, compute_s: float) -> float:
        """Take in one step's communication and compute time (seconds); return ``D_hat``.

        Raises:
            ValueError: a time is negative, NaN or infinite.
        """
        for name, v in (("comm_s", comm_s), ("compute_s", compute_s)):
            if not (math.isfinite(v) and v >= 0.0):
                raise ValueError(f"DelayMonitor: {name} must be finite and >= 0, got {v!r}")
        self.delay = self._smooth(self.delay, float(comm_s))
        self.compute = self._smooth(self.compute, float(compute_s))
        self.count += 1
        if self.count <= self.warmup:
            self._min_delay = min(self._min_delay, self.delay)
        return self.delay

    @property
    def warmed_up(self) -> bool:
        """Whether the baseline is final (``warmup`` updates seen)."""
        return self.count >= self.warmup

    @property
    def baseline(self) -> float:
        """``D_0``: the minimum ``D_hat`` of the warm-up (running while in it; 0 if none)."""
        return 0.0 if math.isinf(self._min_delay) else self._min_delay


def _number(name: str, value: Any, lo: float, hi: float, lo_open: bool, hi_open: bool) -> float:
    """``value`` as a float in the interval; anything else is a ConfigError naming ``name``."""
    left, right = "(" if lo_open else "[", ")" if hi_open else "]"
    shown = f"{left}{lo:g}, {'inf' if math.isinf(hi) else f'{hi:g}'}{right}"
    ok = isinstance(value, Real) and not isinstance(value, bool)
    v = float(value) if ok else math.nan
    ok = ok and math.isfinite(v)
    ok = ok and (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
    if not ok:
        raise ConfigError(f"controller 'dc2': params.{name} must be in {shown}, got {value!r}")
    return v


@CONTROLLERS.register("dc2")
class DC2Controller(Controller):
    """Delay-aware compression control: the ratio follows the measured communication delay.

    Paper: A. M. Abdelmoniem and M. Canini, "DC2: Delay-aware Compression Control for
    Distributed Machine Learning", IEEE INFOCOM 2021, doi 10.1109/INFOCOM42981.2021.9488810.
    The paper couples the compression ratio to measured network delay, in Horovod, on top of
    GRACE compressors; its control law, target and constants are not public. What follows is
    the suite's reconstruction (``specs/methods.md`` section 4): **every constant is [ours]**.

    Algorithm, once per observed step (the slowest worker's comm and compute times):

    1. Monitor (:class:`DelayMonitor`): ``D_hat <- D_hat + alpha (D_t - D_hat)``; compute time
       ``T_hat`` smoothed the same way.
    2. Warm-up: the first ``warmup`` steps run at ``r0``; their minimum ``D_hat`` is the
       baseline ``D_0``.
    3. Target: ``D* = max(kappa * T_hat, D_0)``. It uses the *compute* time on purpose: the aim
       is communication about as long as computation (``kappa = 1``), so that compressing more
       would buy little time and cost accuracy, and compressing less would leave the network
       the bottleneck. ``D_0`` is a floor: no ratio is asked to beat the delay seen in warm-up.
    4. Law ``proportional`` (delay-based congestion control):
       ``r <- clip(r (D* / D_hat)^gamma, r_min, r_max)``, applied only when it changes ``r`` by
       more than ``hysteresis`` (relative), except that a proposal beyond a bound is always
       taken (so ``r`` reaches ``r_max`` exactly when the network is fast). Law ``aimd``:
       ``r <- r / 2`` if ``D_hat > (1 + delta) D*``, else ``r <- min(r_max, r + additive)``
       (never below ``r_min``).

    Subtlety: ``D_t`` measured at ratio ``r`` depends on ``r``. The warm-up runs at ``r0``, so
    ``D_0`` is the delay *at r0*: with the default ``r0 = 1`` it is the dense communication time
    of the warm-up network, ``D* >= D_0`` and DC2 compresses only when the delay rises above both
    the compute time and the warm-up level (a network that degrades, or delay spikes). A network
    already slow in warm-up is then left uncompressed; a smaller ``r0`` makes ``D_0`` nearer the
    latency floor that compression cannot remove.

    The ratio of a step is fixed the first time it is asked (:meth:`ratio`) from the
    observations so far, and the law updates ``r`` in :meth:`observe`, so the controller is
    deterministic: the same observation stream gives the same ratios on every worker or rank.

    Tuning: ``kappa`` sets the comm/compute balance (below 1 compresses harder, above 1 favours
    accuracy); ``alpha`` trades reaction speed against noise (the EMA lag is about
    ``1/alpha`` steps; under heavy jitter lower it, with ``hysteresis`` to avoid chatter);
    ``gamma < 1`` damps the proportional law if it oscillates; ``r_min`` bounds the accuracy
    loss (use error feedback below ~0.1). AIMD reacts to the EMA, which lags, so it can halve
    several times in a row after a sharp drop; prefer ``proportional`` for step changes and
    ``aimd`` for probing a noisy bottleneck. Where latency dominates (the delay barely depends
    on ``r``), a target near the latency floor drives ``r`` far down for little gain: raise
    ``r_min`` or ``kappa``.

    Args:
        law: ``"proportional"`` (default) or ``"aimd"`` [ours].
        alpha: EMA weight of the newest sample, in (0, 1] (default 0.2) [ours].
        warmup: Warm-up steps at ``r0`` that define ``D_0``, integer >= 0 (default 20) [ours].
        kappa: Target comm/compute ratio, > 0 (default 1.0) [ours].
        gamma: Exponent of the proportional law, > 0 (default 1.0) [ours].
        r_min: Smallest ratio, in (0, 1] (default 0.001) [ours].
        r_max: Largest ratio, in [r_min, 1] (default 1.0, no compression) [ours].
        r0: Ratio during warm-up and start, in [r_min, r_max] (default 1.0) [ours].
        hysteresis: Smallest relative change the proportional law makes, in [0, 1)
            (default 0.1) [ours].
        delta: AIMD congestion margin over the target, >= 0 (default 0.1) [ours].
        additive: AIMD additive increase per step, in (0, 1] (default 0.01) [ours].

    Raises:
        ConfigError: a parameter is out of range (the message names it and the range) or
            ``law`` is unknown (the message lists the known laws).
    """

    def __init__(
        self,
        law: str = "proportional",
        alpha: float = 0.2,
        warmup: int = 20,
        kappa: float = 1.0,
        gamma: float = 1.0,
        r_min: float = 0.001,
        r_max: float = 1.0,
        r0: float = 1.0,
        hysteresis: float = 0.1,
        delta: float = 0.1,
        additive: float = 0.01,
    ) -> None:
        if law not in LAWS:
            raise ConfigError(
                f"controller 'dc2': params.law must be one of {', '.join(LAWS)}, got {law!r}"
            )
        if isinstance(warmup, bool) or not isinstance(warmup, Integral) or warmup < 0:
            raise ConfigError(
                f"controller 'dc2': params.warmup must be an integer in [0, inf), got {warmup!r}"
            )
        self.law = law
        self.alpha = _number("alpha", alpha, 0.0, 1.0, True, False)
        self.kappa = _number("kappa", kappa, 0.0, math.inf, True, True)
        self.gamma = _number("gamma", gamma, 0.0, math.inf, True, True)
        self.r_min = _number("r_min", r_min, 0.0, 1.0, True, False)
        self.r_max = _number("r_max", r_max, self.r_min, 1.0, False, False)
        self.r0 = _number("r0", r0, self.r_min, self.r_max, False, False)
        self.hysteresis = _number("hysteresis", hysteresis, 0.0, 1.0, False, True)
        self.delta = _number("delta", delta, 0.0, math.inf, False, True)
        self.additive = _number("additive", additive, 0.0, 1.0, True, False)
        self.warmup = int(warmup)
        self.monitor = DelayMonitor(self.alpha, self.warmup)
        self._r = self.r0
        self._fixed: dict[int, float] = {}
        self.history: list[HistoryEntry] = []

    # ----------------------------------------------------------------- the Controller API

    def ratio(self, step: int) -> float:
        """The ratio of ``step``: the current ``r``, fixed for that step the first time asked."""
        if step not in self._fixed:
            self._fixed[step] = self._r
            self.history.append((step, self._r, self.monitor.delay, self.target))
        return self._fixed[step]

    def observe(self, obs: Observation) -> None:
        """Feed one finished step to the monitor; after warm-up, update ``r`` by the law."""
        d_hat = self.monitor.update(obs.comm_s, obs.compute_s)
        if self.monitor.warmed_up:
            self._r = self._next_ratio(self._r, d_hat, self.target)

    # ----------------------------------------------------------------- internals

    @property
    def target(self) -> float:
        """``D* = max(kappa * T_hat, D_0)``; NaN until the warm-up has ended."""
        m = self.monitor
        if not m.warmed_up or m.count == 0:
            return math.nan
        return max(self.kappa * m.compute, m.baseline)

    def _next_ratio(self, r: float, d_hat: float, target: float) -> float:
        if self.law == "aimd":
            if d_hat > (1.0 + self.delta) * target:
                return max(self.r_min, r / 2.0)
            return min(self.r_max, r + self.additive)
        # Proportional, in log space so extreme delay ratios cannot overflow.
        if d_hat <= 0.0:
            return self.r_max  # no measurable delay: nothing to save by compressing
        if target <= 0.0:
            return self.r_min  # zero target (no compute, no baseline): compress all we can
        log_f = self.gamma * (math.log(target) - math.log(d_hat))
        log_p = math.log(r) + log_f
        if log_p >= math.log(self.r_max):
            return self.r_max
        if log_p <= math.log(self.r_min):
            return self.r_min
        # r * exp(0) == r exactly, so delays equal to the target never move r by rounding.
        proposed = min(self.r_max, max(self.r_min, r * math.exp(min(log_f, 700.0))))
        # Hysteresis: ignore small corrections, which would only chase measurement noise.
        return proposed if abs(proposed - r) > self.hysteresis * r else r
