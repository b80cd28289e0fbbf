"""The element sparsifiers' torch paths: top-k, random-k, threshold and DGC on the device.

Each function takes the codec (its parameters), a tensor on any device and the context, and
returns exactly the payload (or the decoded vector, on the device) of the codec's NumPy path:
the same kept indices (ties included: top-k's go to the lower index, as on the host), the same
bytes and the same values. What stays on the host, because it is drawn there: random-k's
shared indices and DGC's sample positions come from the NumPy generators of
:func:`~psml_core.codecs.sparsify.step_rng` (copied to the device once per step), and DGC's
threshold refinement is host arithmetic in float32 on counts made on the device.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from psml_core.codecs.base import CodecContext, Payload
from psml_core.codecs.formats import sparse_size
from psml_core.codecs.integrity import CHECKSUM_BYTES
from psml_core.codecs.sparsify import F32_MAX, keep_count, ratio_in_force, step_rng
from psml_core.codecs.torch_select import topk_indices
from psml_core.codecs.torch_wire import (
    COO_ORDER,
    as_bytes,
    check_finite,
    check_tensor,
    densify,
    encode_sparse,
    parse_sparse,
    seal,
    unseal_to,
)

__all__ = [
    "DGCParams",
    "RandomKParams",
    "ThresholdParams",
    "TopKParams",
    "decode_dgc",
    "decode_randomk",
    "decode_threshold",
    "decode_topk",
    "device_indices",
    "encode_dgc",
    "encode_randomk",
    "encode_threshold",
    "encode_topk",
    "encode_topk_sent",
    "sparse_on",
]

_F32_MAX = float(F32_MAX)


@runtime_checkable
class TopKParams(Protocol):
    """What top-k's torch half reads of :class:`~psml_core.codecs.topk.TopKCodec`."""

    @property
    def name(self) -> str:
        """The codec's name, as the payload carries it."""

    def keep_count(self, n: int, ctx: CodecContext) -> int:
        """Elements kept of ``n`` at ``ctx``."""


@runtime_checkable
class RandomKParams(Protocol):
    """What random-k's torch half reads of :class:`~psml_core.codecs.randomk.RandomKCodec`."""

    @property
    def name(self) -> str:
        """The codec's name, as the payload carries it."""

    def indices(self, n: int, ctx: CodecContext) -> np.ndarray:
        """The step's shared indices (host, ascending)."""

    def binding(self, ctx: CodecContext) -> tuple[int]:
        """What the payload's trailer binds besides the step."""


@runtime_checkable
class ThresholdParams(Protocol):
    """What threshold's torch half reads of :class:`~psml_core.codecs.threshold.ThresholdCodec`."""

    @property
    def name(self) -> str:
        """The codec's name, as the payload carries it."""

    @property
    def threshold32(self) -> np.float32:
        """The largest float32 not above the threshold."""


@runtime_checkable
class DGCParams(Protocol):
    """What DGC's torch half reads of :class:`~psml_core.codecs.dgc.DGCCodec`."""

    @property
    def name(self) -> str:
        """The codec's name, as the payload carries it."""

    @property
    def ratio(self) -> float | None:
        """The kept fraction (None: the context's)."""

    @property
    def sample_fraction(self) -> float:
        """The fraction of elements sampled for the threshold."""

    @property
    def upper(self) -> float:
        """The count above which the threshold is raised."""

    @property
    def lower(self) -> float:
        """The count below which the threshold is lowered."""

    @property
    def max_rounds(self) -> int:
        """The most threshold refinements."""


def sparse_on(
    payload: Payload,
    ctx: CodecContext,
    what: str,
    device: torch.device,
    value_ok: Callable[[torch.Tensor], torch.Tensor],
    dense_ok: Callable[[torch.Tensor], torch.Tensor] | None = None,
    down: bool = False,
) -> torch.Tensor:
    """:func:`psml_core.codecs.sparsify.sparse_dense` onto ``device`` (same checks, same errors).

    ``value_ok`` and ``dense_ok`` return a 0-d bool tensor, checked in one host sync with the
    indices' order.
    """
    n = payload.n
    body = unseal_to(payload.buffer, what.split()[0], n, ctx.step, device, down=down)
    idx, vals, dense, bad = parse_sparse(body, n)
    check = value_ok if not dense else dense_ok if dense_ok is not None else _finite
    ok = check(vals)
    if vals.numel() and not bool(ok if bad is None else ok & ~bad):
        if bad is not None and bool(bad):
            raise ValueError(COO_ORDER.format(n=n))
        raise ValueError(f"{what} payload holds values this codec cannot send")
    return densify(n, idx, vals, dense)


