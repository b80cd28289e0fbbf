"""A sim run whose vectors stay on its device measures exactly what the host path measures.

``keep_on_device`` moves the replicas, the shards' values and the optimizer state to the run's
device, and from then on the codecs' torch paths encode, decode and aggregate there. Forced on
the CPU (a device tensor is a CPU tensor here), the run must give the host run's records bit for
bit: every byte count, every simulated time, every loss and accuracy. That checks the whole
device protocol in CI; ``test_engine_device.py`` runs it on a GPU, where only the model's
rounding differs.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from psml_core.data.store import load_prepared
from psml_core.engine import SimBackend, staged_job
from psml_core.engine.device_state import keep_on_device, refusal
from psml_core.recipes import load_experiment

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def small(repo):
    return load_experiment({"tier": "small"}, repo / "config")


def _spec(smoke, small, method: str, iterations: int = 6):
    run = smoke.run("digits_mlp", "dense_bsp", "dc_10g", smoke.seeds[0])
    recipe = smoke.recipes.get(method) or small.recipes[method]
    wl = dataclasses.replace(run.workload, iterations=iterations, eval_every=3)
    return dataclasses.replace(run, workload=wl, method=recipe)


def _rows(records) -> list[dict]:
    out = []
    for r in records:
        row = dataclasses.asdict(r)
        for k, v in row.items():
            if isinstance(v, float) and math.isnan(v):
                row[k] = "nan"
        out.append(row)
    return out


@pytest.mark.parametrize(
    "method",
    [
        "dense_bsp",  # params pull, dense codec down
        "topk_ef",  # aggregate pull, union broadcast
        "dfs",  # momentum correction, dynamic block size, cost reports
        "omnireduce",
        "ratatouille",  # value-bounded filter both ways
        "ratatouille_async__t0p6",  # delta pulls, no barrier
        "dense_asp",  # pushes applied one by one
        "snappy_bsp",  # Snappy sizes of the payloads
        "dc2_topk",  # the controller's ratio
        "dc2_randomk",  # random-k's indices
        "dc2_dgc",  # DGC's sampled threshold
    ],
)
def test_a_run_kept_on_the_device_equals_the_host_run(smoke, small, prepared, method, monkeypatch):
    ds = load_prepared(prepared["digits"])
    spec = _spec(smoke, small, method)
    host = SimBackend().run(staged_job(spec, ds))
    job = staged_job(spec, ds)
    assert keep_on_device(job, CPU, force=True) is None
    assert isinstance(job.workers[0].params, torch.Tensor)
    assert isinstance(job.shards[0].values, torch.Tensor)

    # A CPU tensor passes silently where NumPy takes it (np.isfinite(t), np.asarray(t)); a GPU
    # tensor does not. Refuse the implicit conversion, as CUDA would: only .cpu().numpy() copies.
    def no_implicit_copy(self, *args, **kwargs):
        raise TypeError("implicit NumPy conversion of a tensor (a CUDA tensor would fail here)")

    monkeypatch.setattr(torch.Tensor, "__array__", no_implicit_copy)
    dev = SimBackend().run(job)
    monkeypatch.undo()
    assert _rows(dev) == _rows(host)


@pytest.mark.parametrize(
    ("method", "why"),
    [("pcp", "round policy"), ("jpdc_dynamic", "moves keys"), ("jpdc", "per-key pulls")],
)
def test_recipes_the_device_path_cannot_run_keep_the_host_path(smoke, small, prepared, method, why):
    workload = "rcv1_logreg" if method == "jpdc" else "digits_mlp"
    data = "zipf_rcv1" if method == "jpdc" else "digits"
    run = smoke.run(workload, "dense_bsp", "dc_10g", smoke.seeds[0])
    run = dataclasses.replace(run, method=smoke.recipes.get(method) or small.recipes[method])
    job = staged_job(run, load_prepared(prepared[data]))
    assert why in (refusal(job) or "")
    assert why in (keep_on_device(job, CPU, force=True) or "")
    assert isinstance(job.shards[0].values, type(job.shards[0].keys))  # still NumPy


def test_the_cpu_needs_no_move(smoke, small, prepared):
    job = staged_job(_spec(smoke, small, "topk_ef"), load_prepared(prepared["digits"]))
    assert keep_on_device(job, CPU) is None
    assert not isinstance(job.workers[0].params, torch.Tensor)
