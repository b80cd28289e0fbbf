"""The value-bounded filter's torch path (element mode), worker and server, on the device.

The same arithmetic as :meth:`ValueBoundedCodec._filter_elements
<psml_core.codecs.value_bounded.ValueBoundedCodec>` over the whole vector at once: the residual
(float64 or float32, the codec's ``residual_dtype``) lives on the device, ``v = r + u`` is one
IEEE addition per element, the keep test compares ``|v|`` with the bound rounded to the
residual's dtype, and a kept element leaves ``v - float32(v)`` behind (exact in float64). So
the kept set, the bytes and the residual equal the host's. Key mode (per-key means, summed in
NumPy's pairwise order) runs on the host: a tensor given to a key-mode filter is copied there.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import torch

from psml_core.codecs.base import CodecContext, Payload
from psml_core.codecs.torch_wire import (
    check_finite,
    check_tensor,
    decode_sparse,
    densify,
    encode_sparse,
    seal,
    unseal_to,
)

__all__ = ["FilterState", "ValueBoundedParams", "decode_elements", "filter_elements"]


@runtime_checkable
class ValueBoundedParams(Protocol):
    """What the filter's torch half reads of its codec.

    :class:`~psml_core.codecs.value_bounded.ValueBoundedCodec`.
    """

    @property
    def name(self) -> str:
        """The codec's name, as the payload carries it."""

    def threshold(self, ctx: CodecContext) -> float:
        """The bound in force at ``ctx``."""


@runtime_checkable
class FilterState(Protocol):
    """One end's filter state the torch half carries on: the residual (host or device)."""

    dtype: np.dtype
    residual: np.ndarray | torch.Tensor | None
    last_sent: int


_DTYPES = {np.dtype(np.float64): torch.float64, np.dtype(np.float32): torch.float32}


def _residual(state: FilterState, u: torch.Tensor) -> torch.Tensor:
    """The state's residual on ``u``'s device, allocated (zeros) at the first call."""
    dtype = _DTYPES[np.dtype(state.dtype)]
    r = state.residual
    if r is None:
        r = torch.zeros(u.numel(), dtype=dtype, device=u.device)
    elif isinstance(r, np.ndarray):  # a host residual (a run moved to the device)
        r = torch.from_numpy(r).to(u.device)
    if r.numel() != u.numel():
        raise ValueError(
            f"value_bounded keeps a residual of {r.numel()} elements but got a "
            f"vector of {u.numel()}: use one codec instance per vector (per worker and shard)"
        )
    state.residual = r
    return r


def filter_elements(
    codec: ValueBoundedParams, state: FilterState, u: torch.Tensor, ctx: CodecContext, down: bool
) -> Payload:
    """Add ``u`` to ``state``'s residual, send what passes the bound, keep the rest (sealed)."""
    u = check_tensor(u)
    n = int(u.numel())
    theta = codec.threshold(ctx)
    r = _residual(state, u)
    r += u
    th = float(np.dtype(state.dtype).type(theta))
    keep = (r != 0) if th == 0 else (torch.abs(r) > th)
    idx = torch.nonzero(keep).reshape(-1)
    v = r[idx]
    v32 = v.to(torch.float32)
    check_finite(
        v32,
        "value_bounded: the accumulated update overflowed float32 (input + residual is not "
        "finite); the codec's residual is no longer usable",
    )
    r[idx] = v - v32.to(r.dtype) if r.dtype == torch.float64 else 0
    state.last_sent = int(idx.numel())
    name = f"{codec.name}/down" if down else codec.name
    return Payload(name, n, seal(encode_sparse(n, idx, v32), ctx.step, down=down, n=n))


def decode_elements(
    codec: ValueBoundedParams,
    payload: Payload,
    ctx: CodecContext,
    device: torch.device,
    down: bool = False,
) -> torch.Tensor:
    """An element-mode payload (push or broadcast) decoded onto ``device``."""
    name = f"{codec.name}/down" if down else codec.name
    body = unseal_to(payload.buffer, name, payload.n, ctx.step, device, down=down)
    idx, vals, dense = decode_sparse(body, payload.n)
    check_finite(vals, "value_bounded payload holds a non-finite value: it is corrupted")
    return densify(payload.n, idx, vals, dense)