def _finite(v: torch.Tensor) -> torch.Tensor:
    return torch.isfinite(v).all()


def _sealed(name: str, n: int, idx: torch.Tensor, vals: torch.Tensor, ctx: CodecContext) -> Payload:
    return Payload(name, n, seal(encode_sparse(n, idx, vals), ctx.step, n=n))


# ------------------------------------------------------------------------------------- top-k


def encode_topk(codec: TopKParams, x: torch.Tensor, ctx: CodecContext) -> Payload:
    """:meth:`TopKCodec.encode <psml_core.codecs.topk.TopKCodec.encode>` on ``x``'s device."""
    return encode_topk_sent(codec, x, ctx, sent=False)[0]


def encode_topk_sent(
    codec: TopKParams, x: torch.Tensor, ctx: CodecContext, sent: bool = True
) -> tuple[Payload, torch.Tensor | None]:
    """:func:`encode_topk`, and (``sent``) the vector it decodes to: the kept values in place."""
    x = check_tensor(x)
    n = int(x.numel())
    idx = topk_indices(x, codec.keep_count(n, ctx))
    vals = x[idx]
    dense = None
    if sent:
        dense = torch.zeros(n, dtype=torch.float32, device=x.device)
        dense[idx] = vals
    return _sealed(codec.name, n, idx, vals, ctx), dense


def decode_topk(
    codec: TopKParams, payload: Payload, ctx: CodecContext, device: torch.device
) -> torch.Tensor:
    """:meth:`TopKCodec.decode <psml_core.codecs.topk.TopKCodec.decode>` onto ``device``."""
    n = payload.n
    k = codec.keep_count(n, ctx)
    size = sparse_size(n, k) + CHECKSUM_BYTES
    if len(payload.buffer) != size:
        raise ValueError(
            f"codec 'topk': payload of {len(payload.buffer)} bytes; {k} of {n} elements "
            f"take {size} (with the checksum)"
        )
    return sparse_on(
        payload,
        ctx,
        "topk",
        device,
        _finite,
        lambda d: _finite(d) & (torch.count_nonzero(d) <= k),
    )


# ---------------------------------------------------------------------------------- random-k

_INDEX_CACHE: dict[tuple[int, torch.device], tuple[np.ndarray, torch.Tensor]] = {}


def device_indices(
    codec: RandomKParams, n: int, ctx: CodecContext, device: torch.device
) -> torch.Tensor:
    """The step's shared random-k indices on ``device`` (drawn on the host, copied once)."""
    host = codec.indices(n, ctx)
    key = (id(codec), device)
    hit = _INDEX_CACHE.get(key)
    if hit is not None and hit[0] is host:
        return hit[1]
    idx = torch.from_numpy(host.astype(np.int64)).to(device)  # a copy: the cache is read-only
    _INDEX_CACHE[key] = (host, idx)
    return idx


def encode_randomk(codec: RandomKParams, x: torch.Tensor, ctx: CodecContext) -> Payload:
    """:meth:`RandomKCodec.encode <psml_core.codecs.randomk.RandomKCodec.encode>` on the device."""
    x = check_tensor(x)
    idx = device_indices(codec, int(x.numel()), ctx, x.device)
    body = as_bytes(x[idx])
    n = int(x.numel())
    return Payload(codec.name, n, seal(body, ctx.step, bind=codec.binding(ctx), n=n))


def decode_randomk(
    codec: RandomKParams,
    payload: Payload,
    ctx: CodecContext,
    device: torch.device,
    down: bool = False,
) -> torch.Tensor:
    """Random-k's decoder (push or broadcast) onto ``device``: values at the step's indices."""
    idx = device_indices(codec, payload.n, ctx, device)
    what = "randomk/down" if down else "randomk"
    size = 4 * int(idx.numel()) + CHECKSUM_BYTES
    if len(payload.buffer) != size:
        raise ValueError(
            f"codec {what!r}: payload of {len(payload.buffer)} bytes; {idx.numel()} values take "
            f"{size} (with the checksum)"
        )
    bind = codec.binding(ctx)
    body = unseal_to(payload.buffer, what, payload.n, ctx.step, device, down=down, bind=bind)
    vals = body.clone().view(torch.float32) if body.numel() else body.view(torch.float32)
    check_finite(vals, f"codec {what!r}: payload holds non-finite values, which it cannot send")
    out = torch.zeros(payload.n, dtype=torch.float32, device=device)
    out[idx] = vals
    return out


