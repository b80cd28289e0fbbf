"""Random-k with shared-seed indices: only the ``4k`` values travel, sealed (GRACE).

Shared rules (keep count, ratio, server): :mod:`.sparsify`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from psml_core.codecs.base import (
    CODECS,
    Codec,
    CodecContext,
    Payload,
    ServerCodec,
    check_vector,
    is_tensor,
)
from psml_core.codecs.integrity import CHECKSUM_BYTES, seal, unseal
from psml_core.codecs.sparsify import F32, check_ratio, keep_count, ratio_in_force, step_rng

if TYPE_CHECKING:
    import torch

__all__ = ["RandomKCodec", "RandomKServer", "shared_random_indices"]


def _dedupe_sorted(s: np.ndarray) -> np.ndarray:
    """The distinct values of an ascending array."""
    if s.size < 2:
        return s
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def _distinct_uniform(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """``k`` distinct indices of ``[0, n)``, ascending, uniform over all k-subsets (``2k <= n``).

    Draws slightly more than enough indices with replacement (enough that about
    ``k + 4 sqrt(k)`` of them are distinct), sorts and de-duplicates them, draws again in the rare
    case of a shortfall, then drops a uniformly chosen surplus. Every step treats the labels
    symmetrically, so the k-subset is uniform. About 4x faster than sorting
    ``Generator.choice(n, k, replace=False)`` at n = 25M, k = 0.1 n or 0.01 n (51 ms vs 201 ms,
    4 ms vs 18 ms on one core).
    """
    dtype = np.int32 if n < 2**31 else np.int64
    want = min(k + 4.0 * math.sqrt(k) + 8.0, (n + k) / 2.0)
    m = math.ceil(-n * math.log1p(-want / n))
    u = _dedupe_sorted(np.sort(rng.integers(0, n, m, dtype=dtype)))
    while u.size < k:
        more = rng.integers(0, n, 2 * (k - u.size) + 16, dtype=dtype)
        u = _dedupe_sorted(np.sort(np.concatenate([u, more])))
    if u.size > k:
        keep = np.ones(u.size, dtype=bool)
        keep[rng.choice(u.size, u.size - k, replace=False)] = False
        u = u[keep]
    return u.astype(np.intp)


def shared_random_indices(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """``k`` indices of ``[0, n)`` drawn uniformly without replacement, ascending (int64).

    Exact (every k-subset equally likely) and deterministic given the generator's state. Above
    ``k = n/2`` it draws the ``n - k`` indices left out instead.
    """
    k = max(0, min(k, n))
    if k == 0:
        return np.empty(0, dtype=np.intp)
    if k == n:
        return np.arange(n, dtype=np.intp)
    if 2 * k <= n:
        return _distinct_uniform(rng, n, k)
    mask = np.ones(n, dtype=bool)
    mask[_distinct_uniform(rng, n, n - k)] = False
    return np.flatnonzero(mask)


@CODECS.register("randomk")
class RandomKCodec(Codec):
    """Random-k with indices from a seed shared by all workers (GRACE ``randomk``; Stich 2018).

    Algorithm: ``k = max(1, floor(n * ratio))`` (0 for an empty vector) indices drawn uniformly
    without replacement from a generator seeded by ``(ctx.seed, ctx.step)``
    (:func:`shared_random_indices`), sorted ascending. Every worker and the server draw the same
    indices for a step (GRACE seeds with ``hash(tensor name) + step`` to the same end), so only
    values travel and the workers' supports coincide. Callers wanting different index sets for
    different tensors of one step give them different ``ctx.seed`` values.

    Wire format: the ``k`` kept values as little-endian float32 in ascending index order, no
    indices, then the 4-byte CRC-32C trailer of :mod:`~psml_core.codecs.integrity` bound to the
    step, the element count and the shared seed (:meth:`binding`): ``wire_bytes = 4k + 4``
    exactly. The length alone is known to both ends, but the values land on indices regenerated
    from the step, seed and count, so a payload replayed from another step, or decoded with
    another seed or count, would be decoded onto the wrong indices without its bound trailer
    (4 bytes per message: 0.004% of a 1% push of 11.2M elements).

    Server side (:class:`RandomKServer`): the aggregate is zero outside the shared indices, so the
    server broadcasts its ``k`` values at those indices: ``4k + 4`` bytes down, lossless.

    The decoder regenerates the indices from the context; the codec caches the last index set, so
    the server decoding ``P`` pushes of one step (and error feedback decoding its own payload)
    samples once.

    Tuning: random-k needs error feedback and is much less sample-efficient than top-k at the
    same ratio; it is a cheap-selection baseline.

    Args:
        ratio: Fraction of elements kept, in (0, 1]; ``None`` (default) = use ``ctx.ratio``.
    """

    movable = True

    def __init__(self, ratio: float | None = None) -> None:
        self.ratio = None if ratio is None else check_ratio(ratio, "ratio")
        self._cache: tuple[tuple[int, int, int, int], np.ndarray] | None = None

    def keep_count(self, n: int, ctx: CodecContext) -> int:
        """How many elements an ``n``-vector keeps under ``ctx``."""
        return keep_count(n, ratio_in_force(self.ratio, ctx))

    @staticmethod
    def binding(ctx: CodecContext) -> tuple[int]:
        """What the trailer binds besides the step and count (which every seal binds): the seed.

        The indices are drawn from seed, step and count, so a payload decoded with another
        seed would scatter its values onto other indices; bound, it fails its CRC-32C instead.
        """
        return (int(ctx.seed),)

    def indices(self, n: int, ctx: CodecContext) -> np.ndarray:
        """The step's shared indices (ascending, read-only)."""
        k = self.keep_count(n, ctx)
        key = (int(ctx.seed), int(ctx.step), n, k)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        idx = shared_random_indices(n, k, step_rng(ctx, "randomk"))
        idx.flags.writeable = False
        self._cache = (key, idx)
        return idx

    def encode(self, x: np.ndarray, ctx: CodecContext) -> Payload:
        """The values of ``x`` at the step's shared indices (on a tensor's device if a tensor)."""
        if is_tensor(x):
            from psml_core.codecs.sparsify_torch import encode_randomk

            return encode_randomk(self, x, ctx)
        x = check_vector(x)
        idx = self.indices(int(x.size), ctx)
        body = x[idx].astype(F32, copy=False).tobytes()
        n = int(x.size)
        return Payload(self.name, n, seal(body, ctx.step, bind=self.binding(ctx), n=n))

    def decode(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """Scatter the values to the regenerated indices; the length must be ``4k + 4``."""
        idx = self.indices(payload.n, ctx)
        return _scatter_values(payload, idx, "randomk", ctx, down=False)

    def decode_on(self, payload: Payload, ctx: CodecContext, device: torch.device) -> torch.Tensor:
        """:meth:`decode` onto a torch ``device``, parsed there."""
        from psml_core.codecs.sparsify_torch import decode_randomk

        return decode_randomk(self, payload, ctx, device)

    def server(self) -> ServerCodec:
        """A server that broadcasts the ``k`` aggregated values (``4k + 4`` bytes)."""
        return RandomKServer(self)


def _scatter_values(
    payload: Payload, idx: np.ndarray, what: str, ctx: CodecContext, down: bool
) -> np.ndarray:
    """Dense vector with ``payload``'s float32 values at ``idx`` (trailer checked first)."""
    size = 4 * idx.size + CHECKSUM_BYTES
    if len(payload.buffer) != size:
        raise ValueError(
            f"codec {what!r}: payload of {len(payload.buffer)} bytes; {idx.size} values take "
            f"{size} (with the checksum)"
        )
    bind = RandomKCodec.binding(ctx)
    body = unseal(payload.buffer, what, payload.n, ctx.step, down=down, bind=bind)
    vals = np.frombuffer(body, dtype=F32)
    if not np.isfinite(vals).all():
        raise ValueError(
            f"codec {what!r}: payload holds non-finite values, which this codec cannot send"
        )
    out = np.zeros(payload.n, dtype=np.float32)
    out[idx] = vals
    return out


class RandomKServer(ServerCodec):
    """Random-k server: the aggregate lives on the shared indices; broadcast its ``4k`` values.

    Args:
        codec: The worker-side :class:`RandomKCodec`.
    """

    codec: RandomKCodec

    def __init__(self, codec: RandomKCodec) -> None:
        super().__init__(codec)

    def encode_down(self, agg: np.ndarray, ctx: CodecContext) -> Payload:
        """The aggregate's values at the step's indices; other non-zeros are a ValueError."""
        if is_tensor(agg):
            return self._encode_down_tensor(agg, ctx)
        agg = check_vector(agg)
        n = int(agg.size)
        idx = self.codec.indices(n, ctx)
        vals = agg[idx]
        if np.count_nonzero(agg) != np.count_nonzero(vals):
            raise ValueError("randomk server: the aggregate has non-zeros off the shared indices")
        body = vals.astype(F32, copy=False).tobytes()
        bind = self.codec.binding(ctx)
        return Payload(
            f"{self.codec.name}/down", n, seal(body, ctx.step, down=True, bind=bind, n=n)
        )

    def decode_down(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """Scatter the broadcast values to the step's indices (``4k + 4`` bytes)."""
        idx = self.codec.indices(payload.n, ctx)
        return _scatter_values(payload, idx, "randomk/down", ctx, down=True)

    # ----------------------------------------------------------------------------------- threshold

    def _encode_down_tensor(self, agg: torch.Tensor, ctx: CodecContext) -> Payload:
        import torch

        from psml_core.codecs import torch_wire as tw
        from psml_core.codecs.sparsify_torch import device_indices

        agg = tw.check_tensor(agg)
        n = int(agg.numel())
        idx = device_indices(self.codec, n, ctx, agg.device)
        vals = agg[idx]
        if int(torch.count_nonzero(agg)) != int(torch.count_nonzero(vals)):
            raise ValueError("randomk server: the aggregate has non-zeros off the shared indices")
        body = tw.as_bytes(vals)
        bind = self.codec.binding(ctx)
        return Payload(
            f"{self.codec.name}/down", n, tw.seal(body, ctx.step, down=True, bind=bind, n=n)
        )

    def decode_down_on(
        self, payload: Payload, ctx: CodecContext, device: torch.device
    ) -> torch.Tensor:
        """:meth:`decode_down` onto a torch ``device``."""
        from psml_core.codecs.sparsify_torch import decode_randomk

        return decode_randomk(self.codec, payload, ctx, device, down=True)
