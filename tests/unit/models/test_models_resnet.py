from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from psml_core.config import WorkloadSpec
from psml_core.errors import ConfigError
from psml_core.models import MODELS, ResNet18, make_model
from psml_core.recipes import load_experiment


def workload(**kw) -> WorkloadSpec:
    return WorkloadSpec(
        name="w", dataset="d", model="resnet18", batch_size=8, lr=0.1, iterations=1, **kw
    )


def small(side: int = 8, width: int = 8, groups: int = 4, **kw) -> ResNet18:
    """The same architecture, thin and on small images, so gradient checks are cheap."""
    return ResNet18(3 * side * side, 10, workload(**kw), width=width, groups=groups)


@pytest.fixture(scope="module")
def full() -> ResNet18:
    torch.set_num_threads(1)
    return make_model(workload(), 3 * 32 * 32, 10)


def expected_params(width: int = 64, classes: int = 10) -> int:
    """ResNet-18 (CIFAR variant) counted by hand: bias-free convs, GroupNorm scale + shift."""

    def conv(c_in: int, c_out: int, k: int) -> int:
        return c_in * c_out * k * k

    def norm(c: int) -> int:
        return 2 * c

    total = conv(3, width, 3) + norm(width)
    c_in = width
    for stage in range(4):
        c = width * 2**stage
        for block in range(2):
            total += conv(c_in, c, 3) + norm(c) + conv(c, c, 3) + norm(c)
            if block == 0 and stage > 0:  # stride 2 and more channels: projection shortcut
                total += conv(c_in, c, 1) + norm(c)
            c_in = c
    return total + c_in * classes + classes


def test_registered_and_parameter_count(full: ResNet18) -> None:
    assert MODELS.get("resnet18") is ResNet18
    assert full.n_params == expected_params() == 11_173_962
    params = full.init_params(0)
    assert params.dtype == np.float32 and params.shape == (full.n_params,)
    # The whole state is the flat parameter vector: GroupNorm, no BatchNorm buffers.
    assert list(full.net.buffers()) == []
    assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in full.net.modules())
    assert sum(isinstance(m, nn.GroupNorm) for m in full.net.modules()) == 1 + 8 * 2 + 3
    assert all(m.num_groups == 32 for m in full.net.modules() if isinstance(m, nn.GroupNorm))


def test_full_size_gradient_shape(full: ResNet18) -> None:
    rng = np.random.default_rng(0)
    X = rng.random((2, 3072), dtype=np.float32)
    loss, g = full.loss_grad(full.init_params(0), X, np.array([3, 7]))
    assert np.isfinite(loss) and g.dtype == np.float32 and g.shape == (full.n_params,)
    assert np.all(np.isfinite(g)) and np.count_nonzero(g) > 0.9 * g.size


def test_init_is_deterministic_in_the_seed() -> None:
    a, b = small().init_params(3), small().init_params(3)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, small().init_params(4))
    m = small()
    p = m.init_params(0)
    # GroupNorm scales start at 1 and shifts at 0; convolutions are He-normal (fan-out).
    gn = m.net.stem_norm
    assert torch.all(gn.weight == 1) and torch.all(gn.bias == 0)
    fan_out = m.net.stem.out_channels * 9
    assert m.net.stem.weight.std().item() == pytest.approx((2 / fan_out) ** 0.5, rel=0.3)
    assert np.array_equal(p, m.init_params(0))


def test_gradient_matches_float64_finite_differences() -> None:
    torch.set_num_threads(1)
    rng = np.random.default_rng(1)
    m = small(l2=1e-3)
    X = rng.random((6, m.n_features), dtype=np.float32)
    y = rng.integers(0, 10, 6)
    params = m.init_params(0)
    loss, g = m.loss_grad(params, X, y)
    _, g2 = m.loss_grad(params, X, y)
    np.testing.assert_array_equal(g, g2)  # bit-reproducible with one thread

    ref = copy.deepcopy(m.net).double()
    images = torch.from_numpy(X).double().reshape(-1, 3, 8, 8)
    target = torch.from_numpy(y)

    def f(theta: np.ndarray) -> float:
        with torch.no_grad():
            t = torch.from_numpy(theta)
            nn.utils.vector_to_parameters(t, ref.parameters())
            ce = nn.functional.cross_entropy(ref(images), target)
            return float(ce + 0.5 * 1e-3 * (t * t).sum())

    theta = params.astype(np.float64)
    assert loss == pytest.approx(f(theta), rel=1e-5)
    # A few random coordinates plus the largest gradient of the stem, a norm and the classifier.
    idx = [*rng.choice(m.n_params, 8, replace=False).tolist(), int(np.argmax(np.abs(g)))]
    sizes = np.cumsum([0, *(p.numel() for p in m.net.parameters())])
    for k in (0, 1, len(sizes) - 3):  # stem conv, stem norm scale, fc weight
        idx.append(int(sizes[k] + np.argmax(np.abs(g[sizes[k] : sizes[k + 1]]))))
    eps = 1e-6
    for i in idx:
        hi, lo = theta.copy(), theta.copy()
        hi[i] += eps
        lo[i] -= eps
        fd = (f(hi) - f(lo)) / (2 * eps)
        assert g[i] == pytest.approx(fd, rel=2e-3, abs=2e-5), i


