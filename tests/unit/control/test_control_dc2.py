"""DC2 controller: delay monitor, both laws, parameter checks, closed loop on a toy plant."""

from __future__ import annotations

import math
import pickle
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psml_core.config import BlockSpec
from psml_core.control import CONTROLLERS, DC2Controller, DelayMonitor, Observation
from psml_core.errors import ConfigError


def drive(ctl: DC2Controller, comms: Sequence[float], compute: float = 1.0) -> list[float]:
    """Open loop: ask the ratio of each step, then observe the given comm time for it."""
    out = []
    for t, c in enumerate(comms):
        out.append(ctl.ratio(t))
        ctl.observe(Observation(step=t, comm_s=c, compute_s=compute))
    out.append(ctl.ratio(len(comms)))
    return out


# --------------------------------------------------------------------------- monitor


def test_monitor_smooths_delay_and_compute():
    m = DelayMonitor(alpha=0.5)
    assert math.isnan(m.delay) and math.isnan(m.compute) and m.count == 0
    assert m.update(4.0, 1.0) == 1.0  # the first sample initialises both EMAs; returns T_hat
    assert m.update(2.0, 3.0) == 2.0
    assert m.delay == 3.0 and m.count == 2
    m.update(0.0, 2.0)
    assert m.delay == 1.5 and m.compute == 2.0
    assert not hasattr(m, "baseline")  # no delay of some ratio is kept as a reference


def test_monitor_constant_input_is_exact():
    m = DelayMonitor(alpha=0.2)
    for _ in range(100):
        m.update(0.1, 0.3)
    assert m.delay == 0.1 and m.compute == 0.3


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_monitor_rejects_bad_times(bad):
    with pytest.raises(ValueError, match="comm_s must be finite and >= 0"):
        DelayMonitor().update(bad, 1.0)
    with pytest.raises(ValueError, match="compute_s must be finite and >= 0"):
        DelayMonitor().update(1.0, bad)


# --------------------------------------------------------------------------- invariants


times = st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=150, deadline=None)
@given(
    law=st.sampled_from(["proportional", "aimd"]),
    bounds=st.tuples(
        st.floats(min_value=1e-6, max_value=1.0), st.floats(min_value=1e-6, max_value=1.0)
    ).map(sorted),
    r0_frac=st.floats(min_value=0.0, max_value=1.0),
    warmup=st.integers(min_value=0, max_value=5),
    gamma=st.floats(min_value=0.1, max_value=1.0),
    stream=st.lists(st.tuples(times, times), max_size=60),
)
def test_ratio_always_within_bounds(law, bounds, r0_frac, warmup, gamma, stream):
    r_min, r_max = bounds
    r0 = min(r_max, max(r_min, r_min + r0_frac * (r_max - r_min)))
    ctl = DC2Controller(law=law, r_min=r_min, r_max=r_max, r0=r0, warmup=warmup, gamma=gamma)
    for t, (comm, comp) in enumerate(stream):
        assert r_min <= ctl.ratio(t) <= r_max
        ctl.observe(Observation(t, comm, comp))
    assert r_min <= ctl.ratio(len(stream)) <= r_max
    assert all(r_min <= r <= r_max for _, r, _, _ in ctl.history)


@settings(max_examples=50, deadline=None)
@given(
    stream=st.lists(st.tuples(times, times), min_size=1, max_size=40),
    law=st.sampled_from(["proportional", "aimd"]),
)
def test_warmup_holds_r0(stream, law):
    w = len(stream)
    ctl = DC2Controller(law=law, warmup=w, r0=0.3)
    ratios = drive_pairs(ctl, stream)
    assert ratios[:w] == [0.3] * w


def same_history(a: Sequence[tuple], b: Sequence[tuple]) -> bool:
    """Equal histories, NaN matching NaN."""
    return len(a) == len(b) and all(
        np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)
        for x, y in zip(a, b, strict=True)
    )


def drive_pairs(ctl: DC2Controller, stream: Sequence[tuple[float, float]]) -> list[float]:
    out = []
    for t, (comm, comp) in enumerate(stream):
        out.append(ctl.ratio(t))
        ctl.observe(Observation(t, comm, comp))
    return out


