"""What the element sparsifiers share (top-k, random-k, threshold, DGC; GRACE survey).

One module per codec: :mod:`.topk`, :mod:`.randomk`, :mod:`.threshold`, :mod:`.dgc`.

All four send a subset of the elements of a float32 vector and nothing else: the decoded vector
equals the input on the kept elements and is 0 elsewhere, so :class:`ErrorFeedback` around any of
them loses nothing (``input == decoded + residual`` exactly, in float64).

Shared rules:

* **Keep count** (top-k, random-k, DGC's target): ``k = max(1, floor(n * ratio))`` for ``n > 0``
  (GRACE's ``max(1, int(numel * compress_ratio))``) and ``k = 0`` for an empty vector.
* **Ratio**: every codec here that has one takes ``ratio: float | None = None``; ``None`` means
  "use ``ctx.ratio``", the controller's ratio in force for the step (DC2 changes it at run time),
  a number in (0, 1] fixes it for the whole run. Both ends know the context, so the ratio is never
  sent.
* **Wire** (top-k, threshold, DGC): :func:`~psml_core.codecs.formats.encode_sparse`, the cheapest
  of COO (``8k`` bytes: int32 indices then float32 values), bitmap (``ceil(n/8) + 4k``) and dense
  (``4n``); the decoder tells them apart by the length alone. Random-k sends only the ``4k`` bytes
  of values (and the 4-byte step-bound trailer), since every worker regenerates the same
  indices from the shared seed.
* **Server** (the DC2 spec: "PS down: aggregated union, up to P*k elements, capped at the dense
  size"): the default :class:`~psml_core.codecs.base.ServerCodec` sums the pushes and broadcasts
  the union of the supports losslessly in the cheapest sparse format. Top-k can instead
  re-sparsify the aggregate (``down_ratio``) with a server-side residual; random-k broadcasts the
  ``4k`` values (+ 4) at the shared indices, which hold the whole aggregate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from psml_core.codecs.base import CodecContext, Payload
from psml_core.codecs.formats import decode_sparse
from psml_core.codecs.integrity import unseal

__all__ = [
    "F32",
    "F32_MAX",
    "all_finite",
    "all_finite_nonzero",
    "check_ratio",
    "keep_count",
    "magnitude_mask",
    "ratio_in_force",
    "sparse_dense",
    "step_rng",
]

F32 = np.dtype("<f4")
F32_MAX = np.float32(np.finfo(np.float32).max)


def keep_count(n: int, ratio: float) -> int:
    """GRACE's keep count: ``max(1, floor(n * ratio))`` for ``n > 0``, 0 for ``n == 0``."""
    if n <= 0:
        return 0
    return min(n, max(1, math.floor(n * ratio)))


def check_ratio(value: Any, name: str) -> float:
    """A ratio in (0, 1] as a float; anything else is a ValueError naming ``name``."""
    try:
        r = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}") from None
    if not 0.0 < r <= 1.0:
        raise ValueError(f"{name} must be in (0, 1], got {value!r}")
    return r


def ratio_in_force(param: float | None, ctx: CodecContext) -> float:
    """The ratio in force: the constructor's when given, else ``ctx.ratio``."""
    return param if param is not None else check_ratio(ctx.ratio, "ctx.ratio")


def step_rng(ctx: CodecContext, what: str) -> np.random.Generator:
    """A generator seeded by ``(ctx.seed, ctx.step)``, the same on every worker and the server."""
    seed, step = int(ctx.seed), int(ctx.step)
    if seed < 0 or step < 0:
        raise ValueError(f"{what} needs ctx.seed >= 0 and ctx.step >= 0, got {seed} and {step}")
    return np.random.default_rng([seed, step])


_CHUNK = 1 << 16  # elements per cache-resident tile of |x| (256 KiB of float32)


def magnitude_mask(
    x: np.ndarray, t: np.float32, strict: bool, out: np.ndarray | None = None
) -> np.ndarray:
    """``|x| > t`` (``strict``) or ``|x| >= t`` as a boolean vector, without a full ``|x|`` temp.

    Tiling keeps each ``|x|`` tile in cache: about 2.7x faster than ``np.abs(x) > t`` on 25M
    elements (one read of ``x`` and one write of the mask instead of an extra 4n-byte round trip).
    """
    n = int(x.size)
    mask = np.empty(n, dtype=bool) if out is None else out
    tile = np.empty(min(n, _CHUNK), dtype=np.float32)
    cmp = np.greater if strict else np.greater_equal
    for s in range(0, n, _CHUNK):
        e = min(n, s + _CHUNK)
        b = tile[: e - s]
        np.abs(x[s:e], out=b)
        cmp(b, t, out=mask[s:e])
    return mask


def sparse_dense(
    payload: Payload,
    ctx: CodecContext,
    what: str,
    value_ok: Callable[[np.ndarray], bool],
    dense_ok: Callable[[np.ndarray], bool] | None = None,
    down: bool = False,
) -> np.ndarray:
    """Decode a sealed :func:`encode_sparse` buffer to a dense float32 vector, validating it.

    Args:
        payload: The payload; its length selects the format.
        ctx: The step's context (the trailer is bound to ``ctx.step``).
        what: Name used in error messages.
        value_ok: ``f(vals) -> bool`` for the values of a COO or bitmap buffer.
        dense_ok: ``f(dense) -> bool`` for a dense buffer (default: all finite).
        down: Whether a server sent it (a broadcast).
    """
    n = payload.n
    buf = unseal(payload.buffer, what.split()[0], n, ctx.step, down=down)
    if len(buf) == 4 * n:
        out = np.frombuffer(buf, dtype=F32).astype(np.float32)
        ok = dense_ok(out) if dense_ok is not None else bool(np.isfinite(out).all())
        if not ok:
            raise ValueError(f"{what} payload holds values this codec cannot send")
        return out
    idx, vals = decode_sparse(buf, n)
    if not value_ok(vals):
        raise ValueError(f"{what} payload holds values this codec cannot send")
    out = np.zeros(n, dtype=np.float32)
    out[idx] = vals
    return out


def all_finite(v: np.ndarray) -> bool:
    """Whether every decoded value is finite (a corrupt payload can carry NaN or infinity)."""
    return bool(np.isfinite(v).all())


def all_finite_nonzero(v: np.ndarray) -> bool:
    """Whether every kept value is finite, non-zero and within float32 (a DGC payload's)."""
    a = np.abs(v)
    return bool(np.all((a > 0) & (a <= F32_MAX)))


# --------------------------------------------------------------------------------------- top-k
