from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from psml_core.config import BlockSpec
from psml_core.sync import SYNC_POLICIES


@given(st.lists(st.integers(0, 20), min_size=1, max_size=16), st.data())
def test_bsp_invariant_no_worker_ahead(clocks, data):
    """BSP lets a worker go on only if nobody is behind it: staleness is always 0."""
    bsp = SYNC_POLICIES.build(BlockSpec("bsp"))
    w = data.draw(st.integers(0, len(clocks) - 1))
    allowed = bsp.may_proceed(w, clocks)
    assert allowed == (clocks[w] == min(clocks))
    if allowed:
        assert bsp.staleness(w, clocks) == 0


def test_bsp_is_a_barrier():
    assert SYNC_POLICIES.build(BlockSpec("bsp")).barrier
