"""The ``device`` setting: cpu, cuda or auto; where a run's gradients are computed.

The CPU tests always run. The GPU tests skip, with the reason, where torch sees no GPU (CI
never has one): on a GPU machine, ``pytest tests/unit/engine/test_engine_device.py`` runs them.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from psml_core.config import RunSpec
from psml_core.data.store import load_prepared
from psml_core.engine import SimBackend, staged_job, train
from psml_core.engine.torch_device import device_provenance, rank_device, resolve_device
from psml_core.errors import ConfigError
from psml_core.recipes import load_experiment

GPU = torch.cuda.is_available()
needs_gpu = pytest.mark.skipif(not GPU, reason="no GPU: torch.cuda.is_available() is False")


def spec_for(smoke, **changes):
    run = smoke.run("digits_mlp", "dense_bsp", "dc_10g", smoke.seeds[0])
    wl = dataclasses.replace(run.workload, iterations=8)
    return dataclasses.replace(run, workload=wl, **changes)


def test_cpu_and_auto_without_a_gpu_resolve_to_the_cpu() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if GPU else "cpu")
    assert device_provenance(torch.device("cpu")) == {"device": "cpu"}
    with pytest.raises(ConfigError, match="not one of"):
        resolve_device("tpu")


@pytest.mark.skipif(GPU, reason="a GPU is present: cuda resolves")
def test_cuda_without_a_gpu_is_one_clear_error(monkeypatch) -> None:
    monkeypatch.setattr(torch.version, "cuda", "12.8")  # a CUDA build on a host without a GPU
    with pytest.raises(ConfigError, match="finds no GPU here.*device=cpu"):
        resolve_device("cuda")


@pytest.mark.skipif(GPU, reason="a GPU is present: cuda resolves")
def test_the_cpu_build_names_the_cuda_install(monkeypatch, tmp_path, capsys) -> None:
    """A CPU login node installs the CPU wheel; a GPU job then says how to get the CUDA one."""
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(ConfigError, match=r"CPU build.*PSML_TORCH=cuda bash scripts/install.sh"):
        resolve_device("cuda")
    fake = tmp_path / "nvidia-smi"  # a GPU node: auto warns that it stays on the CPU
    fake.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: GPU-0)'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert resolve_device("auto") == torch.device("cpu")
    assert "PSML_TORCH=cuda" in capsys.readouterr().err


def test_a_cpu_run_keeps_its_config_hash_and_cuda_changes_it(smoke) -> None:
    spec = spec_for(smoke)
    assert spec.torch_device == "cpu" and "torch_device" not in json.loads(spec.to_json())
    cuda = dataclasses.replace(spec, torch_device="cuda")
    assert json.loads(cuda.to_json())["torch_device"] == "cuda"
    assert cuda.config_hash() != spec.config_hash()
    assert RunSpec.from_json(cuda.to_json()) == cuda
    assert RunSpec.from_json(spec.to_json()) == spec


def test_the_tier_and_the_command_line_set_the_device(smoke) -> None:
    from pathlib import Path

    config = Path(__file__).resolve().parents[3] / "config"
    exp = load_experiment({"tier": "smoke", "torch_device": "auto"}, config)
    assert (
        exp.torch_device == "auto"
        and exp.run("digits_mlp", "dense_bsp", "dc_10g", 0).torch_device == "auto"
    )
    with pytest.raises(ConfigError, match="torch_device"):
        load_experiment({"tier": "smoke", "torch_device": "gpu"}, config)


def test_the_summary_records_the_device(smoke, prepared, tmp_path) -> None:
    summary = train(spec_for(smoke), prepared["digits"], tmp_path / "r")
    assert summary["provenance"]["compute_model"]["torch_device"] == {"device": "cpu"}


@needs_gpu
def test_a_sim_run_on_the_gpu_moves_the_same_bytes_and_learns_alike(smoke, prepared) -> None:
    ds = load_prepared(prepared["digits"])
    cpu = SimBackend().run(staged_job(spec_for(smoke), ds))
    job = staged_job(spec_for(smoke, device="cuda"), ds)
    job.model.to(resolve_device("cuda"))
    gpu = SimBackend().run(job)
    assert [r.bytes_up for r in gpu] == [r.bytes_up for r in cpu]
    losses = np.array([r.loss for r in cpu]), np.array([r.loss for r in gpu])
    assert np.allclose(*losses, rtol=1e-3, atol=1e-4)


def test_each_rank_takes_its_own_gpu_round_robin(monkeypatch) -> None:
    """One GPU per rank where there are enough, shared round-robin where there are fewer."""
    assert rank_device("cpu", 5) == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert [rank_device("cuda", r).index for r in range(6)] == [0, 1, 2, 3, 0, 1]
    assert rank_device("auto", 3) == torch.device("cuda", 3)


@needs_gpu
def test_a_dist_run_on_the_gpu_moves_the_same_bytes_as_on_the_cpu(smoke, prepared) -> None:
    """dist with device: cuda: every rank's model on a GPU, the wire bytes unchanged."""
    from psml_core.engine.torchdist.backend import DistBackend

    ds = load_prepared(prepared["digits"])
    base = dataclasses.replace(spec_for(smoke), backend="dist", workers=2, shards=2)
    cpu = DistBackend().run(staged_job(base, ds))
    gpu = DistBackend().run(staged_job(dataclasses.replace(base, torch_device="cuda"), ds))
    key = sorted((r.iteration, r.worker, r.bytes_up, r.bytes_down) for r in cpu)
    assert sorted((r.iteration, r.worker, r.bytes_up, r.bytes_down) for r in gpu) == key
    losses = [np.array([r.loss for r in sorted(rs, key=lambda r: (r.iteration, r.worker))])
              for rs in (cpu, gpu)]  # fmt: skip
    assert np.allclose(*losses, rtol=1e-3, atol=1e-4)


