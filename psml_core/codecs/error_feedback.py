"""Error feedback (residual memory) around any codec."""

from __future__ import annotations

import numpy as np

from psml_core.codecs.base import Codec, CodecContext, Payload, ServerCodec, check_vector

__all__ = ["ErrorFeedback"]


class ErrorFeedback(Codec):
    """Wraps a codec with residual memory: what was not sent is added to the next input.

    Algorithm (Seide et al. 2014; Karimireddy et al. 2019, "Error Feedback Fixes SignSGD"; GRACE's
    ``residual`` memory with beta = gamma = 1)::

        v = x + r            # compensate
        p = codec.encode(v)  # compress
        r = v - decode(p)    # update memory

    The residual is kept in float64. For sparsifiers (top-k, random-k, threshold, DGC, blocks)
    ``decode(p)`` equals ``v`` where it sends and 0 elsewhere, so ``v == decode(p) + r`` holds
    exactly; for quantizers it holds to float64 rounding of ``v - decode(p)``, which is exact
    whenever the two differ by less than a factor 2**29 in magnitude.

    Args:
        inner: The codec to wrap; its name and server side are reused.
    """

    def __init__(self, inner: Codec) -> None:
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]  # an instance attribute: the wrapped name
        self.residual: np.ndarray | None = None

    def encode(self, x: np.ndarray, ctx: CodecContext) -> Payload:
        """Encode ``x`` plus the residual; keep what was not sent."""
        x = check_vector(x)
        if self.residual is None or self.residual.size != x.size:
            self.residual = np.zeros(x.size, dtype=np.float64)
        v = x.astype(np.float64) + self.residual
        v32 = v.astype(np.float32)
        payload = self.inner.encode(v32, ctx)
        self.residual = v - self.inner.decode(payload, ctx).astype(np.float64)
        return payload

    def compensated(self, x: np.ndarray) -> np.ndarray:
        """``x`` plus the residual, as float32: what the next ``encode`` will compress."""
        x = check_vector(x)
        if self.residual is None or self.residual.size != x.size:
            return x
        return (x.astype(np.float64) + self.residual).astype(np.float32)

    def decode(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """Decoding is the inner codec's."""
        return self.inner.decode(payload, ctx)

    def __getattr__(self, attr: str) -> object:
        # Codec-specific methods (DFS's predicted_costs, ...) stay reachable through the wrapper.
        if attr == "inner":  # not yet set (copy/pickle): no recursion
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    def server(self) -> ServerCodec:
        """The inner codec's server side."""
        return self.inner.server()

    def for_worker(self, rank: int) -> None:
        """Pass the rank to the inner codec."""
        self.inner.for_worker(rank)
