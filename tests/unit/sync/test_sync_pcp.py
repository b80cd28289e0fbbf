from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from psml_core.config import BlockSpec
from psml_core.errors import ConfigError
from psml_core.sync import SYNC_POLICIES
from psml_core.sync.pcp import PCP
from psml_core.sync.rounds import REPORT_BYTES, RoundReport

times = st.floats(1e-6, 10.0, allow_nan=False)


@given(st.lists(st.tuples(times, st.floats(0.0, 10.0)), min_size=1, max_size=16), st.integers(1, 8))
def test_budgets_are_bounded_and_faster_workers_get_more(figures, s_max):
    pcp = PCP(s_max=s_max)
    for p, (tau, comm) in enumerate(figures):
        pcp.report(p, RoundReport(1, tau, comm))
    k = pcp.budgets(len(figures))
    assert all(1 <= x <= s_max for x in k)
    slowest = max(range(len(figures)), key=lambda p: sum(figures[p]))
    assert k[slowest] == 1  # the sync point is the slowest worker's one-step round
    for p, (tau, comm) in enumerate(figures):
        # Granted steps fit before the sync point (up to the float slack), unless capped at 1.
        sync = max(t + c for t, c in figures)
        if k[p] > 1:
            assert comm + k[p] * tau <= sync * (1 + 1e-4)
        for q, (tau_q, comm_q) in enumerate(figures):
            if tau <= tau_q and comm == comm_q:
                assert k[p] >= k[q]


def test_no_prediction_before_every_worker_reported():
    pcp = PCP()
    pcp.report(0, RoundReport(1, 0.1, 0.0))
    assert pcp.budgets(2) == [1, 1]


def test_prediction_is_an_ema_over_the_window():
    pcp = PCP(window=2, ema=0.5)
    for tau in (100.0, 1.0, 3.0):  # the first falls out of the window
        pcp.report(0, RoundReport(1, tau, 2 * tau))
    assert pcp.predict(0) == pytest.approx((2.0, 4.0))


@given(st.integers(1, 2**32 - 1), st.floats(0, 1e3, width=32), st.floats(0, 1e3, width=32))
def test_report_wire_round_trip(steps, step_s, comm_s):
    r = RoundReport(steps, step_s, comm_s)
    assert len(r.pack()) == REPORT_BYTES
    assert RoundReport.unpack(r.pack()) == r


def test_truncated_report_is_rejected():
    with pytest.raises(ValueError, match="12 bytes"):
        RoundReport.unpack(b"\x00" * 11)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"s_max": 0}, "s_max"),
        ({"window": 1.5}, "window"),
        ({"ema": 0}, "ema"),
        ({"weighting": "mean"}, "weighting"),
    ],
)
def test_bad_params_name_the_field(params, field):
    with pytest.raises(ConfigError, match=f"params.{field}"):
        SYNC_POLICIES.build(BlockSpec("pcp", params))


def test_rounds_are_synchronous():
    pcp = PCP()
    assert pcp.rounds and pcp.barrier
    assert pcp.may_proceed(0, [3, 3, 3]) and not pcp.may_proceed(0, [4, 3, 3])
