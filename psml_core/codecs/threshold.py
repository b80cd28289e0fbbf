"""Threshold sparsification: every element with ``|x| > threshold`` (GRACE).

Shared rules (wire, server): :mod:`.sparsify`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from psml_core.codecs.base import CODECS, Codec, CodecContext, Payload, check_vector, is_tensor
from psml_core.codecs.formats import encode_sparse
from psml_core.codecs.integrity import seal
from psml_core.codecs.sparsify import F32_MAX, magnitude_mask, sparse_dense

if TYPE_CHECKING:
    import torch

__all__ = ["ThresholdCodec"]


@CODECS.register("threshold")
class ThresholdCodec(Codec):
    """Fixed magnitude threshold (GRACE ``threshold``; Strom 2015).

    Algorithm: keep every element with ``|x| > threshold`` (strictly, as GRACE's
    current code; an early GRACE version used ``>=``), compared exactly as real numbers (the
    float64 parameter is not rounded to float32 first). The kept count depends on the data, not
    on a ratio, so this codec ignores ``ctx.ratio``.

    Wire format: :func:`~psml_core.codecs.formats.encode_sparse` of the ``m`` kept elements:
    ``wire_bytes = sparse_size(n, m) + 4``, the 4 being the CRC-32C trailer and ``sparse_size``
    ``8m`` (COO) while ``m <= floor(ceil(n/8) / 4)``, else ``min(ceil(n/8) + 4m, 4n)``. The
    decoder rejects values with ``|v| <= threshold``.

    Server side: the default lossless union of the workers' supports.

    Tuning: GRACE's default 0.01 suits gradients of unit-scale models; the right value scales with
    the gradient magnitude (and hence the learning-rate schedule), so prefer top-k or DGC when the
    scale drifts. Use with error feedback, which otherwise drops small coordinates forever.

    Args:
        threshold: Magnitude a value must exceed to be sent, finite and >= 0 (default 0.01);
            0 sends every non-zero.
    """

    movable = True

    def __init__(self, threshold: float = 0.01) -> None:
        try:
            t = float(threshold)
        except (TypeError, ValueError):
            raise ValueError(f"threshold must be a finite number >= 0, got {threshold!r}") from None
        if not (math.isfinite(t) and t >= 0.0):
            raise ValueError(f"threshold must be a finite number >= 0, got {threshold!r}")
        self.threshold = t
        # |x| > t for float32 x  <=>  |x| > t32, t32 the largest float32 <= t.
        t32 = np.float32(min(t, float(F32_MAX)))
        if float(t32) > t:
            t32 = np.nextafter(t32, np.float32(0))
        self._t32 = t32

    @property
    def threshold32(self) -> np.float32:
        """The largest float32 ``<= threshold`` (``|x| > t`` is ``|x| > t32`` for float32 ``x``)."""
        return self._t32

    def encode(self, x: np.ndarray, ctx: CodecContext) -> Payload:
        """Keep the elements of ``x`` with ``|x| > threshold`` (on a tensor's own device)."""
        if is_tensor(x):
            from psml_core.codecs.sparsify_torch import encode_threshold

            return encode_threshold(self, x, ctx)
        x = check_vector(x)
        n = int(x.size)
        idx = np.flatnonzero(magnitude_mask(x, self._t32, strict=True))
        return Payload(self.name, n, seal(encode_sparse(n, idx, x[idx]), ctx.step, n=n))

    def decode(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """The kept elements in place, zeros elsewhere."""
        t32 = self._t32

        def values_ok(v: np.ndarray) -> bool:
            a = np.abs(v)
            return bool(np.all((a > t32) & (a <= F32_MAX)))

        def dense_ok(d: np.ndarray) -> bool:
            a = np.abs(d)
            return bool(np.all(((a > t32) | (a == 0)) & (a <= F32_MAX)))

        return sparse_dense(payload, ctx, "threshold", values_ok, dense_ok)

    # ----------------------------------------------------------------------------------------- DGC

    def decode_on(self, payload: Payload, ctx: CodecContext, device: torch.device) -> torch.Tensor:
        """:meth:`decode` onto a torch ``device``, parsed there."""
        from psml_core.codecs.sparsify_torch import decode_threshold

        return decode_threshold(self, payload, ctx, device)
