"""DC2: delay-aware compression control (Abdelmoniem & Canini, INFOCOM 2021).

The paper's control law is not public; this module is the suite's reconstruction
(docs/methods.md, DC2). Every constant and design choice here is [ours].
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

from psml_core.control.base import CONTROLLERS, Controller, Observation
from psml_core.errors import ConfigError

__all__ = ["LAWS", "DC2Controller", "DelayMonitor", "HistoryEntry"]

LAWS: tuple[str, ...] = ("aimd", "proportional")

#: One row of :attr:`DC2Controller.history`: ``(step, ratio, delay, target)``: the ratio fixed for
#: the step, the latest observed delay ``D_t`` and the target ``D*`` (both NaN before the first
#: observation).
HistoryEntry = tuple[int, float, float, float]


class DelayMonitor:
    """Smoothed compute time (the target's base) and smoothed network delay (a diagnostic).

    Each :meth:`update` takes one step's figures (the slowest worker's, as BSP is gated by it)
    and smooths both with the same exponential moving average [ours]::

        T_hat <- T_hat + alpha * (T_t - T_hat)     (the first sample initialises T_hat)

    ``T_hat`` sets the target from the first sample on. ``D_hat`` is kept for inspection only:
    the law corrects from the raw delay ``D_t``, which a moving average would delay.

    Args:
        alpha: EMA weight of the newest sample, in (0, 1]; 1 disables smoothing.
    """

    def __init__(self, alpha: float = 0.2) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
        self.alpha = float(alpha)
        self.count = 0
        self.delay = math.nan  # D_hat
        self.compute = math.nan  # T_hat

    def _smooth(self, old: float, new: float) -> float:
        # The increment form keeps a constant input exactly constant (no rounding drift).
        return new if math.isnan(old) else old + self.alpha * (new - old)

    def update(self, comm_s: float, compute_s: float) -> float:
        """Take in one step's network delay and compute time (seconds); return ``T_hat``.

        Raises:
            ValueError: a time is negative, NaN or infinite.
        """
        for name, v in (("comm_s", comm_s), ("compute_s", compute_s)):
            if not (math.isfinite(v) and v >= 0.0):
                raise ValueError(f"DelayMonitor: {name} must be finite and >= 0, got {v!r}")
        self.delay = self._smooth(self.delay, float(comm_s))
        self.compute = self._smooth(self.compute, float(compute_s))
        self.count += 1
        return self.compute


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
    """Delay-aware compression control: the ratio follows the measured network delay.

    Paper: A. M. Abdelmoniem and M. Canini, "DC2: Delay-aware Compression Control for
    Distributed Machine Learning", IEEE INFOCOM 2021, doi 10.1109/INFOCOM42981.2021.9488810.
    The paper couples the compression ratio to measured network delay, in Horovod, on top of
    GRACE compressors; its control law, target and constants are not public. What follows is
    the suite's reconstruction: **every constant and rule is [ours]**.

    Algorithm, once per observed step ``t`` (:class:`~psml_core.control.feed.ControllerFeed`:
    the slowest worker's network delay ``D_t``, i.e. the time the step's messages spent on the
    network, its compute time and the ratio ``r_t`` the step ran at):

    1. Monitor (:class:`DelayMonitor`): the compute time ``T_hat``, smoothed by an EMA.
    2. Target: ``D* = kappa * T_hat``, from the first observation on. The principle: DC2
       compresses to keep the communication delay where the network can carry it, and a step's
       communication fits the compute it overlaps when it takes no longer than that compute
       (``kappa = 1``; ``kappa`` is an operating point, chosen on the tuning seed from
       {0.5, 1, 2}). Nothing else enters the target: a delay measured at some ratio (e.g. the
       dense delay of a warm-up) would make the law keep whatever that ratio's delay was, and a
       link slow from the start would never be compressed. Where the latency floor lies above
       ``D*`` no ratio reaches it, and the anti-windup (5.) holds the ratio where cutting stops
       paying.
    3. Start: the first steps run at ``r0 = r_max = 1`` (accuracy first) until the law acts on
       the first observation (``warmup = 0``: the target needs only ``T_hat``, known from the
       first observation). Measured on the sim backend, 100 Mbit/s with 2 ms latency: the
       digits MLP [512, 512] (1.2 MB of gradient, dense delay 250x its 1.15 ms compute) goes
       1, 1, 0.063, 0.063, 0.010, 0.010, 0.0024, 0.0024, then r_min (one move per observation,
       each held for the feed's lag of up to two steps), the small tier's CNN 1, 1, 0.048,
       0.006, 0.006, then r_min. The dense steps before the first observation cost about
       0.6 s of simulated time on the MLP; starting at 0.1 reaches r_min two steps sooner.
       A warm-up of 20 dense steps costs about 6 s (the CNN's mean step over 60 steps: 26 ms
       without, 179 ms with it), hence none. ``warmup > 0`` only holds ``r0`` for that many
       more observations (for a backend whose first steps are unrepresentative).
    4. Law ``proportional``: ``r <- clip(r_t (D* / D_t)^g, r_min, r_max)`` with the gain
       ``g = gamma`` for a cut (``D_t > D*``) and ``g = gamma_up`` for a rise, taken only
       when ``D_t`` is off the target by more than ``hysteresis`` (relative; ``D_t`` within
       ``[D* / (1 + h), D* (1 + h)]`` is on target) or the proposal reaches a bound. The
       correction starts from the ratio the observed delay was measured at, not from the
       current ``r``: the feed lags a step or two behind (a step is observed once its pull
       is in), and a law that multiplied the current ``r`` by a lagged correction would cut
       again for a delay it had already answered (windup). On a delay linear in the ratio,
       ``D = a + b r``, each observation moves ``log r`` the fraction ``g b r / (a + b r)``
       of the way to its fixed point, so no gain up to 1 overshoots. Cuts take half the
       way (``gamma = 0.5``): one congested or mis-measured step must not cost many steps
       of accuracy. Rises take all of it (``gamma_up = 1``): from a small ratio the delay
       is mostly latency, the multiplicative law already under-estimates the room, and a
       ratio left low costs accuracy for nothing.
       Law ``aimd``: ``r <- r / 2`` if ``D_t > (1 + delta) D*``, once per round trip (an
       observation measured at a ratio above the current one predates the last cut and
       cuts no more, as TCP halves once per window); else ``r <- min(r_max, r + additive)``.
    5. Anti-windup at the latency floor: a cut *pays* when the delay falls with it, an
       elasticity ``log(D_prev / D_t) / log(r_prev / r_t) >= min_elasticity`` between
       consecutive observed steps, for cuts by more than the ``hysteresis`` band (smaller
       ones are lost in the delay's noise). A cut that did not pay while the delay stayed within
       ``release`` (relative) of the previous one counts; a delay that moved by more means
       the network changed (more competition arriving during a cut is no floor), and the
       count starts again. After ``patience`` such cuts in a row the delay no longer depends
       on the ratio (latency, a delay process, a floor no ratio shortens): neither law cuts
       further, and the hold ends when the delay moves by more than ``release`` from where
       it began, or reaches the target. On ``D = a + b r`` the hold comes where
       ``b r / (a + b r)`` falls below ``min_elasticity``: within about 10% of the floor.

    The ratio of a step is fixed the first time it is asked (:meth:`ratio`) from the
    observations so far, so the controller is deterministic: the same observation stream gives
    the same ratios on every worker or rank.

    Tuning: ``kappa`` sets the comm/compute balance (below 1 compresses harder, above 1
    favours accuracy); tune it on the tuning seed over {0.5, 1, 2}. ``gamma`` and ``gamma_up``
    are the loop gains: 1 reaches the fixed point of a bandwidth-bound link in one observation
    but follows every noisy sample; lower them (0.3) under heavy jitter, raise ``gamma``
    towards 1 to follow congestion faster. ``hysteresis`` stops chatter near the fixed point.
    ``min_elasticity`` and ``patience`` decide when the delay counts as unresponsive: raise
    ``patience`` where cross-traffic changes within a step or two, so that a change in
    competition that coincides with a cut is not taken for a floor. ``r_min`` bounds the
    accuracy loss (use error feedback below about 0.1). ``alpha`` only smooths the compute
    time. A smaller ``r0`` saves the first steps' dense bytes on a link known to be slow, at
    their accuracy. Prefer ``proportional`` for step changes and ``aimd`` for probing a noisy
    bottleneck.

    Args:
        law: ``"proportional"`` (default) or ``"aimd"`` [ours].
        alpha: EMA weight of the monitor's newest sample, in (0, 1] (default 0.2) [ours].
        warmup: Observations that only feed the monitor, at ``r0``, before the law acts,
            integer >= 0 (default 0) [ours].
        kappa: Target delay over compute time, > 0 (default 1.0) [ours].
        gamma: Gain (exponent) of the proportional law's cuts, in (0, 1] (default 0.5)
            [ours].
        gamma_up: Gain of its rises, in (0, 1] (default 1.0) [ours].
        r_min: Smallest ratio, in (0, 1] (default 0.001) [ours].
        r_max: Largest ratio, in [r_min, 1] (default 1.0, no compression) [ours].
        r0: Ratio until the law first acts, in [r_min, r_max] (default 1.0) [ours].
        hysteresis: Half-width of the proportional law's dead band around the target, a
            relative delay error, in [0, 1) (default 0.1) [ours].
        delta: AIMD congestion margin over the target, >= 0 (default 0.1) [ours].
        additive: AIMD additive increase per step, in (0, 1] (default 0.01) [ours].
        min_elasticity: Smallest elasticity of the delay in the ratio for which a cut pays,
            in [0, 1] (default 0.1) [ours].
        patience: Cuts in a row that do not pay before cutting stops, integer >= 1
            (default 2) [ours].
        release: Relative change of the delay that ends a hold, > 0 (default 0.25) [ours].

    Raises:
        ConfigError: a parameter is out of range (the message names it and the range) or
            ``law`` is unknown (the message lists the known laws).
    """

    def __init__(
        self,
        law: str = "proportional",
        alpha: float = 0.2,
        warmup: int = 0,
        kappa: float = 1.0,
        gamma: float = 0.5,
        gamma_up: float = 1.0,
        r_min: float = 0.001,
        r_max: float = 1.0,
        r0: float = 1.0,
        hysteresis: float = 0.1,
        delta: float = 0.1,
        additive: float = 0.01,
        min_elasticity: float = 0.1,
        patience: int = 2,
        release: float = 0.25,
    ) -> None:
        if law not in LAWS:
            raise ConfigError(
                f"controller 'dc2': params.law must be one of {', '.join(LAWS)}, got {law!r}"
            )
        self.law = law
        self.warmup = _integer("warmup", warmup, 0)
        self.patience = _integer("patience", patience, 1)
        self.alpha = _number("alpha", alpha, 0.0, 1.0, True, False)
        self.kappa = _number("kappa", kappa, 0.0, math.inf, True, True)
        self.gamma = _number("gamma", gamma, 0.0, 1.0, True, False)
        self.gamma_up = _number("gamma_up", gamma_up, 0.0, 1.0, True, False)
        self.r_min = _number("r_min", r_min, 0.0, 1.0, True, False)
        self.r_max = _number("r_max", r_max, self.r_min, 1.0, False, False)
        self.r0 = _number("r0", r0, self.r_min, self.r_max, False, False)
        self.hysteresis = _number("hysteresis", hysteresis, 0.0, 1.0, False, True)
        self.delta = _number("delta", delta, 0.0, math.inf, False, True)
        self.additive = _number("additive", additive, 0.0, 1.0, True, False)
        self.min_elasticity = _number("min_elasticity", min_elasticity, 0.0, 1.0, False, False)
        self.release = _number("release", release, 0.0, math.inf, True, True)
        self.monitor = DelayMonitor(self.alpha)
        self._r = self.r0
        self._fixed: dict[int, float] = {}
        self.history: list[HistoryEntry] = []
        self.delay = math.nan  # the latest observed D_t
        self._prev: tuple[float, float] | None = None  # (ratio, delay) of the last observation
        self.unpaid = 0  # cuts in a row whose delay did not fall
        self.held: float | None = None  # the delay at which cutting stopped (anti-windup)

    # ----------------------------------------------------------------- the Controller API

    def ratio(self, step: int) -> float:
        """The ratio of ``step``: the current ``r``, fixed for that step the first time asked."""
        if step not in self._fixed:
            self._fixed[step] = self._r
            self.history.append((step, self._r, self.delay, self.target))
        return self._fixed[step]

    def observe(self, obs: Observation) -> None:
        """Feed one finished step to the monitor; after ``warmup`` of them, move ``r``."""
        self.monitor.update(obs.comm_s, obs.compute_s)
        self.delay = float(obs.comm_s)
        # The ratio the step ran at; a caller that does not know it means the current one.
        at = float(obs.ratio) if math.isfinite(obs.ratio) else self._r
        self._track(at, self.delay)
        if self.monitor.count > self.warmup:
            self._r = self._next_ratio(at, self.delay, self.target)

    # ----------------------------------------------------------------- internals

    @property
    def target(self) -> float:
        """``D* = kappa * T_hat``: the delay that fits the compute; NaN before any observation."""
        return self.kappa * self.monitor.compute

    def _moved(self, before: float, after: float) -> bool:
        """Whether the delay moved by more than ``release``: the network's conditions changed."""
        return after > before * (1.0 + self.release) or after < before / (1.0 + self.release)

    def _track(self, r: float, d: float) -> None:
        """Anti-windup: count the cuts in a row that did not pay; hold, or end a hold."""
        prev, self._prev = self._prev, (r, d)
        if self.held is not None and (self._moved(self.held, d) or d <= self.target):
            self.held, self.unpaid = None, 0
        if prev is None:
            return
        r_prev, d_prev = prev
        if r > r_prev or self._moved(d_prev, d):
            # A rise, or new conditions (more competition during a cut is no floor): recount.
            self.unpaid = 0
        elif r < r_prev and r * (1.0 + self.hysteresis) <= r_prev and d > 0.0 and d_prev > 0.0:
            # Only a cut beyond the dead band says how the delay responds; a smaller one
            # (two interleaved lagged observations) is lost in the delay's noise.
            elasticity = math.log(d_prev / d) / math.log(r_prev / r)
            self.unpaid = 0 if elasticity >= self.min_elasticity else self.unpaid + 1
            if self.unpaid >= self.patience and self.held is None:
                self.held = d

    def _next_ratio(self, at: float, d: float, target: float) -> float:
        """The law's next ratio from an observation at ratio ``at`` with delay ``d``."""
        r = self._r
        if self.law == "aimd":
            if d <= (1.0 + self.delta) * target:
                return min(self.r_max, r + self.additive)
            if self.held is not None or at > r:
                return r  # unresponsive delay, or measured before the last cut: no more
            return max(self.r_min, r / 2.0)
        # Proportional, in log space so extreme delay ratios cannot overflow.
        if d <= 0.0:
            return self.r_max  # no measurable delay: nothing to save by compressing
        if target <= 0.0:
            return r if self.held is not None else self.r_min  # zero target: all we can
        error = math.log(target) - math.log(d)  # > 0: room to send more
        log_p = math.log(at) + (self.gamma_up if error > 0.0 else self.gamma) * error
        if self.held is not None:
            log_p = max(log_p, math.log(at))  # anti-windup: no cut while the delay is floored
        if log_p >= math.log(self.r_max):
            return self.r_max
        if log_p <= math.log(self.r_min):
            return self.r_min
        # Hysteresis: a delay within the band around the target is on target; correcting it
        # would only chase measurement noise.
        if abs(math.log(target) - math.log(d)) <= math.log1p(self.hysteresis):
            return r
        # at * exp(0) == at exactly, so an unchanged proposal never moves r by rounding.
        return min(self.r_max, max(self.r_min, at * math.exp(min(log_p - math.log(at), 700.0))))


def _integer(name: str, value: Any, lo: int) -> int:
    """``value`` as an integer >= ``lo``; anything else is a ConfigError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < lo:
        raise ConfigError(
            f"controller 'dc2': params.{name} must be an integer in [{lo}, inf), got {value!r}"
        )
    return int(value)
