"""Models whose forward pass is a PyTorch module: the PS key space is its flat parameter vector."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from psml_core.models.base import Matrix, Model

__all__ = ["TorchNet", "as_tensor"]


def as_tensor(X: Matrix) -> torch.Tensor:
    """Rows of ``X`` (dense or sparse) as a contiguous float32 tensor."""
    dense = X.toarray() if sp.issparse(X) else np.asarray(X)
    return torch.from_numpy(np.ascontiguousarray(dense, dtype=np.float32))


class TorchNet(Model):
    """A classifier computed by ``self.net`` with a softmax cross-entropy loss.

    Parameters are copied in and out of the module as one flat vector
    (``torch.nn.utils.parameters_to_vector`` order: module by module, weight then bias). Gradients
    come from autograd; with one intra-op thread results are bit-reproducible. Subclasses build
    ``self.net`` and may reshape rows in :meth:`_inputs`.

    Attributes:
        net: The module.
        eval_batch: Rows per forward pass in :meth:`evaluate` (None: all at once).
    """

    net: nn.Module
    eval_batch: int | None = None
    vmap_batches: bool = False
    """Whether :meth:`loss_grad_batch` may use ``torch.func.vmap``: only for networks checked
    against the per-replica path (:class:`~psml_core.models.mlp.MLP`). On torch 2.13 vmap over
    the ResNet's GroupNorm and strided convolutions gave one replica in three a gradient 1.6%
    off the float64 reference, where the per-replica path is within 1e-6."""

    device: torch.device = torch.device("cpu")

    def to(self, device: torch.device) -> TorchNet:
        """Move the module to ``device``; inputs follow it.

        :meth:`loss_grad` brings gradients back to the host; :meth:`loss_grad_tensor` keeps them.
        """
        self.device = torch.device(device)
        self.net.to(self.device)
        return self

    def tensor_sizes(self) -> tuple[int, ...]:
        """Element counts of the network's parameter tensors, in the flat vector's order."""
        return tuple(int(p.numel()) for p in self.net.parameters())

    def _inputs(self, X: Matrix) -> torch.Tensor:
        return as_tensor(X)

    def _flat(self) -> torch.Tensor:
        return nn.utils.parameters_to_vector(self.net.parameters()).detach().cpu()

    def _load(self, params: np.ndarray | torch.Tensor) -> None:
        # A copy: vector_to_parameters makes the parameters views of the vector it is given.
        if isinstance(params, torch.Tensor):
            flat = params.detach().to(self.device, torch.float32, copy=True)
        else:
            flat = torch.from_numpy(np.array(params, dtype=np.float32)).to(self.device)
        with torch.no_grad():
            nn.utils.vector_to_parameters(flat, self.net.parameters())

    def _x(self, X: Matrix) -> torch.Tensor:
        return self._inputs(X).to(self.device)

    def _t(self, y: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.asarray(y, dtype=np.int64)).to(self.device)

    def loss_grad(self, params: np.ndarray, X: Matrix, y: np.ndarray) -> tuple[float, np.ndarray]:
        """Mean cross-entropy plus (l2/2)||theta||^2, and its gradient."""
        loss, grad = self._loss_grad(params, X, y)
        return loss, grad.cpu().numpy().astype(np.float32, copy=True)

    def loss_grad_tensor(
        self, params: torch.Tensor, X: Matrix, y: np.ndarray
    ) -> tuple[float, torch.Tensor]:
        """:meth:`loss_grad` keeping the gradient on the module's device (a fresh tensor)."""
        return self._loss_grad(params, X, y)

    def _loss_grad(
        self, params: np.ndarray | torch.Tensor, X: Matrix, y: np.ndarray
    ) -> tuple[float, torch.Tensor]:
        self._load(params)
        self.net.zero_grad(set_to_none=True)
        out = self.net(self._x(X))
        loss = nn.functional.cross_entropy(out, self._t(y))
        if self.l2:
            loss = loss + 0.5 * self.l2 * sum((p * p).sum() for p in self.net.parameters())
        loss.backward()
        grad = torch.cat([p.grad.reshape(-1) for p in self.net.parameters()])
        return float(loss.item()), grad

    def loss_grad_batch(
        self, params: np.ndarray, Xs: list[Matrix], ys: list[np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        """P replicas' losses and gradients in one call: ``torch.func.vmap`` over the replicas.

        The module runs functionally (``functional_call``) on each replica's parameters, so
        the P forward and backward passes are one batched pass. Falls back to the loop when
        the batches differ in size, the module keeps buffers (batch-norm statistics, which a
        functional pass would not update), or the network is not marked ``vmap_batches``.
        Equal to the loop within float32 rounding (the batched matrix products sum in another
        order).
        """
        sizes = {int(X.shape[0]) for X in Xs}
        unsafe = not self.vmap_batches or any(True for _ in self.net.buffers())
        if len(Xs) < 2 or len(sizes) != 1 or unsafe:
            return super().loss_grad_batch(params, Xs, ys)
        names = [n for n, _ in self.net.named_parameters()]
        shapes = [p.shape for p in self.net.parameters()]
        counts = [int(p.numel()) for p in self.net.parameters()]
        l2 = float(self.l2)
        net = self.net

        def loss_of(flat: torch.Tensor, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            pieces = torch.split(flat, counts)
            tensors = {n: v.view(s) for n, v, s in zip(names, pieces, shapes, strict=True)}
            out = torch.func.functional_call(net, tensors, (x,))
            loss = nn.functional.cross_entropy(out, t)
            if l2:
                loss = loss + 0.5 * l2 * (flat * flat).sum()
            return loss

        flat = torch.from_numpy(np.ascontiguousarray(params, dtype=np.float32)).to(self.device)
        x = torch.stack([self._x(X) for X in Xs])
        t = torch.stack([self._t(y) for y in ys])
        grads, losses = torch.func.vmap(torch.func.grad_and_value(loss_of))(flat, x, t)
        return (
            losses.detach().double().cpu().numpy(),
            grads.detach().cpu().numpy().astype(np.float32),
        )

    def evaluate(self, params: np.ndarray, X: Matrix, y: np.ndarray) -> tuple[float, float]:
        """Mean cross-entropy and accuracy (``eval_batch`` rows at a time, if set)."""
        self._load(params)
        target = np.asarray(y, dtype=np.int64)
        n = int(X.shape[0])
        step = self.eval_batch or max(n, 1)
        loss_sum, correct = 0.0, 0
        with torch.no_grad():
            if n <= step:  # one pass: the mean as torch computes it
                out = self.net(self._x(X))
                t = self._t(target)
                loss = float(nn.functional.cross_entropy(out, t).item())
                return loss, float((out.argmax(dim=1) == t).double().mean().item())
            for lo in range(0, n, step):
                out = self.net(self._x(X[lo : lo + step]))
                t = self._t(target[lo : lo + step])
                loss_sum += float(nn.functional.cross_entropy(out, t, reduction="sum").item())
                correct += int((out.argmax(dim=1) == t).sum().item())
        return loss_sum / n, correct / n
