"""A small convolutional network for 28x28 digit-sized images, over a flat parameter vector.

Two strided convolutions and two fully connected layers::

    conv k5 stride 2 (1 -> c1) . ReLU . conv k3 stride 2 (c1 -> c2) . ReLU
        . linear (c2 * 7 * 7 -> f) . ReLU . linear (f -> classes)

With ``hidden: [16, 32, 640]`` on 28x28 inputs it has 1,015,626 parameters (4.06 MB of fp32
gradient), most of them in the first fully connected layer, as in the classic MNIST CNNs
(LeCun et al. 1998; TensorFlow's tutorial CNN has 3.3M). It exists so that the methods that act
on layer structure (DFS's blocks, DC2's ratios, the dynamic partition's chunks) see a gradient
of the million-parameter class at a cost one CPU core can afford [ours]. Strided convolutions
replace max-pooling: the same output sizes with a quarter of the second convolution's work.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from psml_core.config import WorkloadSpec
from psml_core.errors import ConfigError
from psml_core.models.base import MODELS, Matrix
from psml_core.models.torch_net import TorchNet, as_tensor

__all__ = ["SmallCNN"]

_KERNELS = (5, 3)


def _out_side(side: int, kernel: int) -> int:
    """Output side of a stride-2 convolution with 'same' padding (kernel // 2)."""
    return (side + 2 * (kernel // 2) - kernel) // 2 + 1


@MODELS.register("cnn")
class SmallCNN(TorchNet):
    """Two stride-2 convolutions and two fully connected layers, softmax cross-entropy.

    Input rows are flat float32 vectors of ``channels * side * side`` pixels, channels first,
    reshaped to ``(N, channels, side, side)``: one channel when ``n_features`` is a perfect
    square (28x28 digits: 784), else three (CIFAR-10: 3,072).

    ``workload.hidden`` gives ``[c1, c2, f]``: the two convolutions' channels and the width of
    the hidden fully connected layer. The flat vector is ``nn.Sequential`` order, weight then
    bias per layer (the PS key space); :meth:`tensor_sizes` lists the eight tensors.

    Tuning: the first linear layer holds ``c2 * s * s * f`` of the parameters (s = side / 4),
    so ``f`` sets the gradient size and the convolutions set most of the compute.

    Raises:
        ConfigError: ``hidden`` is not three positive integers, or the input is not a square
            image of side 8 or more.
    """

    def __init__(self, n_features: int, n_classes: int, workload: WorkloadSpec) -> None:
        super().__init__(n_features, n_classes, workload)
        where = f"workloads.{workload.name}"
        hidden = tuple(workload.hidden)
        if len(hidden) != 3 or any(int(h) < 1 for h in hidden):
            raise ConfigError(
                f"{where}.hidden: model cnn takes [c1, c2, f] (two convolutions' channels and "
                f"the hidden linear width, e.g. [16, 32, 640]), got {list(hidden)}"
            )
        c1, c2, f = (int(h) for h in hidden)
        channels = 1 if math.isqrt(n_features) ** 2 == n_features else 3
        side = math.isqrt(n_features // channels)
        if channels * side * side != n_features or side < 8:
            raise ConfigError(
                f"{where}.model: cnn takes square images as rows of side*side (grey) or "
                f"3*side*side (RGB) pixels with side >= 8, but data set {workload.dataset!r} "
                f"has {n_features} features; use an image data set (digits28, mnist) or mlp"
            )
        s1 = _out_side(side, _KERNELS[0])
        s2 = _out_side(s1, _KERNELS[1])
        self.channels, self.side = channels, side
        self.net = nn.Sequential(
            nn.Conv2d(channels, c1, _KERNELS[0], stride=2, padding=_KERNELS[0] // 2),
            nn.ReLU(),
            nn.Conv2d(c1, c2, _KERNELS[1], stride=2, padding=_KERNELS[1] // 2),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(c2 * s2 * s2, f),
            nn.ReLU(),
            nn.Linear(f, n_classes),
        )
        self._macs = (
            c1 * channels * _KERNELS[0] ** 2 * s1 * s1
            + c2 * c1 * _KERNELS[1] ** 2 * s2 * s2
            + c2 * s2 * s2 * f
            + f * n_classes
        )
        self._n = sum(p.numel() for p in self.net.parameters())

    @property
    def n_params(self) -> int:
        """Convolution kernels and biases, linear weights and biases."""
        return self._n

    @property
    def macs_per_sample(self) -> int:
        """Multiply-accumulates of one image's forward pass (convolutions and linear layers)."""
        return self._macs

    def init_params(self, seed: int) -> np.ndarray:
        """PyTorch's default uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) under a fixed seed."""
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for m in self.net:
                if isinstance(m, nn.Conv2d | nn.Linear):
                    fan_in = m.weight[0].numel()
                    bound = 1.0 / math.sqrt(fan_in)
                    m.weight.uniform_(-bound, bound, generator=gen)
                    m.bias.uniform_(-bound, bound, generator=gen)
        return self._flat().numpy().copy()

    def _inputs(self, X: Matrix) -> torch.Tensor:
        return as_tensor(X).reshape(-1, self.channels, self.side, self.side)

    def flops(self, X: Matrix) -> float:
        """About 6 FLOPs per multiply-accumulate of the forward pass, per sample.

        The MLP's and the ResNet's convention (2 per multiply-add forward, twice that
        backward); ReLU and the additions of the biases are left out.
        """
        return 6.0 * self._macs * X.shape[0]
