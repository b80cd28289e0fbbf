"""Replicas' gradients: ``Model.loss_grads`` batched and looped against a float64 reference.

The batched path (``torch.func.vmap`` over the replicas, ``TorchNet.loss_grads``) must give each
replica the loss and gradient of a float64 per-replica computation within float32 rounding, for
every torch model. The tolerance comes from the conditioning: a float32 gradient jumps where a
ReLU input lies within rounding of zero (``TorchNet``'s docstring), so each case first checks in
float64 that no ReLU input is that close (its data are chosen so), then holds the batched error
to a small multiple of the per-replica float32 path's own error plus a floor of float32
rounding. ``batched=False`` is the per-replica calls, bit for bit; where the batched pass
cannot run, ``batched=True`` takes that loop. Where torch sees a GPU, the comparison also runs on
cuda, with deterministic algorithms as a run sets them (skipped elsewhere).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from psml_core.config import WorkloadSpec
from psml_core.models import ResNet18, make_model
from psml_core.models.base import Model
from psml_core.models.torch_net import TorchNet

MARGIN = 1e-5  # smallest |ReLU input| / largest, in float64: far from every kink
FLOOR = 2e-6  # float32 rounding through a few layers, relative to the largest gradient entry
MULTIPLE = 4.0  # the batched error against the per-replica float32 error


def workload(model: str, **kw) -> WorkloadSpec:
    return WorkloadSpec(
        name="w", dataset="d", model=model, batch_size=8, lr=0.1, iterations=1, **kw
    )


def replicas(
    model: Model, p: int, rows: int, classes: int, seed: int, sparse: bool = False
) -> tuple[list[np.ndarray], list, list[np.ndarray]]:
    """P different replicas (perturbed copies of one initialisation), each with its batch."""
    rng = np.random.default_rng(seed)
    d = model.n_features
    params = [
        model.init_params(0) + rng.normal(0, 0.01, model.n_params).astype(np.float32)
        for _ in range(p)
    ]
    if sparse:
        Xs = [sp.random(rows, d, density=0.2, format="csr", random_state=rng, dtype=np.float32)
              for _ in range(p)]  # fmt: skip
    else:
        Xs = [rng.standard_normal((rows, d)).astype(np.float32) for _ in range(p)]
    return params, Xs, [rng.integers(0, classes, rows) for _ in range(p)]


class ReluMargin(TorchFunctionMode):
    """The smallest |input| / largest |input| over every ReLU call (nn.ReLU and torch.relu)."""

    def __init__(self) -> None:
        super().__init__()
        self.margin = np.inf

    def __torch_function__(
        self, func: Callable, types: tuple, args: tuple = (), kwargs: dict | None = None
    ) -> object:
        if func in (torch.relu, nn.functional.relu):
            z = args[0].detach().abs()
            self.margin = min(self.margin, float(z.min() / z.max()))
        return func(*args, **(kwargs or {}))


def float64_reference(
    model: TorchNet, p: np.ndarray, X: np.ndarray, y: np.ndarray
) -> tuple[float, np.ndarray, float]:
    """Loss, gradient and ReLU margin of one replica, computed in float64."""
    net = copy.deepcopy(model.net).to(torch.device("cpu"), torch.float64)
    flat = torch.from_numpy(p.astype(np.float64))
    nn.utils.vector_to_parameters(flat, net.parameters())
    relus = ReluMargin()
    with relus:
        out = net(model._inputs(X).double())
    loss = nn.functional.cross_entropy(out, torch.from_numpy(np.asarray(y, dtype=np.int64)))
    loss = loss + 0.5 * model.l2 * sum((q * q).sum() for q in net.parameters())
    loss.backward()
    grad = torch.cat([q.grad.reshape(-1) for q in net.parameters()]).numpy()
    return float(loss.detach()), grad, relus.margin


@pytest.fixture
def vmap_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the batched passes (each builds the functional loss once)."""
    calls: list[int] = []
    real = TorchNet._functional_loss

    def counted(self: TorchNet) -> Callable:
        calls.append(1)
        return real(self)

    monkeypatch.setattr(TorchNet, "_functional_loss", counted)
    return calls


CASES = {
    # model, replicas, rows, classes, data seed (chosen away from ReLU kinks)
    "mlp": (lambda l2: make_model(workload("mlp", hidden=(32, 16), l2=l2), 20, 5), 4, 8, 5, 1),
    "cnn": (lambda l2: make_model(workload("cnn", hidden=(4, 6, 16), l2=l2), 144, 4), 4, 6, 4, 1),
    "resnet18": (
        lambda l2: ResNet18(3 * 8 * 8, 10, workload("resnet18", l2=l2), width=8, groups=4),
        3,
        4,
        10,
        4,
    ),
}


