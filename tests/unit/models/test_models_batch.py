"""Batched replicas: ``loss_grad_batch`` against one ``loss_grad`` per replica (differential).

The batched path (``torch.func.vmap`` over the replicas for PyTorch models) must give each
replica the loss and gradient that the per-replica path gives, within float32 rounding:
gradients within 1e-5 of the largest entry, losses within 1e-5. The ResNet is not batched with
vmap (its gradients were off, see ``TorchNet.vmap_batches``): it must take the loop, exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from psml_core.config import WorkloadSpec
from psml_core.models import ResNet18, make_model
from psml_core.models.base import Model

RTOL = 1e-5


def workload(model: str, **kw) -> WorkloadSpec:
    return WorkloadSpec(
        name="w", dataset="d", model=model, batch_size=8, lr=0.1, iterations=1, **kw
    )


def replicas(model: Model, p: int, rows: int, d: int, classes: int, sparse: bool = False):
    rng = np.random.default_rng(7)
    params = np.stack([model.init_params(s) for s in range(p)])
    params += rng.normal(0, 0.01, params.shape).astype(np.float32)  # replicas differ
    make = (
        (lambda: sp.random(rows, d, density=0.2, format="csr", random_state=rng, dtype=np.float32))
        if sparse
        else (lambda: rng.standard_normal((rows, d)).astype(np.float32))
    )
    return params, [make() for _ in range(p)], [rng.integers(0, classes, rows) for _ in range(p)]


def loop(model: Model, params, Xs, ys):
    return Model.loss_grad_batch(model, params, Xs, ys)


def close(batched, looped):
    (lb, gb), (ll, gl) = batched, looped
    assert gb.shape == gl.shape and gb.dtype == np.float32
    assert np.abs(gb - gl).max() <= RTOL * max(np.abs(gl).max(), 1e-12)
    assert np.abs(lb - ll).max() <= RTOL * max(np.abs(ll).max(), 1.0)


@pytest.mark.parametrize("l2", [0.0, 1e-3])
def test_mlp_batched_equals_one_call_per_replica(l2: float) -> None:
    torch.set_num_threads(1)
    model = make_model(workload("mlp", hidden=(32, 16), l2=l2), 20, 5)
    params, Xs, ys = replicas(model, 16, 8, 20, 5)
    close(model.loss_grad_batch(params, Xs, ys), loop(model, params, Xs, ys))


def test_a_sparse_batch_and_a_logreg_take_the_per_replica_path() -> None:
    mlp = make_model(workload("mlp", hidden=(8,)), 30, 3)
    params, Xs, ys = replicas(mlp, 4, 6, 30, 3, sparse=True)
    close(mlp.loss_grad_batch(params, Xs, ys), loop(mlp, params, Xs, ys))
    lr = make_model(workload("logreg"), 30, 3)
    params, Xs, ys = replicas(lr, 4, 6, 30, 3, sparse=True)
    close(lr.loss_grad_batch(params, Xs, ys), loop(lr, params, Xs, ys))


def test_unequal_batches_fall_back_to_the_loop() -> None:
    model = make_model(workload("mlp", hidden=(8,)), 10, 3)
    params, Xs, ys = replicas(model, 3, 6, 10, 3)
    Xs[1], ys[1] = Xs[1][:4], ys[1][:4]
    close(model.loss_grad_batch(params, Xs, ys), loop(model, params, Xs, ys))


def test_resnet_takes_the_per_replica_path() -> None:
    torch.set_num_threads(1)
    model = ResNet18(3 * 8 * 8, 10, workload("resnet18"), width=8, groups=4)
    params, Xs, ys = replicas(model, 3, 4, 3 * 8 * 8, 10)
    (lb, gb), (ll, gl) = model.loss_grad_batch(params, Xs, ys), loop(model, params, Xs, ys)
    assert not model.vmap_batches
    assert np.array_equal(lb, ll) and np.array_equal(gb, gl)
