"""The device timeline's building blocks against their definitions."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from psml_core.engine.timeline import FORWARD_SHARE, key_ready_fraction, shard_ready, step_timeline


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=4000), min_size=1, max_size=12).filter(
        lambda s: sum(s) > 0
    ),
    seed=st.integers(min_value=0, max_value=2**31 - 1),
    share=st.floats(min_value=0.0, max_value=1.0),
)
def test_shard_ready_is_the_latest_key_of_the_shard(
    sizes: list[int], seed: int, share: float
) -> None:
    ready = key_ready_fraction(sizes)
    assert np.all(np.diff(ready) <= 0)  # what shard_ready relies on, exactly
    rng = np.random.default_rng(seed)
    keys = np.flatnonzero(rng.random(ready.size) < share)
    rng.shuffle(keys)  # a touched pull's keys need not be sorted
    want = float(ready[keys].max()) if keys.size else 1.0
    assert shard_ready(ready, keys) == want


def test_key_ready_fraction_follows_backward_from_the_last_tensor() -> None:
    ready = key_ready_fraction([2, 6])
    # The last tensor's gradient comes first: after the forward and its own share of backward.
    assert ready[-1] == FORWARD_SHARE + (1 - FORWARD_SHARE) * 6 / 8
    assert ready[0] == 1.0
    assert ready.size == 8


def test_step_timeline_overlaps_pushes_with_backward_and_delays_it_by_the_encodes() -> None:
    plan = step_timeline(10.0, 3.0, ready=[1.0, 0.5], encode_s=[0.25, 0.5], overlap=True)
    assert plan.push_start == [13.75, 12.0]  # shard 1 ready at 1.5 s, encoded by 2.0 s
    assert plan.device_end == 13.75
    assert plan.encode_s == 0.75
    serial = step_timeline(10.0, 3.0, ready=[1.0, 0.5], encode_s=[0.25, 0.5], overlap=False)
    assert serial.push_start == [13.25, 13.75] and serial.device_end == 13.75