def test_first_change_comes_right_after_warmup():
    # Five observations only feed the monitor; the sixth moves r (fast network: rise by
    # 1 / 0.1, to r_max).
    ctl = DC2Controller(warmup=5, r0=0.3)
    ratios = drive(ctl, [0.1] * 7, compute=1.0)
    assert ratios[:6] == [0.3] * 6 and ratios[6] == 1.0
    slow = DC2Controller(warmup=5, r0=0.3, gamma_up=0.5)
    assert drive(slow, [0.1] * 7, compute=1.0)[6] == pytest.approx(0.3 * 10**0.5)
    # Without a warm-up the first observation moves r.
    assert drive(DC2Controller(r0=0.3), [0.1], compute=1.0) == [0.3, 1.0]


def test_determinism_and_stable_per_step_ratio():
    rng = np.random.default_rng(3)
    comms = rng.lognormal(0.0, 1.0, 80).tolist()
    a, b = DC2Controller(warmup=4), DC2Controller(warmup=4)
    assert drive(a, comms) == drive(b, comms)
    assert same_history(a.history, b.history)
    # A step's ratio is fixed when first asked, whatever is observed afterwards.
    c = DC2Controller(warmup=1, alpha=1.0)
    first = c.ratio(3)
    for t, comm in enumerate([1.0, 50.0, 50.0, 50.0, 50.0]):
        c.observe(Observation(t, comm, 1.0))
    assert c.ratio(3) == first == 1.0 and c.ratio(4) < 1.0


def test_pickle_round_trip_keeps_state():
    ctl = DC2Controller(warmup=2)
    drive(ctl, [1.0, 1.0, 3.0, 4.0])
    clone = pickle.loads(pickle.dumps(ctl))
    assert same_history(clone.history, ctl.history)
    clone.observe(Observation(4, 5.0, 1.0))
    ctl.observe(Observation(4, 5.0, 1.0))
    assert clone.ratio(5) == ctl.ratio(5)


# --------------------------------------------------------------------------- proportional law


@pytest.mark.parametrize("hysteresis", [0.1, 0.0])
def test_delay_at_target_keeps_ratio(hysteresis):
    ctl = DC2Controller(r0=0.3, warmup=5, hysteresis=hysteresis)
    assert set(drive(ctl, [0.01] * 100, compute=0.01)) == {0.3}
    _, r, d_hat, target = ctl.history[-1]
    assert r == 0.3 and d_hat == target == 0.01


def test_rising_delay_lowers_ratio_falling_delay_restores_r_max():
    ctl = DC2Controller(warmup=10)
    ratios = drive(ctl, [1.0] * 10 + [5.0] * 30, compute=1.0)
    assert ratios[:11] == [1.0] * 11  # D_t == D* == 1 through warm-up: no change
    rising = ratios[11:41]
    assert all(b <= a for a, b in zip(rising, rising[1:], strict=False))
    assert rising[0] == pytest.approx(5**-0.5)  # one cut by (D*/D_t)^gamma, gamma 0.5
    # The delay did not fall with the cuts (open loop): after two such cuts, no more.
    assert rising[-1] == pytest.approx(1 / 5) and ctl.held == 5.0
    for t in range(40, 70):  # the fast network ends the hold and brings r back to r_max
        ctl.observe(Observation(t, 0.1, 1.0))
    assert ctl.held is None and ctl.ratio(70) == 1.0


def test_history_records_ratio_delay_and_target():
    ctl = DC2Controller(warmup=2, alpha=1.0, gamma=1.0)
    drive(ctl, [1.0, 1.0, 4.0], compute=2.0)
    steps = [h[0] for h in ctl.history]
    assert steps == [0, 1, 2, 3]
    assert math.isnan(ctl.history[0][2]) and math.isnan(ctl.history[0][3])
    # The target is kappa * T_hat from the first observation, warm-up or not.
    assert ctl.history[1][1:] == (1.0, 1.0, 2.0)
    assert ctl.history[2][1:] == (1.0, 1.0, 2.0)  # still in warm-up: r0 held
    assert ctl.history[3][1:] == (0.5, 4.0, 2.0)  # 1.0 * 2.0 / 4.0


