"""The collector is paused around a simulated run and restored after it, whatever happens."""

from __future__ import annotations

import gc

import pytest

from psml_core.engine.sim.collector import RUN_THRESHOLDS, quiet_collector


def test_thresholds_and_freeze_are_restored_after_a_run_and_an_error():
    before = gc.get_threshold()
    with quiet_collector():
        assert gc.get_threshold() == RUN_THRESHOLDS
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError), quiet_collector():
        raise RuntimeError("a run that fails")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_cycles_made_during_a_run_are_still_collected():
    class Node:
        pass

    with quiet_collector():
        for _ in range(3):
            a, b = Node(), Node()
            a.other, b.other = b, a
        del a, b
        assert gc.collect() > 0
