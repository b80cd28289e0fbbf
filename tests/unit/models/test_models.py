from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from psml_core.config import WorkloadSpec
from psml_core.errors import ConfigError
from psml_core.models import make_model


def workload(model: str, **kw) -> WorkloadSpec:
    return WorkloadSpec(
        name="w", dataset="d", model=model, batch_size=8, lr=0.1, iterations=1, **kw
    )


def numeric_grad(model, params, X, y, idx, eps=1e-3):
    out = []
    for i in idx:
        p1, p2 = params.astype(np.float64).copy(), params.astype(np.float64).copy()
        p1[i] += eps
        p2[i] -= eps
        out.append(
            (
                model.loss_grad(p1.astype(np.float32), X, y)[0]
                - model.loss_grad(p2.astype(np.float32), X, y)[0]
            )
            / (2 * eps)
        )
    return np.array(out)


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("sparse", [False, True])
def test_logreg_gradient_matches_finite_differences(classes, sparse):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 6)).astype(np.float32)
    X[X < 0.3] = 0
    Xm = sp.csr_matrix(X) if sparse else X
    y = rng.integers(0, classes, 20)
    m = make_model(workload("logreg", l2=0.01), 6, classes)
    params = rng.standard_normal(m.n_params).astype(np.float32) * 0.3
    _, g = m.loss_grad(params, Xm, y)
    idx = range(m.n_params)
    np.testing.assert_allclose(g, numeric_grad(m, params, Xm, y, idx), rtol=2e-2, atol=2e-3)


def test_logreg_binary_matches_torch_reference():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((16, 5)).astype(np.float32)
    y = rng.integers(0, 2, 16)
    m = make_model(workload("logreg"), 5, 2)
    params = rng.standard_normal(6).astype(np.float32)
    loss, g = m.loss_grad(params, X, y)
    w = torch.tensor(params, dtype=torch.float64, requires_grad=True)
    z = torch.from_numpy(X).double() @ w[:5] + w[5]
    ref = torch.nn.functional.binary_cross_entropy_with_logits(z, torch.from_numpy(y).double())
    ref.backward()
    assert loss == pytest.approx(ref.item(), rel=1e-6)
    np.testing.assert_allclose(g, w.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_logreg_incidence_is_the_gradient_support():
    rng = np.random.default_rng(2)
    X = sp.random(10, 8, density=0.3, random_state=3, format="csr", dtype=np.float32)
    y = rng.integers(0, 3, 10)
    m = make_model(workload("logreg"), 8, 3)
    inc = m.incidence(X)
    params = rng.standard_normal(m.n_params).astype(np.float32)
    for i in range(10):
        _, g = m.loss_grad(params, X[i], y[i : i + 1])
        assert set(np.flatnonzero(g)) <= set(inc[i].indices)


def test_mlp_gradient_matches_finite_differences_and_is_deterministic():
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    X = rng.random((12, 7)).astype(np.float32)
    y = rng.integers(0, 3, 12)
    m = make_model(workload("mlp", hidden=(5,)), 7, 3)
    params = m.init_params(0)
    assert params.dtype == np.float32 and params.size == m.n_params == 7 * 5 + 5 + 5 * 3 + 3
    np.testing.assert_array_equal(
        params, make_model(workload("mlp", hidden=(5,)), 7, 3).init_params(0)
    )
    _, g = m.loss_grad(params, X, y)
    idx = list(range(0, m.n_params, 7))
    np.testing.assert_allclose(g[idx], numeric_grad(m, params, X, y, idx), rtol=5e-2, atol=2e-3)
    _, g2 = m.loss_grad(params, X, y)
    np.testing.assert_array_equal(g, g2)


def test_evaluate_accuracy():
    m = make_model(workload("logreg"), 2, 2)
    X = np.array([[1.0, 0.0], [-1.0, 0.0]], dtype=np.float32)
    params = np.array([5.0, 0.0, 0.0], dtype=np.float32)
    _, acc = m.evaluate(params, X, np.array([1, 0]))
    assert acc == 1.0


def test_unknown_model_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown model 'lstm'.*known models: cnn, logreg, mlp"):
        make_model(workload("lstm"), 2, 2)