def test_hysteresis_suppresses_small_changes():
    # alpha 1 (no smoothing) and gain 1 isolate the law.
    ctl = DC2Controller(r0=0.5, warmup=0, alpha=1.0, gamma=1.0)
    ctl.observe(Observation(0, 1.05, 1.0))  # asks for -4.8%: ignored
    assert ctl.ratio(1) == 0.5
    ctl.observe(Observation(1, 0.92, 1.0))  # asks for +8.7%: ignored
    assert ctl.ratio(2) == 0.5
    ctl.observe(Observation(2, 1.2, 1.0))  # asks for -16.7%: taken
    assert ctl.ratio(3) == pytest.approx(0.5 / 1.2)
    free = DC2Controller(r0=0.5, warmup=0, alpha=1.0, gamma=1.0, hysteresis=0.0)
    free.observe(Observation(0, 1.05, 1.0))
    assert free.ratio(1) == pytest.approx(0.5 / 1.05)


def test_hysteresis_does_not_block_a_bound():
    ctl = DC2Controller(r0=0.95, warmup=0, alpha=1.0, gamma=1.0)
    ctl.observe(Observation(0, 0.9, 1.0))  # proposes 1.056 > r_max: r_max, though < 10%
    assert ctl.ratio(1) == 1.0
    low = DC2Controller(r0=0.00105, warmup=0, alpha=1.0, gamma=1.0)
    low.observe(Observation(0, 1.1, 1.0))  # proposes 0.00095 < r_min
    assert low.ratio(1) == 0.001


def test_gamma_scales_cuts_and_gamma_up_rises():
    ctl = DC2Controller(r0=0.5, warmup=0, alpha=1.0, gamma=0.5)
    ctl.observe(Observation(0, 4.0, 1.0))
    assert ctl.ratio(1) == pytest.approx(0.25)  # 0.5 * (1/4)^0.5
    ctl.observe(Observation(1, 0.5, 1.0, ratio=0.25))
    assert ctl.ratio(2) == pytest.approx(0.5)  # 0.25 * (1/0.5)^1
    up = DC2Controller(r0=0.1, warmup=0, alpha=1.0, gamma_up=0.5)
    up.observe(Observation(0, 0.25, 1.0))
    assert up.ratio(1) == pytest.approx(0.2)  # 0.1 * (1/0.25)^0.5


def test_zero_delay_and_zero_target():
    fast = DC2Controller(r0=0.1, warmup=0)
    fast.observe(Observation(0, 0.0, 1.0))
    assert fast.ratio(1) == 1.0
    free = DC2Controller(r0=0.5, warmup=0)
    free.observe(Observation(0, 1.0, 0.0))
    assert free.ratio(1) == 0.001


def test_kappa_scales_the_target():
    ctl = DC2Controller(r0=0.5, warmup=0, alpha=1.0, kappa=2.0, gamma=1.0)
    ctl.observe(Observation(0, 1.0, 1.0))  # D* = 2: room to double r
    assert ctl.ratio(1) == 1.0 and ctl.target == 2.0


def test_a_floor_needs_real_cuts_into_a_steady_delay():
    """Tiny cuts in noise, or congestion that arrives during a cut, are no latency floor.

    The small tier's bw_steps (seed 0) before the fix: a 3% cut between two interleaved
    lagged observations counted as a cut that did not pay, the drop to 0.1 Gbit/s during
    the next cut as a second, and the ratio stayed held at 0.056 for about 95 steps.
    """
    ctl = DC2Controller(warmup=0, alpha=1.0)
    ctl.observe(Observation(0, 1e-3, 1e-3, ratio=0.0681))
    ctl.observe(Observation(1, 1.005e-3, 1e-3, ratio=0.0661))  # 3% cut: no information
    assert ctl.unpaid == 0
    ctl.observe(Observation(2, 5.5e-3, 1e-3, ratio=0.0582))  # the link got 10x slower
    ctl.observe(Observation(3, 5.8e-3, 1e-3, ratio=0.0563))
    assert ctl.held is None and ctl.unpaid == 0
    assert ctl.ratio(4) < 0.03  # still cutting, towards the new fixed point
    # A steady delay that real cuts (beyond the 10% band) do not shorten is a floor.
    for t, r in enumerate([0.02, 0.01, 0.005], start=4):
        ctl.observe(Observation(t, 5.5e-3, 1e-3, ratio=r))
    assert ctl.held == 5.5e-3


