"""The sim's batched gradients (``engine/sim/gradients.py``) against the unbatched engine.

``PSML_SIM_BATCH=loop`` computes a step's gradients at the first compute start, for the
workers predicted to compute it at the same replica, one replica after another, and hands each
its gradient where the prediction holds: every record (bytes, simulated times, losses,
accuracies) must equal the unbatched engine's bit for bit, on the host path and with the
vectors kept on the device (forced on the CPU), whether predictions hit (a barrier) or miss
(no barrier). ``on`` computes them in one batched pass: bytes of a dense method are the same,
losses within float32 rounding.
``benchmarks/compare_cores.py --env-new PSML_SIM_BATCH=loop`` runs the same comparison on every
run of a finished tier.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from psml_core.data.store import load_prepared
from psml_core.engine import SimBackend, staged_job
from psml_core.engine.device_state import keep_on_device
from psml_core.engine.sim.gradients import batch_mode
from psml_core.errors import ConfigError
from psml_core.recipes import load_experiment


@pytest.fixture(scope="module")
def small(repo):
    return load_experiment({"tier": "small"}, repo / "config")


def _spec(smoke, small, method: str, scenario: str = "dc_10g", iterations: int = 8, **kw):
    run = smoke.run("digits_mlp", "dense_bsp", scenario, smoke.seeds[0])
    recipe = smoke.recipes.get(method) or small.recipes[method]
    wl = dataclasses.replace(run.workload, iterations=iterations, eval_every=4, **kw)
    return dataclasses.replace(run, workload=wl, method=recipe)


def _rows(records) -> list[dict]:
    out = []
    for r in records:
        row = dataclasses.asdict(r)
        nan = {k for k, v in row.items() if isinstance(v, float) and math.isnan(v)}
        out.append({k: "nan" if k in nan else v for k, v in row.items()})
    return out


def _run(spec, ds, monkeypatch, mode: str, device: bool = False):
    monkeypatch.setenv("PSML_SIM_BATCH", mode)
    job = staged_job(spec, ds)
    if device:
        assert keep_on_device(job, torch.device("cpu"), force=True) is None
    backend = SimBackend()
    rows = _rows(backend.run(job))
    return rows, backend.gradients


@pytest.mark.parametrize(
    ("method", "scenario"),
    [
        ("dense_bsp", "dc_10g"),  # every worker's compute starts at one instant
        ("topk_ef", "hetero_dc"),  # stragglers: the instants differ
        ("dfs", "slow_100m"),  # masks published with the answers, momentum correction
        ("dense_asp", "hetero_dc"),  # pushes applied one by one
        ("ssp_2", "hetero_dc"),  # a staleness gate
        ("dc2_topk", "dc_cross_high"),  # the controller's ratio, read at the compute start
        ("ratatouille_async__t0p6", "dc_10g"),  # delta pulls, no barrier
    ],
)
def test_collected_gradients_give_the_unbatched_records(
    smoke, small, prepared, monkeypatch, method, scenario
):
    ds = load_prepared(prepared["digits"])
    spec = _spec(smoke, small, method, scenario)
    plain, none = _run(spec, ds, monkeypatch, "off")
    looped, grads = _run(spec, ds, monkeypatch, "loop")
    assert none is None and grads.hits + len(grads.sizes) == len(looped)  # every gradient
    assert looped == plain
    if method in ("dense_bsp", "dfs"):  # a barrier: one call per step, every prediction holds
        assert grads.sizes == [spec.workers] * spec.workload.iterations and grads.misses == 0
    if method == "dense_asp":  # no barrier: replicas differ, predictions are given up
        assert grads.misses > 0 and not grads.predicting()


def test_collected_gradients_on_the_device_give_the_unbatched_records(
    smoke, small, prepared, monkeypatch
):
    ds = load_prepared(prepared["digits"])
    spec = _spec(smoke, small, "topk_ef")
    plain, _ = _run(spec, ds, monkeypatch, "off", device=True)
    looped, grads = _run(spec, ds, monkeypatch, "loop", device=True)
    assert grads.hits > 0 and looped == plain


def test_a_diverging_step_ends_the_run_as_unbatched(smoke, small, prepared, monkeypatch):
    ds = load_prepared(prepared["digits"])
    spec = _spec(smoke, small, "topk_ef", "dc_10g", iterations=30, lr=1e30)
    plain, _ = _run(spec, ds, monkeypatch, "off")
    looped, _ = _run(spec, ds, monkeypatch, "loop")
    assert any(r["loss"] == "nan" or not np.isfinite(r["loss"]) for r in plain)  # diverged
    assert looped == plain


def test_one_batched_pass_gives_the_same_bytes_and_close_losses(
    smoke, small, prepared, monkeypatch
):
    ds = load_prepared(prepared["digits"])
    spec = _spec(smoke, small, "dense_bsp")
    plain, _ = _run(spec, ds, monkeypatch, "off")
    batched, grads = _run(spec, ds, monkeypatch, "on")
    assert grads.sizes == [spec.workers] * spec.workload.iterations
    for a, b in zip(plain, batched, strict=True):
        assert (a["bytes_up"], a["bytes_down"], a["time_s"]) == (
            b["bytes_up"],
            b["bytes_down"],
            b["time_s"],
        )
        assert abs(a["loss"] - b["loss"]) <= 1e-5 * max(1.0, abs(a["loss"]))


def test_the_mode_comes_from_the_environment_and_a_bad_one_is_one_line():
    assert batch_mode(False, {}) == (False, False)
    assert batch_mode(True, {}) == (True, True)
    assert batch_mode(True, {"PSML_SIM_BATCH": "off"}) == (False, False)
    assert batch_mode(False, {"PSML_SIM_BATCH": "loop"}) == (True, False)
    assert batch_mode(False, {"PSML_SIM_BATCH": "on"}) == (True, True)
    with pytest.raises(ConfigError, match=r"PSML_SIM_BATCH='fast'.*auto, off, loop, on"):
        batch_mode(False, {"PSML_SIM_BATCH": "fast"})