@pytest.mark.parametrize("l2", [0.0, 1e-3])
@pytest.mark.parametrize("name", list(CASES))
def test_batched_gradients_match_a_float64_reference(
    name: str, l2: float, vmap_calls: list[int]
) -> None:
    torch.set_num_threads(1)
    build, p, rows, classes, seed = CASES[name]
    model = build(l2)
    params, Xs, ys = replicas(model, p, rows, classes, seed)
    looped = model.loss_grads(params, Xs, ys)
    assert not vmap_calls
    batched = model.loss_grads(params, Xs, ys, batched=True)
    assert vmap_calls == [1]
    for i, ((ll, gl), (lb, gb)) in enumerate(zip(looped, batched, strict=True)):
        l64, g64, margin = float64_reference(model, params[i], Xs[i], ys[i])
        assert margin >= MARGIN, f"replica {i}: a ReLU input at {margin:.1e}; pick another seed"
        scale = np.abs(g64).max()
        err_loop = np.abs(gl - g64).max() / scale
        err_batched = np.abs(gb - g64).max() / scale
        assert gb.dtype == np.float32 and gb.shape == (model.n_params,)
        assert err_loop <= 10 * FLOOR, f"replica {i}: the reference is off ({err_loop:.1e})"
        assert err_batched <= MULTIPLE * err_loop + FLOOR, (i, err_batched, err_loop)
        assert abs(lb - l64) <= 1e-6 * max(1.0, abs(l64)) and abs(ll - l64) <= 1e-6 * abs(l64)


@pytest.mark.parametrize("name", list(CASES))
def test_one_shared_parameter_vector_matches_a_float64_reference(
    name: str, vmap_calls: list[int]
) -> None:
    """The sim's batched step: every replica the same object, mapped over the batches only."""
    torch.set_num_threads(1)
    build, p, rows, classes, seed = CASES[name]
    model = build(1e-3)
    params, Xs, ys = replicas(model, p, rows, classes, seed)
    shared = [params[0]] * p
    looped = model.loss_grads(shared, Xs, ys)
    batched = model.loss_grads(shared, Xs, ys, batched=True)
    assert vmap_calls == [1]
    for i, ((_, gl), (lb, gb)) in enumerate(zip(looped, batched, strict=True)):
        l64, g64, margin = float64_reference(model, params[0], Xs[i], ys[i])
        assert margin >= MARGIN, f"replica {i}: a ReLU input at {margin:.1e}; pick another seed"
        scale = np.abs(g64).max()
        err_loop = np.abs(gl - g64).max() / scale
        err_batched = np.abs(gb - g64).max() / scale
        assert err_batched <= MULTIPLE * err_loop + FLOOR, (i, err_batched, err_loop)
        assert abs(lb - l64) <= 1e-6 * max(1.0, abs(l64))
    # the gradients are the replicas' own: distinct batches give distinct gradients
    assert not np.array_equal(batched[0][1], batched[1][1])


@pytest.fixture
def cuda_as_a_run_sets_it() -> Iterator[None]:
    """Deterministic algorithms, as every run sets them (``configure_torch``); TF32 off.

    TF32 moves every path about 1e-3 from float64 (a precision setting, not the batching).
    """
    saved = (
        torch.are_deterministic_algorithms_enabled(),
        torch.backends.cudnn.allow_tf32,
        torch.backends.cuda.matmul.allow_tf32,
    )
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(saved[0])
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved[1:]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("name", list(CASES))
def test_batched_gradients_on_cuda_match_a_float64_reference(
    name: str, vmap_calls: list[int], cuda_as_a_run_sets_it: None
) -> None:
    build, p, rows, classes, seed = CASES[name]
    model = build(1e-3)
    params, Xs, ys = replicas(model, p, rows, classes, seed)
    model.to(torch.device("cuda"))
    tensors = [torch.from_numpy(q).cuda() for q in params]
    looped = model.loss_grads(tensors, Xs, ys)
    batched = model.loss_grads(tensors, Xs, ys, batched=True)
    assert vmap_calls == [1]
    for i, ((_, gl), (lb, gb)) in enumerate(zip(looped, batched, strict=True)):
        assert gb.device.type == "cuda"
        l64, g64, margin = float64_reference(model, params[i], Xs[i], ys[i])
        assert margin >= MARGIN, f"replica {i}: a ReLU input at {margin:.1e}"
        scale = np.abs(g64).max()
        err_loop = np.abs(gl.cpu().numpy() - g64).max() / scale
        err_batched = np.abs(gb.cpu().numpy() - g64).max() / scale
        # cuDNN may choose Winograd or FFT kernels, rounding more, and differently for the
        # batched pass's grouped convolutions than for the plain ones: a wider floor.
        assert err_batched <= MULTIPLE * err_loop + 15 * FLOOR, (i, err_batched, err_loop)
        assert abs(lb - l64) <= 1e-5 * max(1.0, abs(l64))


