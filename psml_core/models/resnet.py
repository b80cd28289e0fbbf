"""ResNet-18, CIFAR variant, in PyTorch, exposed through a flat parameter vector.

ResNet-18 of He et al. (CVPR 2016) with the stem adapted to 32x32 images, as is customary for
CIFAR-10: a 3x3 stride-1 stem convolution and no max-pool (instead of the 7x7 stride-2
convolution and max-pool for 224x224 ImageNet images), then four stages of two BasicBlocks each
(widths 64, 128, 256, 512; stride 2 at the first block of stages 2-4, with a 1x1 convolution +
normalisation on the shortcut where the shape changes), global average pooling and a linear
classifier. With 10 classes it has 11,173,962 parameters and ~0.56 GMAC per image.

Deviation from the usual model: **GroupNorm replaces BatchNorm** (32 groups per layer, Wu & He,
ECCV 2018). A parameter server holds only parameters; BatchNorm's running mean and variance
would be state outside the PS key space (per-worker buffers that are neither pushed nor pulled),
and its batch statistics would make a sample's gradient depend on the other samples of its
worker's mini-batch. GroupNorm normalises each sample on its own, has the same affine
parameters per channel (so the parameter count equals the BatchNorm model's) and no buffers:
the model's entire state is its flat parameter vector.
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

__all__ = ["ResNet18"]

_CHANNELS = 3
_STAGES = 4
_BLOCKS_PER_STAGE = 2


class _Counter:
    """Multiply-accumulates of one sample's forward pass, added up as layers are built."""

    def __init__(self) -> None:
        self.macs = 0

    def conv(self, conv: nn.Conv2d, out_side: int) -> nn.Conv2d:
        kh, kw = conv.kernel_size
        per_pixel = conv.out_channels * (conv.in_channels // conv.groups) * kh * kw
        self.macs += per_pixel * out_side * out_side
        return conv

    def linear(self, lin: nn.Linear) -> nn.Linear:
        self.macs += lin.in_features * lin.out_features
        return lin


class _BasicBlock(nn.Module):
    """Two 3x3 convolutions with normalisation and ReLU, plus the (projected) identity."""

    def __init__(
        self, c_in: int, c_out: int, stride: int, side_out: int, groups: int, count: _Counter
    ) -> None:
        super().__init__()
        self.conv1 = count.conv(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), side_out)
        self.norm1 = nn.GroupNorm(groups, c_out)
        self.conv2 = count.conv(nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False), side_out)
        self.norm2 = nn.GroupNorm(groups, c_out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                count.conv(nn.Conv2d(c_in, c_out, 1, stride, 0, bias=False), side_out),
                nn.GroupNorm(groups, c_out),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class _Net(nn.Module):
    """The network proper; input (N, 3, side, side), output (N, n_classes) logits."""

    def __init__(self, side: int, n_classes: int, width: int, groups: int) -> None:
        super().__init__()
        self.count = _Counter()
        self.stem = self.count.conv(nn.Conv2d(_CHANNELS, width, 3, 1, 1, bias=False), side)
        self.stem_norm = nn.GroupNorm(groups, width)
        blocks: list[nn.Module] = []
        c_in, s = width, side
        for stage in range(_STAGES):
            c_out = width * 2**stage
            for i in range(_BLOCKS_PER_STAGE):
                stride = 2 if stage > 0 and i == 0 else 1
                s = (s - 1) // stride + 1  # 3x3 conv, padding 1 (and 1x1, padding 0)
                blocks.append(_BasicBlock(c_in, c_out, stride, s, groups, self.count))
                c_in = c_out
        self.blocks = nn.Sequential(*blocks)
        self.fc = self.count.linear(nn.Linear(c_in, n_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.stem_norm(self.stem(x)))
        out = self.blocks(out)
        return self.fc(out.mean(dim=(2, 3)))


@MODELS.register("resnet18")
class ResNet18(TorchNet):
    """ResNet-18 (CIFAR variant, GroupNorm) with a softmax cross-entropy loss.

    Input rows are flat float32 vectors of ``3 * side * side`` pixels, channels first (the
    CIFAR-10 python layout: 1024 red, 1024 green, 1024 blue values, each image row by row),
    reshaped to ``(N, 3, side, side)`` inside the model; CIFAR-10 has side 32 (3,072 features).
    Any square side of at least 8 works (three stride-2 stages, then global average pooling).

    Gradients come from autograd; parameters are copied in and out of the module as one flat
    vector in ``torch.nn.utils.parameters_to_vector`` order (module registration order: stem,
    stem norm, block by block conv1, norm1, conv2, norm2, shortcut, then the classifier's weight
    and bias), which is the PS key space. Runs on the CPU in float32; with one intra-op thread
    (``compute.threads: 1``) results are bit-reproducible.

    Deviation: GroupNorm instead of BatchNorm (see the module docstring), so no running
    statistics exist outside the parameter vector.

    Args:
        n_features: Input dimension, ``3 * side * side``.
        n_classes: Number of classes K.
        workload: The workload's hyper-parameters (``l2`` is used; ``hidden`` is ignored).
        width: Channels of the first stage (64 in ResNet-18; the stages have width, 2x, 4x,
            8x). Smaller values give the same architecture, thinner, for tests.
        groups: GroupNorm groups per layer (32, the GroupNorm paper's default); must divide
            ``width``.
        eval_batch: Images per forward pass in :meth:`evaluate`, bounding its memory.

    Raises:
        ConfigError: ``n_features`` is not ``3 * side * side`` with side >= 8, or ``groups``
            does not divide ``width``.
    """

    def __init__(
        self,
        n_features: int,
        n_classes: int,
        workload: WorkloadSpec,
        width: int = 64,
        groups: int = 32,
        eval_batch: int = 500,
    ) -> None:
        super().__init__(n_features, n_classes, workload)
        side = math.isqrt(n_features // _CHANNELS)
        if n_features != _CHANNELS * side * side or side < 8:
            raise ConfigError(
                f"workloads.{workload.name}.model: resnet18 takes square RGB images as rows of "
                f"3*side*side pixels, channels first, side >= 8 (CIFAR-10: 3072 = 3*32*32), but "
                f"data set {workload.dataset!r} has {n_features} features; use an image data "
                "set (source cifar10) or another model"
            )
        if width < 1 or groups < 1 or width % groups:
            raise ValueError(f"groups={groups} must divide width={width}")
        self.side = side
        self.eval_batch = eval_batch
        self.net = _Net(side, n_classes, width, groups)
        self._macs = self.net.count.macs
        self._n = sum(p.numel() for p in self.net.parameters())

    @property
    def n_params(self) -> int:
        """Convolution weights, GroupNorm scales and shifts, classifier weights and biases."""
        return self._n

    def init_params(self, seed: int) -> np.ndarray:
        """He initialisation under a fixed seed.

        Convolutions: Kaiming normal, fan-out mode, ReLU gain (as in He et al. and
        torchvision's ResNet). GroupNorm: scale 1, shift 0. Classifier: PyTorch's default
        uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias. Drawn in module order
        from one ``torch.Generator`` seeded with ``seed``.
        """
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for m in self.net.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(
                        m.weight, mode="fan_out", nonlinearity="relu", generator=gen
                    )
                elif isinstance(m, nn.GroupNorm):
                    m.weight.fill_(1.0)
                    m.bias.zero_()
                elif isinstance(m, nn.Linear):
                    bound = 1.0 / math.sqrt(m.in_features)
                    m.weight.uniform_(-bound, bound, generator=gen)
                    m.bias.uniform_(-bound, bound, generator=gen)
        return self._flat().numpy().copy()

    def _inputs(self, X: Matrix) -> torch.Tensor:
        return as_tensor(X).reshape(-1, _CHANNELS, self.side, self.side)

    def flops(self, X: Matrix) -> float:
        """About 6 FLOPs per multiply-accumulate of the forward pass, per sample.

        The MLP's convention (2 FLOPs per multiply-add forward, twice that backward), applied to
        the convolutions and the classifier; normalisation, ReLU, additions and pooling are
        left out (under 1% of the total). CIFAR-10 (32x32): about 0.56 GMAC, so 3.3 GFLOP per
        image.
        """
        return 6.0 * self._macs * X.shape[0]

    @property
    def macs_per_sample(self) -> int:
        """Multiply-accumulates of one image's forward pass (convolutions and classifier)."""
        return self._macs
