"""Models whose forward pass is a PyTorch module: the PS key space is its flat parameter vector."""

from __future__ import annotations

from collections.abc import Callable, Sequence

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

    Batched replicas (:meth:`loss_grads` with ``batched=True``): ``torch.func.vmap`` over the
    replicas' stacked parameters, the module called functionally. Its batching rules turn the
    P replicas' convolutions into one grouped convolution and their matrix products into one
    batched product, so P small passes become one large one (on an H200, 16 ResNet-18
    replicas at batch 32: 45 ms against 142 ms for 16 module copies one after another).

    Exactness: a float32 gradient is within about 2e-6 of a float64 reference (relative to
    its largest entry), on either path, except where a ReLU's input lies within float32
    rounding of zero: there the two precisions take different sides of the kink and the
    gradient jumps. Measured on the CPU (torch 2.13, GroupNorm ResNets of width 8 on 8x8 and
    16x16 images, 640 replicas over 160 seeds): 9 per-replica and 7 batched gradients were
    7.6e-4 to 5.8e-2 off, each with a ReLU input under 1.1e-6 in float64 (4 of them on both
    paths alike); all others were within 1.5e-6 on both. Larger networks have more such
    inputs (width 16 on 32x32 images: 16 replicas, 3 jumps of 5.7e-4 to 3.3e-3, 1 on the
    per-replica path), so either path's gradients differ from float64, and from each other,
    on a few replicas per iteration. An earlier note here blamed "vmap over GroupNorm" for
    a 1.6% error: that was one such replica. Not GroupNorm: its groups' means stay within
    1.7 standard deviations of zero, so float32 moments are well conditioned. Not vmap:
    the per-replica path meets as many kinks.

    Attributes:
        net: The module.
        eval_batch: Rows per forward pass in :meth:`evaluate` (None: all at once).
        batchable: Whether :meth:`loss_grads` may batch the replicas: the input is one dense
            tensor per replica (not :class:`~psml_core.models.sparse_mlp.SparseMLP`'s bags).
    """

    net: nn.Module
    eval_batch: int | None = None
    batchable: bool = True

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

    def loss_grads(
        self,
        params: Sequence[np.ndarray] | Sequence[torch.Tensor],
        Xs: Sequence[Matrix],
        ys: Sequence[np.ndarray],
        *,
        batched: bool = False,
    ) -> list[tuple[float, np.ndarray | torch.Tensor]]:
        """P replicas' losses and gradients; with ``batched``, in one ``vmap`` pass.

        See :meth:`Model.loss_grads`. The batched pass runs when there are two replicas or
        more, the batches have one size, the parameters are all arrays or all tensors on the
        module's device, the model is :attr:`batchable` and the module keeps no buffers
        (batch-norm statistics, which a functional pass would not update); otherwise the
        loop. When every replica is the same object (``params[i] is params[0]``), the pass
        maps over the batches only, with the one parameter vector shared, which runs each layer
        once on all the batches' rows. Batched gradients are rows of one fresh (P, n_params)
        array or tensor, aliasing
        no input; they equal the loop's within float32 rounding (the batched products sum in
        another order; see the class docstring for ReLU kinks).
        """
        if not batched or not self._can_batch(params, Xs, ys):
            return super().loss_grads(params, Xs, ys)
        tensors = isinstance(params[0], torch.Tensor)
        # One parameter vector for every replica (the sim's batched step: every worker at the
        # same replica): not stacked, so each layer runs once on all P batches' rows.
        shared = all(p is params[0] for p in params)
        chosen = params[:1] if shared else params
        if tensors:
            flat = torch.stack([p.detach().to(self.device, torch.float32) for p in chosen])
        else:
            stacked = np.stack([np.asarray(p, dtype=np.float32) for p in chosen])
            flat = torch.from_numpy(stacked).to(self.device)
        # Stacked on the host, then one copy each to the device.
        x = torch.stack([self._inputs(X) for X in Xs]).to(self.device)
        t = self._t(np.stack([np.asarray(y) for y in ys]))
        one = torch.func.grad_and_value(self._functional_loss())
        if shared:
            grads, losses = torch.func.vmap(one, in_dims=(None, 0, 0))(flat[0], x, t)
        else:
            grads, losses = torch.func.vmap(one)(flat, x, t)
        values: list[float] = losses.tolist()
        if tensors:
            return list(zip(values, grads.detach().unbind(0), strict=True))
        host = grads.detach().cpu().numpy()
        return [(v, host[i]) for i, v in enumerate(values)]

    def _can_batch(
        self,
        params: Sequence[np.ndarray] | Sequence[torch.Tensor],
        Xs: Sequence[Matrix],
        ys: Sequence[np.ndarray],
    ) -> bool:
        if not len(params) == len(Xs) == len(ys):
            raise ValueError(
                f"{len(params)} parameter vectors, {len(Xs)} batches, {len(ys)} labels"
            )
        if not self.batchable or len(Xs) < 2 or any(True for _ in self.net.buffers()):
            return False
        if len({int(X.shape[0]) for X in Xs}) != 1:
            return False
        kinds = {isinstance(p, torch.Tensor) for p in params}
        if kinds == {True}:  # on the module's device, where the loop returns them too
            return all(p.device == self.device for p in params)  # type: ignore[union-attr]
        return kinds == {False}

    def _functional_loss(
        self,
    ) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
        """One replica's loss as a function of its flat parameters, batch and labels."""
        names = [n for n, _ in self.net.named_parameters()]
        shapes = [p.shape for p in self.net.parameters()]
        counts = [int(p.numel()) for p in self.net.parameters()]
        l2, net = float(self.l2), self.net

        def loss_of(flat: torch.Tensor, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            pieces = torch.split(flat, counts)
            tensors = {n: v.view(s) for n, v, s in zip(names, pieces, shapes, strict=True)}
            loss = nn.functional.cross_entropy(torch.func.functional_call(net, tensors, (x,)), t)
            if l2:
                loss = loss + 0.5 * l2 * (flat * flat).sum()
            return loss

        return loss_of

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
