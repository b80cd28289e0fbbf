"""DC2's laws in closed loop on synthetic plants (dc2_plants), fed with a lag.

Plants: ``D = a + b r`` (latency plus bytes), or the top-k COO plant of a 1M-parameter model.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from dc2_plants import COMPUTE_S, LAGS, Plant, closed_loop, linear, settling, spread

from psml_core.control import DC2Controller

# --------------------------------------------------------------------------- constant link


@pytest.mark.parametrize("lag", LAGS)
@pytest.mark.parametrize(("a", "b"), [(0.0005, 0.05), (0.004, 0.02), (0.0, 1.0)])
def test_constant_link_converges_to_the_fixed_point(lag, a, b):
    ctl = DC2Controller()  # the target is the compute time from the first observation
    ratios, delays = closed_loop(ctl, linear(lambda t: a, lambda t: b), 120, lag)
    ideal = (COMPUTE_S - a) / b  # a + b r = compute
    settled = ratios[40:]
    assert spread(settled) <= 1.0 + 1e-12  # one ratio: hysteresis stops it near the point
    assert settled[0] == pytest.approx(ideal, rel=0.12)
    assert np.abs(delays[40:] / COMPUTE_S - 1.0).max() <= 0.12
    # Monotone approach from r0 = 1: a law anchored at the observed ratio does not overshoot.
    assert np.all(np.diff(ratios) <= 0.0)


# --------------------------------------------------------------------------- bandwidth steps

N_PARAMS = 1_000_000
LATENCY_S = 1e-4
FAST_BPS = 1.25e9  # 10 Gbit/s: dense push 3.3 ms < compute
SLOW_BPS = FAST_BPS / 10  # 1 Gbit/s: dense push 32 ms > compute
SLOW = range(100, 200)  # steps at the slow bandwidth


def topk_plant(jitter: Callable[[int], float] = lambda t: 1.0) -> Plant:
    """Latency + top-k COO bytes (8 B per kept element, capped at dense) / bandwidth."""

    def plant(t: int, r: float) -> float:
        bw = (SLOW_BPS if t in SLOW else FAST_BPS) * jitter(t)
        k = max(1, math.floor(N_PARAMS * r))
        return LATENCY_S + min(8 * k, 4 * N_PARAMS) / bw

    return plant


def ideal_ratio() -> float:
    """The ratio whose delay on the slow link equals the compute time."""
    return (COMPUTE_S - LATENCY_S) * SLOW_BPS / (8 * N_PARAMS)  # about 0.155


@pytest.mark.parametrize("lag", LAGS)
@pytest.mark.parametrize("jitter_pct", [0.0, 5.0])
def test_bandwidth_drop_and_recovery(lag, jitter_pct):
    noise = 1.0 + jitter_pct / 100 * np.random.default_rng(0).uniform(-1.0, 1.0, 300)
    ratios, delays = closed_loop(DC2Controller(), topk_plant(lambda t: float(noise[t])), 300, lag)
    assert (ratios[:100] == 1.0).all()  # fast link: delay (3.3 ms) < compute: no compression
    # The drop is answered in the right direction as soon as it is observed, ...
    first = SLOW.start + lag + 1
    assert (ratios[first : SLOW.stop] < 1.0).all()
    # ... and settles: delay within 15% of compute, r near the ideal.
    settled = slice(SLOW.start + settling(lag), SLOW.stop)
    assert np.abs(delays[settled] / COMPUTE_S - 1.0).max() <= 0.15
    assert np.allclose(ratios[settled], ideal_ratio(), rtol=0.2)
    # Recovery: r rises as soon as the fast link is observed, r_max within 10 steps.
    assert ratios[SLOW.stop + lag + 1] > ratios[SLOW.stop - 1]
    assert (ratios[SLOW.stop + 10 :] == 1.0).all()


# --------------------------------------------------------------------------- two states


@pytest.mark.parametrize("lag", LAGS)
def test_two_state_link_settles_in_each_state(lag):
    # 40-step periods, the high state with 10x the bytes' transfer time (63 competitors).
    high = [(t // 40) % 2 == 1 for t in range(400)]
    plant = linear(lambda t: 0.002, lambda t: 0.1 if high[t] else 0.01)
    ctl = DC2Controller(kappa=1.0)
    ratios, _ = closed_loop(ctl, plant, 400, lag)
    levels = {}
    for start in range(40, 400, 40):
        settled = ratios[start + settling(lag) : start + 40]
        assert spread(settled) <= 1.12, (start, settled)
        levels.setdefault(high[start], []).append(float(np.median(settled)))
    assert max(levels[True]) < 0.5 * min(levels[False])
    # The same level every time the state comes back: no drift, no windup.
    assert spread(np.asarray(levels[True])) <= 1.25 and spread(np.asarray(levels[False])) <= 1.25


@pytest.mark.parametrize("lag", [2, 3, 5])
def test_one_spike_cuts_once_however_late_it_is_observed(lag):
    # D = 2 ms + 10 ms r with the target 10 ms: r* = 0.8. One step sees 20x the bytes' time.
    plant = linear(lambda t: 0.002, lambda t: 0.2 if t == 60 else 0.01)
    ratios, delays = closed_loop(DC2Controller(), plant, 120, lag)
    before = ratios[59]
    worst = before * (COMPUTE_S / plant(60, before)) ** 0.5  # one cut by (D*/D)^gamma
    assert ratios[60:].min() == pytest.approx(worst, rel=1e-9)
    # Back on target (within the 10% dead band) and steady after a bounded number of steps.
    back = delays[60 + settling(lag) :] / COMPUTE_S
    assert np.abs(np.log(back)).max() <= math.log(1.1) and spread(back) == 1.0


# --------------------------------------------------------------------------- latency floor


@pytest.mark.parametrize("lag", LAGS)
def test_latency_floor_stops_the_cuts(lag):
    # A floor of 20 ms above the 10 ms target: no ratio reaches it (a delay process's
    # latency). The cuts stop once the delay no longer falls with them; when the floor
    # goes (step 150), the ratio climbs to the new fixed point, 0.9.
    plant = linear(lambda t: 0.02 if t < 150 else 0.001, lambda t: 0.01)
    ctl = DC2Controller()
    ratios, delays = closed_loop(ctl, plant, 300, lag)
    held = ratios[60:150]
    assert held.min() >= 0.05 and spread(held) == 1.0
    assert ctl.held is None  # the floor's end ended the hold
    assert ratios[-1] == pytest.approx(0.9, rel=0.12)
    windup = DC2Controller(patience=10**9)  # no anti-windup: down to r_min
    assert closed_loop(windup, plant, 150, lag)[0][-1] == windup.r_min


@pytest.mark.parametrize("lag", LAGS)
def test_congestion_arriving_during_cuts_is_no_floor(lag):
    # 2 ms + 10 ms r (r* = 0.8) until step 3, while the first cuts are in flight; then 10x the
    # bytes' time (r* = 0.08). The delay rises while r falls, which is no latency floor.
    plant = linear(lambda t: 0.002, lambda t: 0.01 if t < 3 else 0.1)
    ctl = DC2Controller()
    ratios, delays = closed_loop(ctl, plant, 80, lag)
    assert ctl.held is None
    assert ratios[-1] == pytest.approx(0.08, rel=0.12)
    assert np.abs(np.log(delays[settling(lag) + 3 :] / COMPUTE_S)).max() <= math.log(1.1)


# --------------------------------------------------------------------------- AIMD


@pytest.mark.parametrize("lag", LAGS)
def test_aimd_saw_tooth_around_compute(lag):
    ratios, delays = closed_loop(DC2Controller(law="aimd"), topk_plant(), 400, lag)
    assert (ratios[:100] == 1.0).all()
    settled = delays[SLOW.start + 20 : SLOW.stop] / COMPUTE_S
    assert 0.75 <= settled.mean() <= 1.15, settled.mean()
    assert settled.max() <= 1.5
    # Additive increase: 0.01 per step, so back to r_max within about 85 steps.
    assert (ratios[SLOW.stop + 95 :] == 1.0).all()


@pytest.mark.parametrize("lag", [2, 3, 5])
def test_aimd_halves_once_per_round_trip(lag):
    # The drop to the slow link is seen in `lag` observations at r = 1 before the first
    # one at the halved ratio: a law without the round-trip rule would halve each time.
    ratios, _ = closed_loop(DC2Controller(law="aimd"), topk_plant(), 130, lag)
    assert ratios[SLOW.start + lag + 1] == 0.5
    cuts = np.flatnonzero(np.diff(ratios[SLOW.start :]) < 0) + SLOW.start + 1
    assert (np.diff(cuts) >= lag).all()  # no two cuts within one round trip
