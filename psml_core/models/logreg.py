"""Logistic regression on dense or sparse (CSR) features."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, log_softmax

from psml_core.models.base import MODELS, Matrix, Model

__all__ = ["LogisticRegression"]


@MODELS.register("logreg")
class LogisticRegression(Model):
    """Binary (sigmoid) or multinomial (softmax) logistic regression.

    Layout of the flat vector: binary, ``[w (d), b]``; K classes, ``[W (d x K, row-major), b (K)]``
    so that feature j owns the contiguous keys ``j*K .. j*K+K-1``. A sample's gradient touches
    only the keys of its non-zero features plus the bias, which is what makes sparse data
    partitionable (docs/methods.md, JPDC). Computed in float64, returned as float32.
    """

    @property
    def _k(self) -> int:
        return 1 if self.n_classes == 2 else self.n_classes

    @property
    def n_params(self) -> int:
        """d*K weights plus K biases (K = 1 for binary)."""
        return (self.n_features + 1) * self._k

    def init_params(self, seed: int) -> np.ndarray:
        """Zeros: the loss is convex, so the start point is the textbook one."""
        return np.zeros(self.n_params, dtype=np.float32)

    def _split(self, params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = params.astype(np.float64)
        d, k = self.n_features, self._k
        return p[: d * k].reshape(d, k), p[d * k :]

    def _scores(self, params: np.ndarray, X: Matrix) -> np.ndarray:
        W, b = self._split(params)
        return np.asarray(X @ W) + b

    def loss_grad(self, params: np.ndarray, X: Matrix, y: np.ndarray) -> tuple[float, np.ndarray]:
        """Mean log-loss plus (l2/2)||W||^2, and its gradient."""
        W, _ = self._split(params)
        z = self._scores(params, X)
        n = z.shape[0]
        if self._k == 1:
            z1 = z[:, 0]
            loss = float(np.mean(np.logaddexp(0.0, z1) - y * z1))
            err = (expit(z1) - y)[:, None] / n
        else:
            logp = log_softmax(z, axis=1)
            loss = float(-np.mean(logp[np.arange(n), y]))
            err = np.exp(logp)
            err[np.arange(n), y] -= 1.0
            err /= n
        gW = np.asarray(X.T @ err) + self.l2 * W
        gb = err.sum(axis=0)
        loss += 0.5 * self.l2 * float(np.sum(W * W))
        return loss, np.concatenate([gW.ravel(), gb]).astype(np.float32)

    def evaluate(self, params: np.ndarray, X: Matrix, y: np.ndarray) -> tuple[float, float]:
        """Mean log-loss and accuracy."""
        z = self._scores(params, X)
        n = z.shape[0]
        if self._k == 1:
            z1 = z[:, 0]
            loss = float(np.mean(np.logaddexp(0.0, z1) - y * z1))
            pred = (z1 > 0).astype(np.int64)
        else:
            loss = float(-np.mean(log_softmax(z, axis=1)[np.arange(n), y]))
            pred = np.argmax(z, axis=1)
        return loss, float(np.mean(pred == y))

    def flops(self, X: Matrix) -> float:
        """Forward and backward: two multiply-adds per non-zero per class each way."""
        nnz = X.nnz if sp.issparse(X) else X.size
        return 4.0 * nnz * self._k + 4.0 * X.shape[0] * self._k

    def incidence(self, X: Matrix) -> sp.csr_matrix:
        """Keys each sample's gradient touches: its features' weights and the biases."""
        pattern = sp.csr_matrix(X, copy=True)
        pattern.data = np.ones_like(pattern.data, dtype=np.int8)
        pattern.eliminate_zeros()
        n, d = pattern.shape
        k = self._k
        bias = sp.csr_matrix(np.ones((n, 1), dtype=np.int8))
        with_bias = sp.hstack([pattern, bias], format="csr")
        if k == 1:
            return with_bias
        # Feature j (and the bias, j = d) owns keys j*K .. j*K+K-1.
        return sp.kron(with_bias, sp.csr_matrix(np.ones((1, k), dtype=np.int8)), format="csr")
