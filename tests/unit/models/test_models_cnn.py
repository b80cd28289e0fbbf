"""The small CNN (1M parameters on 28x28) and PF's exact MLP: sizes, FLOPs, gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from psml_core.config import WorkloadSpec
from psml_core.errors import ConfigError
from psml_core.models import MODELS, SmallCNN, make_model


def workload(model: str = "cnn", hidden=(16, 32, 640), **kw) -> WorkloadSpec:
    return WorkloadSpec(
        name="w", dataset="d", model=model, batch_size=8, lr=0.1, iterations=1, hidden=hidden, **kw
    )


def test_pf_mlp_is_the_existing_mlp_with_pfs_parameter_count() -> None:
    # MXNet's train_mnist MLP: 784-128-64-10, 100,480 + 8,256 + 650 parameters.
    m = make_model(workload("mlp", hidden=(128, 64)), 784, 10)
    assert m.n_params == 784 * 128 + 128 + 128 * 64 + 64 + 64 * 10 + 10 == 109_386
    assert m.tensor_sizes() == (100_352, 128, 8_192, 64, 640, 10)


def test_cnn_is_registered_with_a_million_parameters_counted_by_hand() -> None:
    assert MODELS.get("cnn") is SmallCNN
    m = make_model(workload(), 784, 10)
    # conv 5x5 1->16, conv 3x3 16->32 (stride 2 each: 28 -> 14 -> 7), linear 1568->640->10
    by_hand = (25 * 16 + 16) + (9 * 16 * 32 + 32) + (32 * 49 * 640 + 640) + (640 * 10 + 10)
    assert m.n_params == by_hand == 1_015_626
    assert 4 * m.n_params > 4_000_000  # 4 MB of fp32 gradient
    assert m.tensor_sizes() == (400, 16, 4608, 32, 1_003_520, 640, 6_400, 10)
    assert sum(m.tensor_sizes()) == m.n_params


def test_cnn_flops_are_six_per_multiply_accumulate() -> None:
    m = make_model(workload(), 784, 10)
    macs = 16 * 25 * 14 * 14 + 32 * 16 * 9 * 7 * 7 + 1568 * 640 + 640 * 10
    assert m.macs_per_sample == macs
    assert m.flops(np.zeros((32, 784), np.float32)) == 6.0 * macs * 32


def test_cnn_gradient_matches_finite_differences_and_is_deterministic() -> None:
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    m = make_model(workload(hidden=(3, 4, 5)), 64, 3)  # 8x8 images: 8 -> 4 -> 2
    X = rng.random((6, 64)).astype(np.float32)
    y = rng.integers(0, 3, 6)
    params = m.init_params(0)
    np.testing.assert_array_equal(
        params, make_model(workload(hidden=(3, 4, 5)), 64, 3).init_params(0)
    )
    assert not np.array_equal(params, m.init_params(1))
    loss, g = m.loss_grad(params, X, y)
    idx = list(range(0, m.n_params, 5))
    num = []
    for i in idx:
        p1, p2 = params.astype(np.float64), params.astype(np.float64)
        p1 = p1.copy()
        p2 = p2.copy()
        p1[i] += 1e-3
        p2[i] -= 1e-3
        f1 = m.loss_grad(p1.astype(np.float32), X, y)[0]
        f2 = m.loss_grad(p2.astype(np.float32), X, y)[0]
        num.append((f1 - f2) / 2e-3)
    np.testing.assert_allclose(g[idx], num, rtol=5e-2, atol=2e-3)
    np.testing.assert_array_equal(g, m.loss_grad(params, X, y)[1])
    assert np.isfinite(loss)


def test_cnn_reads_rgb_images_channels_first() -> None:
    m = make_model(workload(hidden=(2, 2, 3)), 3 * 8 * 8, 10)
    assert (m.channels, m.side) == (3, 8)
    _, g = m.loss_grad(m.init_params(0), np.ones((2, 192), np.float32), np.array([1, 2]))
    assert g.shape == (m.n_params,)


@pytest.mark.parametrize(
    ("hidden", "features", "match"),
    [
        ((16, 32), 784, r"hidden: model cnn takes \[c1, c2, f\]"),
        ((16, 0, 8), 784, "hidden"),
        ((16, 32, 640), 700, "square images"),
        ((16, 32, 640), 49, "side >= 8"),
    ],
)
def test_cnn_bad_settings_are_one_line_config_errors(hidden, features, match) -> None:
    with pytest.raises(ConfigError, match=match):
        make_model(workload(hidden=hidden), features, 10)
