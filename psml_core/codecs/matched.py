"""Top-k at a byte budget matched, step by step, to Ratatouille's value-bounded filter."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from psml_core.codecs.base import CODECS, Codec, CodecContext, Payload, check_vector
from psml_core.codecs.formats import decode_sparse, encode_sparse
from psml_core.codecs.integrity import seal, unseal
from psml_core.codecs.select import topk_indices
from psml_core.codecs.value_bounded import ValueBoundedCodec

__all__ = ["MatchedTopKCodec"]


@CODECS.register("topk_matched")
class MatchedTopKCodec(Codec):
    """Top-k with error feedback whose k each step is what a value-bounded filter would send.

    Ratatouille's baseline "top-k with error feedback at a matched byte budget" (our reading,
    recorded in ``config/methods.yaml``, recipe ``topk_matched``). A matched budget must not be
    a number typed into a recipe: here a
    *shadow* :class:`~psml_core.codecs.value_bounded.ValueBoundedCodec` with the filter's
    parameters sees the same gradient stream as the worker (with its own residual, as in a PF
    run) and reports how many elements it would send; the codec then sends the ``k`` largest
    elements of ``v = g + e`` (its own error-feedback residual ``e``), in the same sparse
    format. With the same ``k`` and ``n`` both send exactly ``sparse_size(n, k) + 4`` bytes
    (with the CRC-32C trailer), so the two differ only in *which* elements they send: magnitude
    order versus a decaying bound with carry-over. When the filter would send nothing, the
    payload is the trailer alone (4 bytes).

    Algorithm, per step: ``k = shadow.encode(g).count``; ``v = g + e``; send top-k of ``v``;
    ``e = v - sent``.

    Wire format: :func:`~psml_core.codecs.formats.encode_sparse` (COO, bitmap or dense, told
    apart by length alone), so the decoder needs no ``k``.

    Tuning: give it exactly the filter's parameters (``theta0``, ``a``, ``schedule``,
    ``warmup``, ``mode: element``) of the run it is matched against.

    Args:
        **filter_params: The value-bounded filter's parameters (see its docstring).
    """

    carries_residual: ClassVar[bool] = True  # its own error feedback: the shadow needs raw g

    def __init__(self, **filter_params: Any) -> None:
        self.shadow = ValueBoundedCodec(**filter_params)
        self.residual: np.ndarray | None = None
        self.last_k = 0
        self._scratch: np.ndarray | None = None

    def encode(self, x: np.ndarray, ctx: CodecContext) -> Payload:
        """Send as many of the largest elements of ``x + e`` as the filter would send of x."""
        x = check_vector(x)
        n = int(x.size)
        self.shadow.encode(x, ctx)
        k = self.shadow.last_sent
        if self.residual is None or self.residual.size != n:
            self.residual = np.zeros(n, dtype=np.float32)
            self._scratch = np.empty(n, dtype=np.float32)
        v = x + self.residual
        idx = topk_indices(v, k, self._scratch) if k else np.empty(0, dtype=np.intp)
        vals = v[idx].astype(np.float32)
        self.residual = v
        self.residual[idx] = 0.0
        self.last_k = k
        return Payload(self.name, n, seal(encode_sparse(n, idx, vals), ctx.step, n=n))

    def decode(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """The sent elements in place, zeros elsewhere (format from the length alone)."""
        body = unseal(payload.buffer, self.name, payload.n, ctx.step)
        idx, vals = decode_sparse(body, payload.n)
        if not np.all(np.isfinite(vals)):
            raise ValueError("topk_matched payload holds non-finite values")
        out = np.zeros(payload.n, dtype=np.float32)
        out[idx] = vals
        return out
