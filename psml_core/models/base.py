"""The Model ABC: a loss and its gradient over a flat parameter vector."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import scipy.sparse as sp
import torch

from psml_core.config import WorkloadSpec
from psml_core.registry import Registry

__all__ = ["MODELS", "Model", "make_model"]

Matrix = np.ndarray | sp.csr_matrix


class Model(ABC):
    """A differentiable classifier whose parameters are one flat float32 vector.

    The flat vector is the parameter server's key space: key k is element k. Models are
    stateless apart from their shapes; parameters live in the server shards and worker replicas.

    Args:
        n_features: Input dimension d.
        n_classes: Number of classes K.
        workload: The workload's hyper-parameters (hidden sizes, l2).
    """

    name: ClassVar[str]

    def __init__(self, n_features: int, n_classes: int, workload: WorkloadSpec) -> None:
        self.n_features = n_features
        self.n_classes = n_classes
        self.l2 = workload.l2

    @property
    @abstractmethod
    def n_params(self) -> int:
        """Length of the flat parameter vector."""

    @abstractmethod
    def init_params(self, seed: int) -> np.ndarray:
        """Initial parameters (float32), deterministic in ``seed``."""

    @abstractmethod
    def loss_grad(self, params: np.ndarray, X: Matrix, y: np.ndarray) -> tuple[float, np.ndarray]:
        """Mean loss over the batch (plus L2) and its gradient (float32, length n_params)."""

    def loss_grads(
        self,
        params: Sequence[np.ndarray] | Sequence[torch.Tensor],
        Xs: Sequence[Matrix],
        ys: Sequence[np.ndarray],
        *,
        batched: bool = False,
    ) -> list[tuple[float, np.ndarray | torch.Tensor]]:
        """Losses and gradients of P replicas, each with its own parameters and batch.

        Element i is what ``self.loss_grad(params[i], Xs[i], ys[i])`` returns when the
        parameters are NumPy arrays, or :meth:`loss_grad_tensor` when they are tensors. This
        default loops over exactly those calls whatever ``batched`` says; a model that can
        compute the P replicas in one pass (:class:`~psml_core.models.torch_net.TorchNet`) does
        so when ``batched`` is True, equal to the loop within float32 rounding.

        Args:
            params: P flat parameter vectors (NumPy arrays, or tensors on one device).
            Xs: P batches of rows.
            ys: P label vectors.
            batched: Whether the model may compute all replicas in one pass; False gives
                results bit-identical to one call per replica.

        Returns:
            P pairs (mean loss plus L2, gradient), in the order of ``params``.

        Raises:
            ValueError: ``params``, ``Xs`` and ``ys`` differ in length.
        """
        return [
            self.loss_grad_tensor(p, X, y)
            if isinstance(p, torch.Tensor)
            else self.loss_grad(p, X, y)
            for p, X, y in zip(params, Xs, ys, strict=True)
        ]

    def loss_grad_tensor(
        self, params: torch.Tensor, X: Matrix, y: np.ndarray
    ) -> tuple[float, torch.Tensor]:
        """:meth:`loss_grad` with the parameters and the gradient as tensors on one device.

        The default computes on the host and copies the gradient back; a model that computes
        on the device (:class:`~psml_core.models.torch_net.TorchNet`) keeps it there.
        """
        loss, grad = self.loss_grad(params.detach().cpu().numpy(), X, y)
        return loss, torch.from_numpy(grad).to(params.device)

    @abstractmethod
    def evaluate(self, params: np.ndarray, X: Matrix, y: np.ndarray) -> tuple[float, float]:
        """Mean loss (without L2) and accuracy on (X, y)."""

    @abstractmethod
    def flops(self, X: Matrix) -> float:
        """Floating-point operations of one forward + backward pass on batch X (for timing)."""

    def to(self, device: torch.device) -> Model:
        """Compute on ``device`` from now on (``device`` setting); NumPy models stay on the CPU.

        Parameters and gradients cross :meth:`loss_grad` as NumPy arrays on the host whatever
        the device; :meth:`loss_grad_tensor` keeps them on the device (a sim run on a GPU whose
        codecs and shards work there, :mod:`psml_core.engine.device_state`).
        """
        return self

    def tensor_sizes(self) -> tuple[int, ...]:
        """Parameter counts of the model's tensors in forward order (they tile the flat vector).

        The simulator's overlap of backward and communication needs them: backward produces
        the last tensor's gradient first. Default: one tensor.
        """
        return (self.n_params,)

    def incidence(self, X: Matrix) -> sp.csr_matrix | None:
        """Samples x keys pattern of the gradient (sparse models), or None if every key is hit."""
        return None

    def touched_keys(self, X: Matrix) -> np.ndarray | None:
        """The keys a batch's gradient touches, ascending (``touched`` pulls); None: every key.

        Default: the union of the batch's :meth:`incidence` rows. A model whose incidence is
        large (:class:`~psml_core.models.sparse_mlp.SparseMLP`) computes it directly.
        """
        inc = self.incidence(X)
        return None if inc is None else np.unique(inc.indices)


MODELS: Registry[type[Model]] = Registry("model")


def make_model(workload: WorkloadSpec, n_features: int, n_classes: int) -> Model:
    """Instantiate the workload's model for a data set's shape."""
    cls = MODELS.get(workload.model, where=f"workloads.{workload.name}.model")
    return cls(n_features, n_classes, workload)
