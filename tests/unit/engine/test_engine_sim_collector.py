"""The collector is paused around a simulated run and restored after it, whatever happens."""

from __future__ import annotations

import gc
import weakref

import pytest

from psml_core.engine.sim.collector import RUN_THRESHOLDS, quiet_collector


class Node:
    other: Node


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


def test_a_freeze_in_force_before_stays_in_force():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with quiet_collector(), quiet_collector():
            pass
        assert gc.get_freeze_count() >= frozen
    finally:
        gc.unfreeze()


def test_cycles_made_during_a_run_are_collected_without_asking():
    was_enabled = gc.isenabled()
    gc.enable()  # automatic collection is what is tested
    try:
        _collect_a_cycle_unasked()
    finally:
        if not was_enabled:
            gc.disable()


def _collect_a_cycle_unasked() -> None:
    with quiet_collector():
        a, b = Node(), Node()
        a.other, b.other = b, a
        alive = weakref.ref(a)
        del a, b
        # Enough live container allocations for several young passes at the run's threshold
        # (an object freed at once does not count towards one).
        held = []
        for _ in range(4 * RUN_THRESHOLDS[0]):
            held.append([None])
            if alive() is None:
                break
        assert alive() is None