# --------------------------------------------------------------------------- AIMD


def test_aimd_halves_on_congestion_and_adds_otherwise():
    ctl = DC2Controller(law="aimd", r0=0.5, warmup=0, alpha=1.0)
    seq = []
    for t, comm in enumerate([2.0, 2.0, 1.0, 1.1, 1.11, 0.0]):
        ctl.observe(Observation(t, comm, 1.0))
        seq.append(ctl.ratio(t + 1))
    # 1.1 is not above (1 + 0.1) * 1: additive; 1.11 is: halve.
    assert seq == pytest.approx([0.25, 0.125, 0.135, 0.145, 0.0725, 0.0825])


def test_aimd_respects_bounds():
    top = DC2Controller(law="aimd", r0=0.995, warmup=0)
    top.observe(Observation(0, 0.5, 1.0))
    assert top.ratio(1) == 1.0
    bottom = DC2Controller(law="aimd", r0=0.001, warmup=0)
    bottom.observe(Observation(0, 9.0, 1.0))
    assert bottom.ratio(1) == 0.001


def test_aimd_ignores_hysteresis():
    ctl = DC2Controller(law="aimd", r0=0.5, warmup=0, hysteresis=0.5)
    ctl.observe(Observation(0, 0.5, 1.0))
    assert ctl.ratio(1) == pytest.approx(0.51)


# --------------------------------------------------------------------------- config


def test_registered_and_built_from_config():
    assert "dc2" in CONTROLLERS
    ctl = CONTROLLERS.build(BlockSpec("dc2", {"law": "aimd", "warmup": 5}))
    assert isinstance(ctl, DC2Controller) and ctl.law == "aimd" and ctl.warmup == 5
    assert ctl.ratio(0) == 1.0


@pytest.mark.parametrize(
    ("param", "value", "allowed"),
    [
        ("alpha", 0.0, "(0, 1]"),
        ("alpha", 1.5, "(0, 1]"),
        ("alpha", "fast", "(0, 1]"),
        ("alpha", True, "(0, 1]"),
        ("warmup", -1, "[0, inf)"),
        ("warmup", 2.5, "[0, inf)"),
        ("kappa", 0.0, "(0, inf)"),
        ("kappa", math.nan, "(0, inf)"),
        ("gamma", -1.0, "(0, 1]"),
        ("gamma", 1.5, "(0, 1]"),
        ("gamma_up", 0.0, "(0, 1]"),
        ("r_min", 0.0, "(0, 1]"),
        ("r_max", 1.5, "[0.001, 1]"),
        ("r_max", 0.0001, "[0.001, 1]"),
        ("r0", 2.0, "[0.001, 1]"),
        ("hysteresis", 1.0, "[0, 1)"),
        ("delta", -0.1, "[0, inf)"),
        ("additive", 0.0, "(0, 1]"),
        ("min_elasticity", 1.5, "[0, 1]"),
        ("patience", 0, "[1, inf)"),
        ("patience", 1.5, "[1, inf)"),
        ("release", 0.0, "(0, inf)"),
    ],
)
def test_bad_params_name_the_param_and_range(param, value, allowed):
    with pytest.raises(ConfigError) as err:
        CONTROLLERS.build(BlockSpec("dc2", {param: value}))
    msg = str(err.value)
    assert f"controller 'dc2': params.{param} must be" in msg and allowed in msg


def test_r0_range_follows_the_bounds():
    with pytest.raises(ConfigError, match=r"params.r0 must be in \[0.01, 0.5\]"):
        DC2Controller(r_min=0.01, r_max=0.5, r0=1.0)


def test_unknown_law_lists_the_known_ones():
    with pytest.raises(ConfigError, match="params.law must be one of aimd, proportional"):
        CONTROLLERS.build(BlockSpec("dc2", {"law": "pid"}))


def test_unknown_param_is_a_config_error():
    with pytest.raises(ConfigError, match="controller 'dc2': bad params"):
        CONTROLLERS.build(BlockSpec("dc2", {"beta": 1.0}))
