"""sparse_mlp: an embedding row per feature (feature-major keys), then ReLU layers."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from psml_core.config import WorkloadSpec
from psml_core.errors import ConfigError
from psml_core.models import MODELS, SparseMLP, make_model


def workload(hidden=(4, 5), **kw) -> WorkloadSpec:
    return WorkloadSpec(
        name="w", dataset="d", model="sparse_mlp", batch_size=8, lr=0.1, iterations=1,
        hidden=hidden, **kw,
    )  # fmt: skip


def batch(n=7, d=30, density=0.15, seed=0):
    X = sp.random(n, d, density=density, format="csr", random_state=seed, dtype=np.float32)
    return X, np.random.default_rng(seed).integers(0, 3, n)


def test_registered_with_the_rcv1_sized_parameter_count() -> None:
    assert MODELS.get("sparse_mlp") is SparseMLP
    m = make_model(workload((24, 32)), 47_236, 2)
    assert m.n_params == 47_236 * 24 + 24 + (24 * 32 + 32) + (32 * 2 + 2) == 1_134_554
    assert m.tensor_sizes() == (1_133_664, 24, 768, 32, 64, 2)  # emb.weight first (registered)


def test_feature_j_owns_the_contiguous_keys_j_h_to_j_h_plus_h() -> None:
    m = make_model(workload((4, 5)), 30, 3)
    X, y = batch()
    _, g = m.loss_grad(m.init_params(0), X, y)
    emb = g[: 30 * 4].reshape(30, 4)  # the flat vector starts with the feature-major table
    used = np.unique(X.indices)
    assert np.all(emb[np.setdiff1d(np.arange(30), used)] == 0)
    assert np.count_nonzero(emb[used]) > 0


def test_touched_keys_is_the_union_of_the_incidence_and_holds_the_gradient() -> None:
    m = make_model(workload((4, 5)), 30, 3)
    X, y = batch()
    inc = m.incidence(X)
    np.testing.assert_array_equal(m.touched_keys(X), np.unique(inc.indices))
    params = m.init_params(1)
    for i in range(X.shape[0]):
        _, g = m.loss_grad(params, X[i], y[i : i + 1])
        assert set(np.flatnonzero(g)) <= set(inc[i].indices)
    assert m.touched_keys(X)[-1] == m.n_params - 1  # the dense tail: every sample touches it


def test_gradient_matches_finite_differences_and_is_deterministic() -> None:
    torch.set_num_threads(1)
    m = make_model(workload((3, 4)), 12, 2)
    X, y = batch(n=6, d=12, density=0.4, seed=2)
    y = y % 2
    params = m.init_params(0)
    _, g = m.loss_grad(params, X, y)
    idx = [i for i in range(m.n_params) if g[i] != 0][::3]
    num = []
    for i in idx:
        p1, p2 = params.astype(np.float64).copy(), params.astype(np.float64).copy()
        p1[i] += 1e-3
        p2[i] -= 1e-3
        f1 = m.loss_grad(p1.astype(np.float32), X, y)[0]
        f2 = m.loss_grad(p2.astype(np.float32), X, y)[0]
        num.append((f1 - f2) / 2e-3)
    np.testing.assert_allclose(g[idx], num, rtol=5e-2, atol=2e-3)
    np.testing.assert_array_equal(g, m.loss_grad(params, X, y)[1])


def test_flops_count_the_embedding_by_non_zeros() -> None:
    m = make_model(workload((4, 5)), 30, 3)
    X, _ = batch()
    assert m.flops(X) == 6.0 * (X.nnz * 4 + X.shape[0] * (4 * 5 + 5 * 3))


def test_evaluate_in_batches_equals_one_pass() -> None:
    m = make_model(workload((4, 5)), 30, 3)
    X, y = batch(n=50)
    p = m.init_params(0)
    m.eval_batch = 7
    loss, acc = m.evaluate(p, X, y)
    m.eval_batch = None
    loss1, acc1 = m.evaluate(p, X, y)
    assert acc == acc1 and loss == pytest.approx(loss1, rel=1e-5)


def test_needs_a_width() -> None:
    with pytest.raises(ConfigError, match="sparse_mlp needs"):
        make_model(workload(()), 30, 2)