def test_loss_decreases_under_sgd() -> None:
    torch.set_num_threads(1)
    rng = np.random.default_rng(2)
    m = small(side=32, width=16, groups=8)
    X = rng.random((8, 3072), dtype=np.float32)
    y = rng.integers(0, 10, 8)
    params = m.init_params(0)
    first, _ = m.evaluate(params, X, y)
    losses = []
    for _ in range(6):
        loss, g = m.loss_grad(params, X, y)
        losses.append(loss)
        params = params - np.float32(0.02) * g
    last, _ = m.evaluate(params, X, y)
    assert losses[0] == pytest.approx(first, rel=1e-5)
    assert all(b < a for a, b in zip(losses, [*losses[1:], last], strict=True))
    assert last < 0.8 * first


def test_evaluate_in_batches_matches_one_pass() -> None:
    rng = np.random.default_rng(3)
    m = small()
    X = rng.random((11, m.n_features), dtype=np.float32)
    y = rng.integers(0, 10, 11)
    params = m.init_params(1)
    m.eval_batch = 4
    loss_b, acc_b = m.evaluate(params, X, y)
    m.eval_batch = 100
    loss_1, acc_1 = m.evaluate(params, X, y)
    assert loss_b == pytest.approx(loss_1, rel=1e-5) and acc_b == acc_1
    assert loss_1 == pytest.approx(m.loss_grad(params, X, y)[0], rel=1e-5)


def test_flops_count_every_conv_and_scale_with_batch(full: ResNet18) -> None:
    for m in (full, small()):
        macs: list[int] = []

        def hook(mod: nn.Module, inp: tuple, out: torch.Tensor, macs: list[int] = macs) -> None:
            macs.append(out[0].numel() * mod.weight[0].numel())  # per output: one row of w

        handles = [
            mod.register_forward_hook(hook)
            for mod in m.net.modules()
            if isinstance(mod, nn.Conv2d | nn.Linear)
        ]
        X = np.zeros((1, m.n_features), dtype=np.float32)
        with torch.no_grad():
            m.net(m._inputs(X))
        for h in handles:
            h.remove()
        assert m.macs_per_sample == sum(macs)
        assert m.flops(X) == 6.0 * sum(macs) > 0
        X5 = np.zeros((5, m.n_features), dtype=np.float32)
        assert m.flops(X5) == pytest.approx(5 * m.flops(X))
    # The widely quoted ~0.56 GMAC per 32x32 image of the CIFAR ResNet-18.
    assert full.macs_per_sample == pytest.approx(0.556e9, rel=0.01)


def test_dense_model_has_no_incidence() -> None:
    assert small().incidence(np.zeros((2, 192), dtype=np.float32)) is None


def test_input_must_be_square_rgb_images() -> None:
    with pytest.raises(ConfigError, match=r"resnet18 takes square RGB images.*has 64 features"):
        make_model(workload(), 64, 10)
    with pytest.raises(ConfigError, match="side >= 8"):
        make_model(workload(), 3 * 4 * 4, 10)
    with pytest.raises(ValueError, match="must divide"):
        small(width=8, groups=3)


def test_config_accepts_resnet18_only_on_image_data(repo) -> None:
    exp = load_experiment({"tier": "paper"}, repo / "config")
    assert exp.workloads["resnet18_cifar10"].model == "resnet18"
    assert exp.datasets["cifar10"].source == "cifar10" and exp.datasets["cifar10"].path is None
    bad = {"tier": "smoke", "workloads": {"digits_mlp": {"model": "resnet18"}}}
    with pytest.raises(ConfigError, match=r"'workloads\.digits_mlp\.model': 'resnet18' takes"):
        load_experiment(bad, repo / "config")
