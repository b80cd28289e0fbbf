from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from psml_core.config import BlockSpec
from psml_core.errors import ConfigError
from psml_core.sync import SYNC_POLICIES
from psml_core.sync.dssp import DSSP


@given(
    st.integers(0, 4),
    st.integers(0, 6),
    st.lists(st.tuples(st.integers(0, 3), st.floats(0.01, 5.0)), min_size=1, max_size=60),
)
def test_staleness_never_exceeds_s_low_plus_r_max(s_low, r_max, events):
    """Drive the policy like a server: serve, push after a random time; the bound holds."""
    dssp = DSSP(s_low=s_low, r_max=r_max)
    clocks = [0, 0, 0, 0]
    now = 0.0
    for w in range(4):
        dssp.observe_serve(w, 0, now)
    for w, dt in events:
        now += dt
        dssp.observe_push(w, clocks[w], now)
        clocks[w] += 1
        lead = clocks[w] - min(clocks)
        allowed = dssp.may_proceed(w, clocks)
        if lead <= s_low:
            assert allowed
        if lead > s_low + r_max:
            assert not allowed
        if allowed:
            dssp.observe_serve(w, clocks[w], now)
        else:
            clocks[w] -= 1  # it would wait: model it as not having pushed (keeps clocks valid)


def test_grant_fits_the_fast_worker_before_the_slow_push():
    dssp = DSSP(s_low=1, r_max=6)
    # Worker 1 takes 10 s per iteration, worker 0 takes 1 s.
    dssp.observe_serve(0, 0, 0.0)
    dssp.observe_serve(1, 0, 0.0)
    dssp.observe_push(0, 0, 1.0)
    dssp.observe_serve(0, 1, 1.0)
    dssp.observe_push(0, 1, 2.0)
    dssp.observe_push(1, 0, 10.0)
    dssp.observe_serve(1, 1, 10.0)
    dssp.observe_serve(0, 2, 10.0)
    dssp.observe_push(0, 2, 11.0)
    # Slowest (worker 1, clock 1) started at 10 s and takes 10 s: next push at 20 s. Worker 0
    # pushed at 11 s, so 9 more one-second iterations fit; capped at r_max = 6.
    assert dssp.extra(0, [3, 1]) == 6
    assert dssp.may_proceed(0, [1 + 1 + 6, 1])  # lead 7 = s_low + r
    assert not dssp.may_proceed(0, [1 + 1 + 7, 1])


def test_bad_params_name_the_field():
    with pytest.raises(ConfigError, match="params.r_max"):
        SYNC_POLICIES.build(BlockSpec("dssp", {"r_max": -1}))
