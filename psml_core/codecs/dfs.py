"""DFS: joint data formatting and block sparsification (Yang et al., Computer Networks 2023)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from psml_core.codecs.base import CODECS, Codec, CodecContext, Payload, ServerCodec, check_vector
from psml_core.codecs.blocks import (
    block_budget,
    block_energy,
    block_maxabs,
    check_block_size,
    check_fraction,
    expand_mask,
    ids_to_mask,
    records_bytes,
    remap_mask,
    top_blocks,
)
from psml_core.codecs.formats import bitmap_bytes, block_count, decode_blocks, encode_blocks

__all__ = ["DEFAULT_CANDIDATES", "CostReport", "DFSCodec", "DFSServer", "remap_mask"]

DEFAULT_CANDIDATES: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)

KEY_BLOCK = "dfs_block_size"
KEY_MASK = "dfs_mask"


@dataclass(frozen=True)
class CostReport:
    """A worker's predicted up cost at every candidate block size (dynamic block size, step 1).

    Attributes:
        n: Length of the vector the report was made on.
        costs: Candidate ``B`` -> exact up bytes ``|S_p(B)| (4B + 4)`` the worker would send.
        masks: Candidate ``B`` -> the kept block mask ``S_p(B)``, for the server's union
            estimate. The masks are simulation-side information: only the costs are on the wire.
    """

    n: int
    costs: dict[int, int]
    masks: dict[int, np.ndarray] = field(repr=False)

    @property
    def wire_bytes(self) -> int:
        """Size of the report on the wire: one uint32 per candidate."""
        return 4 * len(self.costs)


def _opt_fraction(value: float | None, param: str) -> float | None:
    return None if value is None else check_fraction(value, param)


@CODECS.register("dfs")
class DFSCodec(Codec):
    """DFS: sparsify by whole blocks, chosen by block energy with an alignment bonus.

    Source: Yang, Zhao, Zhao, Xu, "DFS: Joint data formatting and sparsification for efficient
    communication in distributed machine learning", Computer Networks 229, 2023. The paper's text
    was not available; this is the suite's spec (``specs/methods.md`` section 2, tagged [ours]).

    Algorithm (worker, per step; ``v`` is the input — the error-feedback residual is added by
    the :class:`~psml_core.codecs.error_feedback.ErrorFeedback` wrapper, so **DFS recipes must set
    ``error_feedback: true``** to get the spec's ``e <- v - g_hat``):

    1. Cut ``v`` into ``nblk = ceil(n/B)`` blocks of ``B`` elements (the last may be shorter).
    2. Score ``s_b = ||v_b||^2``, times ``1 + lam`` when ``b`` is in ``M_{t-1}``, the block mask of
       what the server sent down last step (the alignment bonus keeps the union of the workers'
       blocks small, which makes the down direction cheap).
    3. Keep the blocks of highest score (ties to the lower block id) until ``|S| B >= rho n``
       — ``k = max(1, ceil(rho n / B))`` blocks — or, when ``energy`` (``eta``) is set, until the
       kept energy reaches ``eta ||v||^2`` if that comes first; at least one block when ``n > 0``.
    4. Send the kept blocks whole, in ascending block order.

    Energies are float32 sums of squares (float64 if one overflows;
    :func:`~psml_core.codecs.blocks.block_energy`). The budget is fixed, so without ``energy``
    a message has exactly ``k`` records, all-zero blocks included when fewer blocks are non-zero.

    ``B`` and ``M_{t-1}`` come from the server through ``ctx.extra``: ``"dfs_block_size"`` (int;
    absent = the ``block_size`` param) and ``"dfs_mask"`` (bool array over the blocks of that
    ``B``; absent at step 0 = no bonus). See :meth:`DFSServer.shared`.

    Wire format (up): block records (:func:`~psml_core.codecs.formats.encode_blocks`), each a
    little-endian uint32 block id then the block's float32 values, ascending ids:
    ``wire_bytes = |S| (4B + 4)``, with ``4r + 4`` for the short last block of
    ``r = n - (nblk - 1) B`` elements when it is kept. No header: ``n``, ``B``, the ratio and the
    params are known to both ends; the decoder checks that the number of records is the one the
    budget gives (``k``, or between 1 and ``k`` with ``energy``).

    Dynamic block size (``dynamic``, the default): :meth:`predicted_costs` gives, for every
    candidate ``B``, the exact up bytes the worker would send under the same budget (and the kept
    mask); the report costs :attr:`cost_report_bytes` = ``4 |candidates|`` bytes of *up*
    traffic, which the engine must count. :meth:`DFSServer.choose_block_size` picks the ``B`` of
    least predicted ``sum_p up_p(B) + P |U_p S_p(B)| (4B + 4)`` every ``reselect_every`` steps.

    Server side: :class:`DFSServer` (per-block sum, the union's aggregated blocks sent down,
    optional down sparsification with a server residual, the mask bitmap broadcast).

    Tuning: ``rho = 0.01`` matches the top-k baseline budget (also 0.001, 0.1); ``lam = 1`` is the
    spec's default (0 turns the bonus off); ``reselect_every = 50`` is the cheap mode of the
    dynamic block size; ``dynamic = false`` with a fixed ``block_size`` isolates the dynamic-B
    gain. Small ``B`` tracks the gradient's energy better, large ``B`` pays fewer ids.

    Args:
        ratio: ``rho`` in (0, 1], the element budget; None = use ``ctx.ratio``. Default None.
        energy: ``eta`` in (0, 1]: also stop once the kept energy is ``>= eta ||v||^2``; None =
            the ratio budget only. Default None.
        lam: ``lam >= 0``, the alignment bonus. Default 1.0.
        block_size: ``B`` (>= 1) when ``ctx.extra`` names none: the fixed ``B``, or the
            dynamic mode's initial one. Default 256.
        dynamic: Choose ``B`` from ``candidates`` by predicted cost. Default True.
        candidates: The candidate block sizes (each >= 1). Default (32, 64, 128, 256, 512, 1024).
        reselect_every: ``K >= 1``, steps between block-size re-selections. Default 1.
        down_ratio: In (0, 1]: the server sends down only the top blocks of the aggregate (by
            energy) up to ``down_ratio n`` elements and keeps the rest as a server residual;
            None = off (the whole union is sent). Default None.
    """

    name: ClassVar[str] = "dfs"

    def __init__(
        self,
        ratio: float | None = None,
        energy: float | None = None,
        lam: float = 1.0,
        block_size: int = 256,
        dynamic: bool = True,
        candidates: Sequence[int] = DEFAULT_CANDIDATES,
        reselect_every: int = 1,
        down_ratio: float | None = None,
    ) -> None:
        self.ratio = _opt_fraction(ratio, "ratio")
        self.energy = _opt_fraction(energy, "energy")
        if isinstance(lam, bool) or not isinstance(lam, int | float) or not lam >= 0:
            raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
        if not math.isfinite(lam):
            raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
        self.lam = float(lam)
        self.block_size = check_block_size(block_size)
        if not isinstance(dynamic, bool):
            raise ValueError(f"dynamic must be true or false, got {dynamic!r}")
        self.dynamic = dynamic
        if isinstance(candidates, str | bytes) or not isinstance(candidates, Sequence):
            raise ValueError(f"candidates must be a list of integers >= 1, got {candidates!r}")
        cands = sorted({check_block_size(c, "candidates") for c in candidates})
        if not cands:
            raise ValueError("candidates must name at least one block size")
        self.candidates: tuple[int, ...] = tuple(cands)
        self.reselect_every = check_block_size(reselect_every, "reselect_every")
        self.down_ratio = _opt_fraction(down_ratio, "down_ratio")

    @property
    def cost_report_bytes(self) -> int:
        """Up bytes of one :class:`CostReport`: a uint32 per candidate block size."""
        return 4 * len(self.candidates)

    def resolve_block_size(self, ctx: CodecContext) -> int:
        """``B`` in force: ``ctx.extra["dfs_block_size"]``, else the ``block_size`` param."""
        return check_block_size(ctx.extra.get(KEY_BLOCK, self.block_size), "dfs_block_size")

    def resolve_ratio(self, ctx: CodecContext) -> float:
        """``rho`` in force: the ``ratio`` param, else ``ctx.ratio``."""
        return self.ratio if self.ratio is not None else check_fraction(ctx.ratio, "ctx.ratio")

    def budget(self, n: int, block: int, ctx: CodecContext) -> int:
        """``k``: the fewest blocks with ``k B >= rho n``, in [1, nblk] (0 when ``n = 0``)."""
        return block_budget(self.resolve_ratio(ctx), n, block)

    def previous_mask(self, ctx: CodecContext, n: int, block: int) -> np.ndarray | None:
        """``M_{t-1}`` from ``ctx.extra["dfs_mask"]`` (None when absent).

        Raises:
            ValueError: if the mask does not have one entry per block of ``B``.
        """
        mask = ctx.extra.get(KEY_MASK)
        if mask is None:
            return None
        mask = np.asarray(mask)
        nblk = block_count(n, block)
        if mask.shape != (nblk,) or mask.dtype != bool:
            raise ValueError(
                f"dfs_mask must be a bool array over the {nblk} blocks of {block} "
                f"(n = {n}), got {mask.dtype} of shape {mask.shape}"
            )
        return mask

    def select(self, v: np.ndarray, block: int, mask: np.ndarray | None, k: int) -> np.ndarray:
        """The kept block ids, ascending: top ``k`` by score, cut by the energy rule if set.

        Args:
            v: The float32 vector.
            block: ``B``.
            mask: ``M_{t-1}`` on the grid of ``B``, or None (no bonus).
            k: The ratio budget in blocks.
        """
        e = block_energy(v, block)
        scores = e if mask is None or self.lam == 0 else np.where(mask, e * (1 + self.lam), e)
        ids = top_blocks(scores, k)
        if self.energy is None or ids.size == 0:
            return ids
        order = ids[np.lexsort((ids, -scores[ids]))]  # by score, descending; ties: lower id
        kept = np.cumsum(e[order])
        count = min(ids.size, int(np.searchsorted(kept, self.energy * e.sum(), "left")) + 1)
        return np.sort(order[:count])

    def encode(self, x: np.ndarray, ctx: CodecContext) -> Payload:
        """Send the selected blocks of ``x`` as block records."""
        x = check_vector(x)
        n = int(x.size)
        b = self.resolve_block_size(ctx)
        ids = self.select(x, b, self.previous_mask(ctx, n, b), self.budget(n, b, ctx))
        return Payload(self.name, n, encode_blocks(x, ids, b))

    def decode_records(self, payload: Payload, ctx: CodecContext) -> tuple[np.ndarray, np.ndarray]:
        """Parse and validate an up payload: ``(block ids, dense float32 vector)``.

        Raises:
            ValueError: for a length no set of records has, bad ids, or a record count the
                budget cannot give.
        """
        n = payload.n
        b = self.resolve_block_size(ctx)
        ids, dense = decode_blocks(payload.buffer, n, b)
        k = self.budget(n, b, ctx)
        if self.energy is None and ids.size != k:
            raise ValueError(f"dfs payload has {ids.size} blocks, the budget sends exactly {k}")
        if not min(k, 1) <= ids.size <= k:
            raise ValueError(f"dfs payload has {ids.size} blocks, the budget sends 1 to {k}")
        return ids, dense

    def decode(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """The dense vector: the kept blocks' values, zeros elsewhere."""
        return self.decode_records(payload, ctx)[1]

    def predicted_costs(self, v: np.ndarray, ctx: CodecContext) -> CostReport:
        """Exact up bytes (and kept masks) at every candidate ``B`` under the same budget.

        ``M_{t-1}`` (on the grid of the ``B`` in force) is remapped to each candidate's grid for
        the alignment bonus. ``v`` must be what :meth:`encode` would see: with error feedback,
        the input plus the residual (``ErrorFeedback.residual``).
        """
        v = check_vector(v)
        n = int(v.size)
        cur = self.resolve_block_size(ctx)
        prev = self.previous_mask(ctx, n, cur)
        costs: dict[int, int] = {}
        masks: dict[int, np.ndarray] = {}
        for b in self.candidates:
            mask = None if prev is None else remap_mask(prev, cur, b, n)
            ids = self.select(v, b, mask, self.budget(n, b, ctx))
            nblk = block_count(n, b)
            has_last = bool(ids.size) and int(ids[-1]) == nblk - 1
            costs[b] = records_bytes(n, b, int(ids.size), has_last)
            masks[b] = ids_to_mask(ids, nblk)
        return CostReport(n, costs, masks)

    def server(self) -> DFSServer:
        """The DFS server: block sums, union down, optional down residual, mask broadcast."""
        return DFSServer(self)


class DFSServer(ServerCodec):
    """The DFS parameter server: aggregate per block, send the union down, publish ``B`` and mask.

    Per step (``B`` from ``ctx``, as on the workers):

    1. :meth:`aggregate`: the sum of the pushes (float32, summed in the order given) and
       ``G_t``, the union of the workers' blocks.
    2. :meth:`encode_down`: block records of the aggregate (sums; the engine divides by ``P``)
       over ``G_t``: ``|G_t| (4B + 4)`` bytes per worker (``4r + 4`` for a short last block),
       i.e. ``P |G_t| (4B + 4)`` in all. With ``down_ratio``: ``u = aggregate + residual``
       (float64); the top blocks of ``u`` by energy among its non-zero blocks, the fewest with
       ``k B >= down_ratio n``, are sent as float32; the residual becomes ``u`` minus what was
       sent (exactly: ``aggregate + old residual == sent + new residual`` in float64).
       ``M_t`` = the blocks sent down.
    3. :meth:`shared`: ``{"dfs_block_size": B_{t+1}, "dfs_mask": M_t}`` for the next step's
       ``ctx.extra``, the mask remapped to the grid of ``B_{t+1}`` if ``B`` changed; it costs
       ``ceil(nblk / 8)`` bytes (the bitmap) of down traffic per worker (``B`` itself is free,
       as in the spec).

    Dynamic block size: when :meth:`reselect_due` says so, the workers send a
    :class:`CostReport` with their push (:attr:`DFSCodec.cost_report_bytes` up bytes each) and
    :meth:`choose_block_size` picks the ``B`` of the next step. The reports are made on the
    vectors of this step, so for the step that uses the new ``B`` the union is estimated from
    the last iteration's masks, as the spec says, with no extra round trip.

    Args:
        codec: The worker-side :class:`DFSCodec`.
    """

    codec: DFSCodec

    def __init__(self, codec: DFSCodec) -> None:
        super().__init__(codec)
        self.block_size: int = codec.block_size
        self.n: int | None = None
        self.union: np.ndarray | None = None
        self.mask: np.ndarray | None = None
        self.mask_block: int = codec.block_size
        self.residual: np.ndarray | None = None
        self.last_costs: dict[int, int] = {}

    def _block(self, ctx: CodecContext) -> int:
        b = self.codec.resolve_block_size(ctx)
        if KEY_BLOCK not in ctx.extra and b != self.block_size:
            raise ValueError(
                f"ctx.extra lacks {KEY_BLOCK!r} but the server's block size is {self.block_size}: "
                "pass DFSServer.shared() into the step's context"
            )
        return b

    def aggregate(self, payloads: list[Payload], ctx: CodecContext) -> np.ndarray:
        """The sum of the pushes; remembers the union ``G_t`` of their blocks."""
        b = self._block(ctx)
        n = payloads[0].n
        out = np.zeros(n, dtype=np.float32)
        union = np.zeros(block_count(n, b), dtype=bool)
        for p in payloads:
            if p.n != n:
                raise ValueError(f"pushes of different lengths ({p.n} and {n}) cannot be summed")
            ids, dense = self.codec.decode_records(p, ctx)
            out += dense
            union[ids] = True
        self.n, self.union = n, union
        return out

    def down_budget(self, n: int, block: int) -> int | None:
        """Blocks sent down under ``down_ratio`` (None when off)."""
        if self.codec.down_ratio is None:
            return None
        return block_budget(self.codec.down_ratio, n, block)

    def encode_down(self, agg: np.ndarray, ctx: CodecContext) -> Payload:
        """Records of the union's aggregated blocks, or of the top blocks with ``down_ratio``.

        If ``agg`` did not come from :meth:`aggregate` (no union of its length), the blocks with
        a non-zero value stand for the union.
        """
        agg = check_vector(agg)
        n, b = int(agg.size), self._block(ctx)
        nblk = block_count(n, b)
        if self.codec.down_ratio is None:
            if self.union is not None and self.union.size == nblk and self.n == n:
                sent = self.union
            else:
                sent = block_maxabs(agg, b) > 0
            buf = encode_blocks(agg, np.flatnonzero(sent), b)
        else:
            if self.residual is None or self.residual.size != n:
                self.residual = np.zeros(n, dtype=np.float64)
            u = agg.astype(np.float64) + self.residual
            live = np.flatnonzero(block_maxabs(u, b) > 0)
            k = min(block_budget(self.codec.down_ratio, n, b), live.size)
            ids = live[top_blocks(block_energy(u, b)[live], k)]
            sent = ids_to_mask(ids, nblk)
            u32 = u.astype(np.float32)
            elems = expand_mask(sent, b, n)
            u[elems] -= u32[elems]  # exact: float64 - its float32 rounding
            self.residual = u
            buf = encode_blocks(u32, ids, b)
        self.n, self.mask, self.mask_block = n, sent, b
        return Payload(f"{self.codec.name}/down", n, buf)

    def decode_down(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """The broadcast vector (zeros outside the blocks sent down).

        Raises:
            ValueError: for a buffer no set of block records has, or more blocks than
                ``down_ratio`` allows.
        """
        b = self.codec.resolve_block_size(ctx)
        ids, dense = decode_blocks(payload.buffer, payload.n, b)
        k = self.down_budget(payload.n, b)
        if k is not None and ids.size > k:
            raise ValueError(f"dfs down payload has {ids.size} blocks, down_ratio allows {k}")
        return dense

    def shared(self) -> tuple[dict[str, Any], int]:
        """``({"dfs_block_size": B, "dfs_mask": M_t}, ceil(nblk / 8))`` for the next step.

        Before the first :meth:`encode_down` there is no mask: ``({"dfs_block_size": B}, 0)``.
        """
        extra: dict[str, Any] = {KEY_BLOCK: self.block_size}
        if self.mask is None or self.n is None:
            return extra, 0
        mask = remap_mask(self.mask, self.mask_block, self.block_size, self.n)
        extra[KEY_MASK] = mask
        return extra, bitmap_bytes(mask.size)

    def reselect_due(self, step: int) -> bool:
        """Whether the workers report costs with the push of ``step`` (every K steps)."""
        return self.codec.dynamic and step % self.codec.reselect_every == 0

    def predicted_total(self, reports: Sequence[CostReport], block: int) -> int:
        """``sum_p up_p(B) + P |U_p S_p(B)| (4B + 4)`` (exact records, short last block too)."""
        n = reports[0].n
        up = sum(r.costs[block] for r in reports)
        union = np.zeros(block_count(n, block), dtype=bool)
        for r in reports:
            union |= r.masks[block]
        count = int(union.sum())
        last = bool(union.size) and bool(union[-1])
        return up + len(reports) * records_bytes(n, block, count, last)

    def choose_block_size(self, reports: Sequence[CostReport]) -> int:
        """Set and return the ``B`` of least predicted up + down bytes (ties: the smaller ``B``).

        With ``dynamic = false`` or no reports the block size stays. The per-candidate totals
        are kept in :attr:`last_costs`.

        Raises:
            ValueError: for reports of different lengths or missing candidates.
        """
        if not self.codec.dynamic or not reports:
            return self.block_size
        n = reports[0].n
        for r in reports:
            if r.n != n or set(r.costs) != set(self.codec.candidates):
                raise ValueError("cost reports must cover every candidate for the same vector")
        self.last_costs = {b: self.predicted_total(reports, b) for b in self.codec.candidates}
        self.block_size = min(self.codec.candidates, key=lambda b: (self.last_costs[b], b))
        return self.block_size
