"""DIVERGED: runs that blow up or end at chance are marked, never mistaken for slow runs."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from psml_core.engine import train
from psml_core.metrics.divergence import divergence

LN10 = math.log(10)


def evals(*losses, accuracy=None):
    """Evaluations with these test losses; the accuracy at chance (1/C = 0.1) unless given."""
    accs = accuracy or [0.1] * len(losses)
    return [(i * 10, float(i), accs[i], loss) for i, loss in enumerate(losses)]


def test_a_run_that_learns_is_not_diverged():
    assert divergence(evals(2.3, 1.2, 0.4, 0.3), [(0, 2.3), (1, 0.5)], 10) is None


def test_a_non_finite_loss_is_diverged_with_its_iteration():
    why = divergence(evals(2.3, 1.0), [(0, 2.3), (7, math.nan), (5, math.inf)], 10)
    assert why == "loss non-finite from iteration 5"
    assert divergence(evals(2.3, math.nan), [], 10).startswith("loss non-finite")


def test_a_loss_back_at_chance_after_falling_is_diverged():
    # The random-k family under server momentum: down to 6.05? no: down, up to 6.05, then ln 10.
    why = divergence(evals(2.3, 0.9, 6.05, LN10), [(0, 1.0)], 10)
    assert why is not None and "back at chance" in why and "0.9" in why


def test_a_loss_above_chance_is_diverged():
    assert "back at chance" in divergence(evals(2.3, 0.5, 9.0), [], 10)


def test_a_run_that_never_left_chance_is_diverged():
    why = divergence(evals(LN10, LN10 * 0.99), [], 10)
    assert why is not None and "never left chance" in why


def test_binary_chance_is_ln_2():
    assert divergence(evals(0.69, 0.4, 0.3), [], 2) is None
    assert divergence(evals(0.69, 0.4, 0.68, accuracy=[0.5, 0.8, 0.52]), [], 2) is not None


def test_an_overfitting_run_whose_accuracy_holds_is_not_diverged():
    # The small tier's sparse DNN: test loss past ln 2 late in the run, accuracy where it was.
    holds = [0.5, 0.70, 0.733, 0.716]
    assert divergence(evals(0.69, 0.6, 0.7, 1.19, accuracy=holds), [(0, 0.3)], 2) is None
    # The same losses with the accuracy gone back to chance: diverged.
    lost = [0.5, 0.70, 0.733, 0.55]
    why = divergence(evals(0.69, 0.6, 0.7, 1.19, accuracy=lost), [(0, 0.3)], 2)
    assert why is not None and "back at chance" in why
    # An accuracy that never gained MIN_GAIN over 1/C did not learn: loss at chance diverges.
    flat = [0.1, 0.12, 0.13]
    assert divergence(evals(LN10, 2.0, LN10, accuracy=flat), [], 10) is not None


def test_a_blown_up_sim_run_ends_diverged_instead_of_failing(smoke, prepared, tmp_path):
    """lr 1e30 makes the MLP's loss non-finite within a few steps: the run ends early, and its
    summary says DIVERGED with the reason, instead of a codec refusing NaN mid-run."""
    run = smoke.run("digits_mlp", "topk_ef", "dc_10g", smoke.seeds[0])
    spec = dataclasses.replace(
        run, workload=dataclasses.replace(run.workload, lr=1e30, iterations=30)
    )
    summary = train(spec, prepared["digits"], tmp_path)
    assert summary["status"] == "diverged", summary["status_reason"]
    assert summary["iterations"] < 30
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["status"] == "diverged" and on_disk["status_reason"]


@pytest.mark.parametrize("method", ["dense_bsp", "topk_ef"])
def test_a_healthy_smoke_run_is_ok(smoke, prepared, tmp_path, method):
    run = smoke.run("digits_mlp", method, "dc_10g", smoke.seeds[0])
    spec = dataclasses.replace(run, workload=dataclasses.replace(run.workload, iterations=40))
    summary = train(spec, prepared["digits"], tmp_path)
    assert summary["status"] == "ok" and summary["status_reason"] is None
    assert summary["test_samples"] > 0 and summary["eval_every"] == run.workload.eval_every
