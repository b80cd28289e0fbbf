"""The divergence test behind the DIVERGED status and the tuning's exclusions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from psml_core.metrics.divergence import diverged, run_series, smoothed

LN10 = math.log(10)


def _decay(n: int, start: float = LN10, end: float = 0.3) -> list[float]:
    return list(start + (end - start) * (1 - np.exp(-np.arange(n) / (n / 5))))


def test_a_healthy_run_did_not_diverge():
    assert diverged([0.5, 0.8, 0.9, 0.93], _decay(80), 10) is None


def test_a_non_finite_loss_is_named_with_its_iteration():
    losses = _decay(40)
    losses[17] = float("nan")
    assert diverged([0.9], losses, 10) == "loss non-finite (nan) at iteration 17"
    losses[17] = float("inf")
    assert "at iteration 17" in diverged([0.9], losses, 10)


def test_a_loss_that_falls_then_returns_to_ln_c_diverged():
    """The random-k pattern of the issue: the loss climbs to 6.05 and settles at ln 10."""
    losses = _decay(60, end=1.0) + list(np.linspace(1.0, 6.05, 20)) + [LN10] * 40
    why = diverged([0.7, 0.8, 0.1, 0.1, 0.1], losses, 10)
    assert why is not None and why.startswith("loss fell to") and "ln C = 2.3" in why
    # Above ln C at the end counts as well (within 5% or above).
    assert diverged([0.9, 0.9, 0.9], _decay(60, end=1.0) + [5.0] * 30, 10) is not None


def test_one_bad_minibatch_near_ln_c_does_not_count():
    losses = _decay(80, end=0.3)
    losses[-1] = LN10  # a single bad batch at the end; the smoothed loss stays low
    assert smoothed(losses)[-1] < 0.95 * LN10
    assert diverged([0.9, 0.92, 0.93], losses, 10) is None


def test_a_loss_that_never_fell_is_judged_by_accuracy():
    flat = [LN10 * 0.98] * 50
    assert diverged([0.4, 0.5, 0.55], flat, 10) is None  # slow, not diverged
    why = diverged([0.1, 0.11, 0.1], flat, 10)
    assert why is not None and why.startswith("ends at chance")


@pytest.mark.parametrize(
    ("classes", "acc", "at_chance"),
    [(10, 0.15, True), (10, 0.16, False), (2, 0.526, True), (2, 0.6, False)],
)
def test_chance_is_one_over_c_plus_a_margin(classes, acc, at_chance):
    losses = _decay(40, start=math.log(classes), end=0.6 * math.log(classes))
    assert (diverged([acc] * 3, losses, classes) is not None) is at_chance


def test_series_from_records_one_row_per_worker():
    it = [0, 0, 1, 1, 2, 2]
    loss = [1.0, 3.0, 2.0, 2.0, float("nan"), 1.0]
    acc = [np.nan, np.nan, 0.5, 0.5, np.nan, 0.7]
    evals, losses = run_series(it, loss, acc)
    assert evals == [0.5, 0.7]
    assert losses[:2] == [2.0, 2.0] and math.isnan(losses[2])
    assert diverged(evals, losses, 10) == "loss non-finite (nan) at iteration 2"


def test_classes_below_two_is_an_error():
    with pytest.raises(ValueError, match="classes must be >= 2"):
        diverged([0.5], [0.5], 1)
