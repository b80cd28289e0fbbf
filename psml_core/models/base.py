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

    def loss_grad_batch(
        self, params: np.ndarray, Xs: list[Matrix], ys: list[np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`loss_grad` of P replicas at once: ``params`` is (P, n_params), one batch each.

        Returns the P losses (float64) and the (P, n_params) float32 gradients. This default
        loops; a model that can batch the P replicas in one call (:class:`TorchNet`) overrides
        it, with results equal to the loop's within float32 rounding.
        """
        out = [self.loss_grad(p, X, y) for p, X, y in zip(params, Xs, ys, strict=True)]
        return np.array([o[0] for o in out]), np.stack([o[1] for o in out])

    def loss_grads(
        self,
        params: Sequence[np.ndarray] | Sequence[torch.Tensor],
        Xs: Sequence[Matrix],
        ys: Sequence[np.ndarray],
        *,
        batched: bool = False,
    ) -> list[tuple[float, np.ndarray | torch.Tensor]]:
        """Each replica's :meth:`loss_grad` (NumPy parameters) or :meth:`loss_grad_tensor`."""
        one = self.loss_grad_tensor if params and isinstance(params[0], torch.Tensor) else self.loss_grad
        return [one(p, X, y) for p, X, y in zip(params, Xs, ys, strict=True)]

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
