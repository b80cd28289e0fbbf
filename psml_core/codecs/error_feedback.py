"""Error feedback (residual memory) around any codec."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from psml_core.codecs.base import Codec, CodecContext, Payload, check_vector, is_tensor
from psml_core.codecs.wrapper import WrapperCodec

if TYPE_CHECKING:
    import torch

__all__ = ["ErrorFeedback"]


class ErrorFeedback(WrapperCodec):
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

    Given a torch tensor, the residual lives on its device and the inner codec says what it
    sent there (:meth:`Codec.encode_sent_on`: top-k and DFS from their selection, others by
    decoding their payload): the same IEEE operations as on the host, so the payloads and the
    residual equal the host path's bit for bit.

    Args:
        inner: The codec to wrap; its name and server side are reused.
    """

    def __init__(self, inner: Codec) -> None:
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]  # an instance attribute: the wrapped name
        self.residual: np.ndarray | None = None

    def encode(self, x: np.ndarray, ctx: CodecContext) -> Payload:
        """Encode ``x`` plus the residual; keep what was not sent."""
        if is_tensor(x):
            return self._encode_tensor(x, ctx)
        x = check_vector(x)
        if self.residual is not None and not isinstance(self.residual, np.ndarray):
            self.residual = self.residual.cpu().numpy()
        if self.residual is None or self.residual.size != x.size:
            self.residual = np.zeros(x.size, dtype=np.float64)
        v = x.astype(np.float64) + self.residual
        v32 = v.astype(np.float32)
        payload = self.inner.encode(v32, ctx)
        self.residual = v - self.inner.decode(payload, ctx).astype(np.float64)
        return payload

    def _encode_tensor(self, x: torch.Tensor, ctx: CodecContext) -> Payload:
        import torch

        from psml_core.codecs.torch_wire import check_tensor

        x = check_tensor(x)
        r = self.residual
        if isinstance(r, np.ndarray):  # a host residual (a run moved to the device)
            r = torch.from_numpy(r).to(x.device)
        if r is None or r.numel() != x.numel():
            r = torch.zeros(x.numel(), dtype=torch.float64, device=x.device)
        # In place on fresh tensors (the state is replaced only once the encode succeeded):
        # the same float64 operations as ``x64 + r`` and ``v - sent64``, a float32 operand
        # widened exactly, without a new vector for each step of the sum.
        v = x.to(torch.float64).add_(r)
        payload, sent = self.inner.encode_sent_on(v.to(torch.float32), ctx)
        self.residual = v.sub_(sent)
        return payload

    def compensated(self, x: np.ndarray) -> np.ndarray:
        """``x`` plus the residual, as float32: what the next ``encode`` will compress."""
        x = check_vector(x)
        r = None if self.residual is None else _host(self.residual)
        if r is None or r.size != x.size:
            return x
        return (x.astype(np.float64) + r).astype(np.float32)


def _host(a: Any) -> np.ndarray:
    """A residual as a host array (a device residual is copied)."""
    return a if isinstance(a, np.ndarray) else a.cpu().numpy()