def test_tensor_parameters_give_fresh_tensors_equal_to_the_array_path(
    vmap_calls: list[int],
) -> None:
    torch.set_num_threads(1)
    model = make_model(workload("cnn", hidden=(4, 6, 16), l2=1e-3), 144, 4)
    params, Xs, ys = replicas(model, 3, 5, 4, 2)
    tensors = [torch.from_numpy(p.copy()) for p in params]
    before = [t.clone() for t in tensors]
    looped = model.loss_grads(tensors, Xs, ys)
    for (loss, grad), t, X, y in zip(looped, tensors, Xs, ys, strict=True):
        one_loss, one_grad = model.loss_grad_tensor(t, X, y)
        assert loss == one_loss and torch.equal(grad, one_grad)
    batched = model.loss_grads(tensors, Xs, ys, batched=True)
    arrays = model.loss_grads(params, Xs, ys, batched=True)
    assert len(vmap_calls) == 2
    inputs = {t.untyped_storage().data_ptr() for t in tensors}
    for (lt, gt), (la, ga) in zip(batched, arrays, strict=True):
        assert isinstance(gt, torch.Tensor) and gt.device == tensors[0].device
        assert gt.untyped_storage().data_ptr() not in inputs
        assert lt == la and np.array_equal(gt.numpy(), ga)
    assert all(torch.equal(t, b) for t, b in zip(tensors, before, strict=True))


def test_unbatched_is_one_loss_grad_per_replica_bit_for_bit() -> None:
    model = make_model(workload("mlp", hidden=(8,), l2=1e-3), 10, 3)
    params, Xs, ys = replicas(model, 3, 6, 3, 3)
    for (loss, grad), p, X, y in zip(model.loss_grads(params, Xs, ys), params, Xs, ys, strict=True):
        one_loss, one_grad = model.loss_grad(p, X, y)
        assert loss == one_loss and np.array_equal(grad, one_grad)


def loop_only(model: Model, params: list, Xs: list, ys: list, vmap_calls: list[int]) -> None:
    """``batched=True`` must take the loop here: no batched pass, the loop's results exactly."""
    batched = model.loss_grads(params, Xs, ys, batched=True)
    assert not vmap_calls
    for (lb, gb), (ll, gl) in zip(batched, model.loss_grads(params, Xs, ys), strict=True):
        assert lb == ll and np.array_equal(np.asarray(gb), np.asarray(gl))


def test_what_cannot_be_batched_takes_the_loop(vmap_calls: list[int]) -> None:
    mlp = make_model(workload("mlp", hidden=(8,)), 10, 3)
    params, Xs, ys = replicas(mlp, 3, 6, 3, 4)
    loop_only(mlp, params[:1], Xs[:1], ys[:1], vmap_calls)  # one replica
    loop_only(mlp, params, [Xs[0], Xs[1][:4], Xs[2]], [ys[0], ys[1][:4], ys[2]], vmap_calls)
    mixed = [params[0], torch.from_numpy(params[1]), params[2]]
    loop_only(mlp, mixed, Xs, ys, vmap_calls)  # arrays and tensors together
    sparse = make_model(workload("sparse_mlp", hidden=(4, 3)), 30, 3)
    loop_only(sparse, *replicas(sparse, 3, 6, 3, 5, sparse=True), vmap_calls)
    logreg = make_model(workload("logreg"), 30, 3)
    loop_only(logreg, *replicas(logreg, 3, 6, 3, 5, sparse=True), vmap_calls)
    buffered = make_model(workload("mlp", hidden=(8,)), 10, 3)
    buffered.net.register_buffer("statistics", torch.zeros(8))  # e.g. batch-norm's
    loop_only(buffered, params, Xs, ys, vmap_calls)


def test_a_sparse_batch_of_a_dense_model_is_batched_densified(vmap_calls: list[int]) -> None:
    torch.set_num_threads(1)
    mlp = make_model(workload("mlp", hidden=(8,)), 30, 3)
    params, Xs, ys = replicas(mlp, 4, 6, 3, 6, sparse=True)
    dense = [X.toarray() for X in Xs]
    batched = mlp.loss_grads(params, Xs, ys, batched=True)
    assert vmap_calls == [1]
    for (lb, gb), (ld, gd) in zip(batched, mlp.loss_grads(params, dense, ys), strict=True):
        assert abs(lb - ld) <= 1e-6 * abs(ld)
        assert np.abs(gb - gd).max() <= 1e-5 * np.abs(gd).max()


def test_unequal_lengths_are_an_error() -> None:
    mlp = make_model(workload("mlp", hidden=(8,)), 10, 3)
    params, Xs, ys = replicas(mlp, 3, 6, 3, 7)
    for batched in (False, True):
        with pytest.raises(ValueError):
            mlp.loss_grads(params, Xs[:2], ys, batched=batched)