def _big_dist(smoke, workers: int, **changes):
    """Digits MLP with 1,024 hidden units on dist: dense pushes and answers beyond the slot."""
    spec = spec_for(smoke, backend="dist", workers=workers, shards=1, device="cuda", **changes)
    wl = dataclasses.replace(spec.workload, iterations=6, hidden=(1024,), eval_every=3)
    return dataclasses.replace(spec, workload=wl)


GPUS = torch.cuda.device_count() if GPU else 0


@pytest.mark.skipif(
    GPUS < 2,
    reason=f"{GPUS} GPU(s): NCCL needs a GPU per rank (it refuses two ranks on one GPU), so a "
    "dist run over NCCL needs at least two",
)
def test_a_dist_run_over_nccl_moves_the_bytes_of_gloo(smoke, prepared) -> None:
    """Bodies over NCCL between GPUs of their own: the same records' bytes as tagged gloo."""
    from psml_core.engine.torchdist import DistOptions
    from psml_core.engine.torchdist.backend import DistBackend

    ds = load_prepared(prepared["digits"])
    spec = _big_dist(smoke, workers=min(GPUS, 4) - 1)
    runs = {}
    for bodies in ("gloo", "nccl"):
        backend = DistBackend(DistOptions(bodies=bodies))
        recs = backend.run(staged_job(spec, ds))
        assert backend.result is not None and backend.result.bodies == bodies
        runs[bodies] = (recs, backend.result.wire)
    (gloo, gloo_wire), (nccl, nccl_wire) = runs["gloo"], runs["nccl"]
    key = [(r.iteration, r.worker, r.bytes_up, r.bytes_down) for r in gloo]
    assert [(r.iteration, r.worker, r.bytes_up, r.bytes_down) for r in nccl] == key
    assert sum(w.paired[0] for w in nccl_wire.values()) >= 2 * spec.workload.iterations
    assert {r: w.sent for r, w in nccl_wire.items()} == {r: w.sent for r, w in gloo_wire.items()}
    losses = [np.array([r.loss for r in rs]) for rs in (gloo, nccl)]
    assert np.allclose(*losses, rtol=1e-3, atol=1e-4)


@needs_gpu
def test_ranks_sharing_a_gpu_keep_gloo_for_their_bodies(smoke, prepared) -> None:
    """auto on more ranks than GPUs: NCCL would refuse, so gloo moves the bodies."""
    from psml_core.engine.torchdist import DistOptions
    from psml_core.engine.torchdist.backend import DistBackend

    spec = _big_dist(smoke, workers=GPUS)  # GPUS + 1 ranks
    backend = DistBackend(DistOptions(bodies="auto"))
    recs = backend.run(staged_job(spec, load_prepared(prepared["digits"])))
    assert len(recs) == spec.workers * spec.workload.iterations
    assert backend.transport() == {"body_messages": "gloo"}


@needs_gpu
@pytest.mark.parametrize("method", ["dense_bsp", "topk_ef", "dfs", "ratatouille"])
def test_a_sim_run_kept_on_the_gpu_moves_the_same_bytes(smoke, prepared, method) -> None:
    """Gradients, codecs and aggregation on the GPU (keep_on_device, as psml train does).

    The model's GPU kernels round differently from the CPU's, so data-dependent sizes (a
    filter's kept count, DFS's chosen block size, a union of supports) may move a little; the
    fixed-size pushes (dense, top-k) move exactly the same bytes. The protocol itself is
    checked bit for bit on the CPU (test_engine_device_state.py).
    """
    from psml_core.engine.device_state import keep_on_device

    ds = load_prepared(prepared["digits"])
    spec = dataclasses.replace(
        spec_for(smoke), method=smoke.recipes[method], run_id=f"digits_mlp/{method}"
    )
    cpu = SimBackend().run(staged_job(spec, ds))
    job = staged_job(dataclasses.replace(spec, torch_device="cuda"), ds)
    device = resolve_device("cuda")
    job.model.to(device)
    assert keep_on_device(job, device) is None
    assert job.shards[0].values.is_cuda and job.workers[0].params.is_cuda
    gpu = SimBackend().run(job)
    if method in ("dense_bsp", "topk_ef"):
        assert [r.bytes_up for r in gpu] == [r.bytes_up for r in cpu]
    total = sum(r.bytes_up + r.bytes_down for r in cpu)
    assert abs(sum(r.bytes_up + r.bytes_down for r in gpu) - total) <= 0.02 * total
    losses = np.array([r.loss for r in cpu]), np.array([r.loss for r in gpu])
    assert np.allclose(*losses, rtol=1e-3, atol=1e-4)