# --------------------------------------------------------------------------------- threshold


def encode_threshold(codec: ThresholdParams, x: torch.Tensor, ctx: CodecContext) -> Payload:
    """:meth:`ThresholdCodec.encode <psml_core.codecs.threshold.ThresholdCodec.encode>`."""
    x = check_tensor(x)
    idx = torch.nonzero(torch.abs(x) > float(codec.threshold32)).reshape(-1)
    return _sealed(codec.name, int(x.numel()), idx, x[idx], ctx)


def decode_threshold(
    codec: ThresholdParams, payload: Payload, ctx: CodecContext, device: torch.device
) -> torch.Tensor:
    """:meth:`ThresholdCodec.decode <psml_core.codecs.threshold.ThresholdCodec.decode>`."""
    t32 = float(codec.threshold32)

    def values_ok(v: torch.Tensor) -> torch.Tensor:
        a = torch.abs(v)
        return ((a > t32) & (a <= _F32_MAX)).all()

    def dense_ok(d: torch.Tensor) -> torch.Tensor:
        a = torch.abs(d)
        return (((a > t32) | (a == 0)) & (a <= _F32_MAX)).all()

    return sparse_on(payload, ctx, "threshold", device, values_ok, dense_ok)


# --------------------------------------------------------------------------------------- DGC


def _dgc_select(
    codec: DGCParams, x: torch.Tensor, k: int, ratio: float, ctx: CodecContext
) -> torch.Tensor:
    """:meth:`DGCCodec.select <psml_core.codecs.dgc.DGCCodec.select>`'s mask, on the device."""
    n = int(x.numel())
    s = max(1, math.floor(n * codec.sample_fraction))
    pos = torch.from_numpy(step_rng(ctx, "dgc").integers(0, n, s)).to(x.device)
    a = torch.abs(x)
    ks = min(s, max(1, math.floor(s * ratio)))
    t = np.float32(float(torch.sort(a[pos]).values[s - ks]))  # np.partition's (s - ks)-th
    up, lo = np.float32(codec.upper), np.float32(codec.lower)
    c = int(torch.count_nonzero(a >= float(t)))
    for _ in range(codec.max_rounds):
        if c > codec.upper * k:
            with np.errstate(over="ignore"):
                new = np.float32(min(t * up, F32_MAX))
        elif c < codec.lower * k:
            new = np.float32(t * lo)
        else:
            break
        if new == t:
            break
        t = new
        c = int(torch.count_nonzero(a >= float(t)))
    return a > 0 if t == 0 else a >= float(t)


def encode_dgc(codec: DGCParams, x: torch.Tensor, ctx: CodecContext) -> Payload:
    """:meth:`DGCCodec.encode <psml_core.codecs.dgc.DGCCodec.encode>` on ``x``'s device."""
    x = check_tensor(x)
    n = int(x.numel())
    if n == 0:
        return Payload(codec.name, 0, seal(torch.empty(0, dtype=torch.uint8), ctx.step, n=0))
    ratio = ratio_in_force(codec.ratio, ctx)
    idx = torch.nonzero(_dgc_select(codec, x, keep_count(n, ratio), ratio, ctx)).reshape(-1)
    return _sealed(codec.name, n, idx, x[idx], ctx)


def decode_dgc(
    codec: DGCParams, payload: Payload, ctx: CodecContext, device: torch.device
) -> torch.Tensor:
    """:meth:`DGCCodec.decode <psml_core.codecs.dgc.DGCCodec.decode>` onto ``device``."""

    def nonzero_finite(v: torch.Tensor) -> torch.Tensor:
        a = torch.abs(v)
        return ((a > 0) & (a <= _F32_MAX)).all()

    return sparse_on(payload, ctx, "dgc", device, nonzero_finite)
