"""A multi-layer perceptron in PyTorch, exposed through a flat parameter vector."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from psml_core.config import WorkloadSpec
from psml_core.models.base import MODELS, Matrix, Model

__all__ = ["MLP"]


def _tensor(X: Matrix) -> torch.Tensor:
    dense = X.toarray() if sp.issparse(X) else np.asarray(X)
    return torch.from_numpy(np.ascontiguousarray(dense, dtype=np.float32))


@MODELS.register("mlp")
class MLP(Model):
    """Fully connected ReLU network with a softmax cross-entropy loss.

    Gradients come from autograd on a ``torch.nn.Sequential``; parameters are copied in and out
    of the module as one flat vector (``torch.nn.utils.parameters_to_vector`` order: layer by
    layer, weight then bias), which is the PS key space. Runs on the CPU in float32; with one
    intra-op thread (``compute.threads: 1``) results are bit-reproducible.
    """

    name = "mlp"

    def __init__(self, n_features: int, n_classes: int, workload: WorkloadSpec) -> None:
        super().__init__(n_features, n_classes, workload)
        sizes = [n_features, *workload.hidden, n_classes]
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            layers.append(nn.Linear(a, b))
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)
        self._weights = sum(a * b for a, b in zip(sizes[:-1], sizes[1:], strict=True))
        self._n = sum(p.numel() for p in self.net.parameters())

    @property
    def n_params(self) -> int:
        """Weights and biases of every layer."""
        return self._n

    def init_params(self, seed: int) -> np.ndarray:
        """PyTorch's default (Kaiming-uniform) initialisation under a fixed seed."""
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for m in self.net:
                if isinstance(m, nn.Linear):
                    bound = 1.0 / float(np.sqrt(m.in_features))
                    m.weight.uniform_(-bound, bound, generator=gen)
                    m.bias.uniform_(-bound, bound, generator=gen)
        return self._flat().numpy().copy()

    def _flat(self) -> torch.Tensor:
        return nn.utils.parameters_to_vector(self.net.parameters()).detach()

    def _load(self, params: np.ndarray) -> None:
        with torch.no_grad():
            nn.utils.vector_to_parameters(
                torch.from_numpy(params.astype(np.float32)), self.net.parameters()
            )

    def loss_grad(self, params: np.ndarray, X: Matrix, y: np.ndarray) -> tuple[float, np.ndarray]:
        """Mean cross-entropy plus (l2/2)||theta||^2, and its gradient."""
        self._load(params)
        self.net.zero_grad(set_to_none=True)
        out = self.net(_tensor(X))
        loss = nn.functional.cross_entropy(out, torch.from_numpy(np.asarray(y, dtype=np.int64)))
        if self.l2:
            loss = loss + 0.5 * self.l2 * sum((p * p).sum() for p in self.net.parameters())
        loss.backward()
        grad = torch.cat([p.grad.reshape(-1) for p in self.net.parameters()])
        return float(loss.item()), grad.numpy().astype(np.float32, copy=True)

    def evaluate(self, params: np.ndarray, X: Matrix, y: np.ndarray) -> tuple[float, float]:
        """Mean cross-entropy and accuracy."""
        self._load(params)
        with torch.no_grad():
            out = self.net(_tensor(X))
            target = torch.from_numpy(np.asarray(y, dtype=np.int64))
            loss = float(nn.functional.cross_entropy(out, target).item())
            acc = float((out.argmax(dim=1) == target).double().mean().item())
        return loss, acc

    def flops(self, X: Matrix) -> float:
        """About 6 FLOPs per weight per sample for forward plus backward."""
        return 6.0 * self._weights * X.shape[0]
