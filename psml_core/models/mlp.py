"""A multi-layer perceptron in PyTorch, exposed through a flat parameter vector."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from psml_core.config import WorkloadSpec
from psml_core.models.base import MODELS, Matrix
from psml_core.models.torch_net import TorchNet

__all__ = ["MLP"]


@MODELS.register("mlp")
class MLP(TorchNet):
    """Fully connected ReLU network with a softmax cross-entropy loss.

    A ``torch.nn.Sequential`` behind :class:`~psml_core.models.torch_net.TorchNet`'s flat
    parameter vector (layer by layer, weight then bias), which is the PS key space. Runs on the
    CPU in float32; with one intra-op thread (``compute.threads: 1``) results are
    bit-reproducible.
    """

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

    def flops(self, X: Matrix) -> float:
        """About 6 FLOPs per weight per sample for forward plus backward."""
        return 6.0 * self._weights * X.shape[0]
