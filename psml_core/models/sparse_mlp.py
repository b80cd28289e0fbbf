"""A ReLU network on sparse features whose first layer is an embedding table (a wide-and-deep DNN).

The DNN for sparse data that parameter servers were built for (click-through and text models):
feature j owns a row of ``H`` weights, and a sample's first layer is the sum of its features'
rows weighted by their values, ``h1 = relu(x W1 + b1)`` (``nn.EmbeddingBag``), followed by
fully connected ReLU layers and a softmax cross-entropy. A sample's gradient touches only its
features' rows of ``W1`` plus every key of the small dense layers, so with ``pull: touched`` a
worker pulls and pushes only those keys: where a key chunk sits then decides which bytes cross
machines, which is the setting of jpdc's dynamic partition for DNNs [ours]. ``W1`` is stored
feature-major, so feature j's row is the contiguous keys ``j H .. j H + H - 1``, and a chunk of
keys is a set of whole feature rows when the chunk size is a multiple of ``H``.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from psml_core.config import WorkloadSpec
from psml_core.errors import ConfigError
from psml_core.models.base import MODELS, Matrix
from psml_core.models.torch_net import TorchNet

__all__ = ["SparseMLP"]


class _Net(nn.Module):
    """Embedding rows (feature-major), then ReLU layers.

    Input: a CSR batch as ``(indices, row offsets, values)``: ``nn.EmbeddingBag`` sums each
    row's features' embedding rows weighted by their values (a third of ``torch.sparse.mm``'s
    time per step on RCV1-sized rows, measured).
    """

    def __init__(self, d: int, widths: list[int], classes: int) -> None:
        super().__init__()
        self.emb = nn.EmbeddingBag(d, widths[0], mode="sum")
        # In a submodule, so the flat vector starts with the table (own parameters come first).
        self.first = nn.Module()
        self.first.bias = nn.Parameter(torch.empty(widths[0]))
        layers: list[nn.Module] = []
        for a, b in zip(widths, [*widths[1:], classes], strict=True):
            layers += [nn.ReLU(), nn.Linear(a, b)]
        self.top = nn.Sequential(*layers)

    def forward(self, x: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        idx, offsets, values = x
        return self.top(self.emb(idx, offsets, per_sample_weights=values) + self.first.bias)


@MODELS.register("sparse_mlp")
class SparseMLP(TorchNet):
    """ReLU network on sparse rows, first layer an embedding table; see the module docstring.

    ``workload.hidden`` gives the widths ``[H, ...]``: ``H`` the embedding width, then the
    hidden fully connected layers. Parameters: ``d H + H`` for the first layer, then
    ``a b + b`` per linear layer. On RCV1-sized data (d = 47,236) ``hidden: [24, 32]`` has
    1,134,554 parameters (4.5 MB of fp32 gradient), 97% in the embedding rows.

    Tuning: ``H`` sets the gradient size (``d H``) and the keys a sample touches (``nnz H`` plus
    the dense tail); the dense layers cost little and every sample touches them.

    Raises:
        ConfigError: ``hidden`` is empty.
    """

    eval_batch = 2048
    batchable = False  # a batch is bags of varying length, not one tensor per replica

    def __init__(self, n_features: int, n_classes: int, workload: WorkloadSpec) -> None:
        super().__init__(n_features, n_classes, workload)
        widths = [int(h) for h in workload.hidden]
        if not widths:
            raise ConfigError(
                f"workloads.{workload.name}.hidden: sparse_mlp needs [H, ...] (the embedding "
                "width first), got []"
            )
        self.net = _Net(n_features, widths, n_classes)
        self.width = widths[0]
        self._rows = n_features * self.width  # keys of the embedding table
        self._n = sum(p.numel() for p in self.net.parameters())
        self._dense_macs = sum(
            m.in_features * m.out_features for m in self.net.top if isinstance(m, nn.Linear)
        )

    @property
    def n_params(self) -> int:
        """Embedding rows and bias, then each linear layer's weights and biases."""
        return self._n

    def init_params(self, seed: int) -> np.ndarray:
        """Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) under a fixed seed; fan-in of W1: 76.

        The embedding's fan-in is a sample's mean non-zeros (RCV1: about 76), not d: a row of
        ``x W1`` sums that many rows [ours].
        """
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            bound = 1.0 / math.sqrt(76.0)
            self.net.emb.weight.uniform_(-bound, bound, generator=gen)
            self.net.first.bias.uniform_(-bound, bound, generator=gen)
            for m in self.net.top:
                if isinstance(m, nn.Linear):
                    b = 1.0 / math.sqrt(m.in_features)
                    m.weight.uniform_(-b, b, generator=gen)
                    m.bias.uniform_(-b, b, generator=gen)
        return self._flat().numpy().copy()

    def _x(self, X: Matrix) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # type: ignore[override]
        """The batch as ``(indices, row offsets, values)`` on the model's device."""
        csr = sp.csr_matrix(X)
        parts = (
            csr.indices.astype(np.int64),
            csr.indptr[:-1].astype(np.int64),
            csr.data.astype(np.float32),
        )
        return tuple(torch.from_numpy(np.ascontiguousarray(a)).to(self.device) for a in parts)  # type: ignore[return-value]

    def flops(self, X: Matrix) -> float:
        """6 FLOPs per multiply-accumulate: ``nnz H`` in the embedding, the dense layers per row."""
        nnz = X.nnz if sp.issparse(X) else int(np.count_nonzero(X))
        return 6.0 * (nnz * self.width + X.shape[0] * self._dense_macs)

    def incidence(self, X: Matrix) -> sp.csr_matrix:
        """Keys each sample's gradient touches: its features' embedding rows and every dense key.

        Exact but large (``nnz H + dense`` entries per row): workers use :meth:`touched_keys`
        per batch instead.
        """
        pattern = sp.csr_matrix(X, copy=True)
        pattern.data = np.ones_like(pattern.data, dtype=np.int8)
        pattern.eliminate_zeros()
        rows = sp.kron(pattern, sp.csr_matrix(np.ones((1, self.width), np.int8)), format="csr")
        dense = sp.csr_matrix(np.ones((X.shape[0], self._n - self._rows), np.int8))
        return sp.hstack([rows, dense], format="csr")

    def touched_keys(self, X: Matrix) -> np.ndarray:
        """The keys a batch touches, ascending: its features' rows, then the dense tail."""
        feats = np.unique(sp.csr_matrix(X).indices).astype(np.int64)
        rows = (feats[:, None] * self.width + np.arange(self.width)).ravel()
        return np.concatenate([rows, np.arange(self._rows, self._n, dtype=np.int64)])
