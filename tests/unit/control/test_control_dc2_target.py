"""DC2's target ``D* = kappa * T_hat``: the delay at which communication fits the compute.

The target was once ``max(kappa T_hat, D_0)``, ``D_0`` the delay of a 20-step warm-up at ratio 1:
the dense step's delay. On a link slow from the start the law then kept the dense delay and
sent dense. These tests pin the new rule on synthetic plants ``D = a + b r`` (see dc2_plants),
with the controller's defaults (start at ratio 1, no warm-up): a link slow all the time is
compressed to the fixed point ``a + b r = T``; a target below the latency floor ends in a
hold at a small ratio; a free link stays dense; the ratio follows alternating congestion.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from dc2_plants import COMPUTE_S, LAGS, closed_loop, linear, spread

from psml_core.control import DC2Controller, Observation

# --------------------------------------------------------------------------- the target


def test_target_is_kappa_times_compute_from_the_first_observation():
    ctl = DC2Controller(kappa=2.0, alpha=0.5)
    assert math.isnan(ctl.target)
    # A first step 40x slower than its compute does not enter the target (the old D_0 did).
    ctl.observe(Observation(0, 0.4, 0.01, ratio=1.0))
    assert ctl.target == pytest.approx(0.02)
    ctl.observe(Observation(1, 0.4, 0.03, ratio=1.0))
    assert ctl.target == pytest.approx(2.0 * 0.02)  # T_hat = 0.01 + 0.5 (0.03 - 0.01)
    assert ctl.history == [] and ctl.ratio(2) < 1.0  # the law acted from the first observation


def test_first_observation_of_a_slow_link_cuts():
    # Dense delay 250x the compute (the digits MLP [512, 512] on 100 Mbit/s): the first
    # observation cuts by (T / D)^gamma, half the way in log space.
    ctl = DC2Controller()
    assert [ctl.ratio(t) for t in range(2)] == [1.0, 1.0]
    ctl.observe(Observation(0, 0.25, 0.001, ratio=1.0))
    assert ctl.ratio(2) == pytest.approx((0.001 / 0.25) ** 0.5)


# --------------------------------------------------------------------------- plants


@pytest.mark.parametrize("lag", LAGS)
@pytest.mark.parametrize("warmup", [0, 5])
def test_link_slow_from_the_start_is_compressed_to_the_fixed_point(lag, warmup):
    # The small tier's CNN on its free link: a dense delay 43x the compute, latency 0.2x. A
    # warm-up only delays the cuts: no delay seen in it enters the target.
    a, b = 0.2 * COMPUTE_S, 43.0 * COMPUTE_S
    ctl = DC2Controller(warmup=warmup)
    ratios, delays = closed_loop(ctl, linear(lambda t: a, lambda t: b), 80, lag)
    first = lag + warmup  # the first ratio fixed after the law's first observation
    assert (ratios[:first] == 1.0).all() and (ratios[first:] < 1.0).all()
    ideal = (COMPUTE_S - a) / b  # a + b r = T: about 0.019
    settled = slice(first + 7 * lag, None)  # seven moves, one per observation round trip
    assert np.allclose(ratios[settled], ideal, rtol=0.12)
    assert np.abs(np.log(delays[settled] / COMPUTE_S)).max() <= math.log(1.1)


@pytest.mark.parametrize("lag", LAGS)
def test_target_below_the_latency_floor_ends_in_a_hold_at_a_small_ratio(lag):
    # Latency 2x the compute (no ratio meets the target) and a dense delay 100x the compute.
    # r_min is far below, so that what stops the cuts is the anti-windup, not the bound.
    a, b = 2.0 * COMPUTE_S, 100.0 * COMPUTE_S
    plant = linear(lambda t: a, lambda t: b)
    ctl = DC2Controller(r_min=1e-5)
    ratios, delays = closed_loop(ctl, plant, 120, lag)
    assert ctl.held is not None
    held = ratios[12 * lag :]
    assert spread(held) == 1.0 and 1e-4 < held[0] < 0.005
    # Held where a cut stops paying: the delay within 10% of the floor, the best any ratio does.
    assert delays[12 * lag :].max() <= 1.1 * a
    windup = DC2Controller(r_min=1e-5, patience=10**9)  # no anti-windup: down to r_min
    assert closed_loop(windup, plant, 120, lag)[0][-1] == 1e-5


@pytest.mark.parametrize("lag", LAGS)
@pytest.mark.parametrize("r0", [1.0, 0.01])
def test_free_link_sends_dense(lag, r0):
    # Dense delay half the compute: communication fits; from any start the ratio is exactly 1
    # from the first observation's answer on.
    plant = linear(lambda t: 0.1 * COMPUTE_S, lambda t: 0.4 * COMPUTE_S)
    ratios, _ = closed_loop(DC2Controller(r0=r0), plant, 60, lag)
    start = 4 * lag if r0 < 1.0 else 0  # a few rises from 0.01: latency hides the room
    assert (ratios[start:] == 1.0).all(), ratios[: start + 4]


@pytest.mark.parametrize("lag", LAGS)
def test_ratio_follows_alternating_congestion(lag):
    # 40 steps free (dense delay 5x the compute, fixed point 0.16), 40 congested (20x the bytes'
    # time, fixed point 0.008), four times.
    n, a = 40, 0.2 * COMPUTE_S
    congested = [(t // n) % 2 == 1 for t in range(8 * n)]
    b = [(100.0 if c else 5.0) * COMPUTE_S for c in congested]
    ratios, _ = closed_loop(DC2Controller(), linear(lambda t: a, lambda t: b[t]), 8 * n, lag)
    ideal = {False: (COMPUTE_S - a) / (5.0 * COMPUTE_S), True: (COMPUTE_S - a) / b[n]}
    for s in range(n, 8 * n, n):
        state, before = congested[s], ratios[s - 1]
        period = ratios[s : s + n]
        # Settled within 15% of the state's fixed point after six round trips (cuts take half
        # the way, so the way down takes longer than the way up).
        assert np.allclose(period[6 * lag + 1 :], ideal[state], rtol=0.15), (s, period)
        if state:
            # Falls below the free level as soon as the switch is observed, far below it
            # within three round trips.
            assert period[lag] < 0.3 * before and (period[3 * lag :] < 0.15 * before).all()
        else:
            # Recovers: past 80% of the free level within three round trips.
            assert period[lag] > 3.0 * before and period[3 * lag] > 0.8 * ideal[state]
