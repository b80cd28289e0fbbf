"""DFS's parameter server: per-block sums, the union's blocks sent down, B and mask published.

The worker side is :class:`~psml_core.codecs.dfs.DFSCodec` (the server reads its settings and
calls its helpers); the cost report is :mod:`.dfs_cost`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from psml_core.codecs.base import Codec, CodecContext, Payload, ServerCodec, check_vector, is_tensor
from psml_core.codecs.blocks import (
    block_budget,
    block_energy,
    block_maxabs,
    expand_mask,
    ids_to_mask,
    records_bytes,
    remap_mask,
    top_blocks,
)
from psml_core.codecs.dfs_cost import KEY_BLOCK, KEY_MASK, KEY_REPORT, CostReport
from psml_core.codecs.formats import bitmap_bytes, block_count, decode_blocks, encode_blocks
from psml_core.codecs.integrity import seal, unseal

if TYPE_CHECKING:
    import torch

__all__ = ["DFSServer"]


class DFSServer(ServerCodec):
    """The DFS parameter server: aggregate per block, send the union down, publish ``B`` and mask.

    Per step ``t`` (``B_t`` from ``ctx``, as on the workers):

    1. :meth:`aggregate`: the sum of the pushes (float32, summed in the order given) and
       ``G_t``, the union of the workers' blocks; if the pushes carry cost reports, the choice
       of ``B_{t+1}`` (:meth:`choose_block_size`).
    2. :meth:`encode_down`: block records of the aggregate (sums; the engine divides by ``P``)
       over ``G_t``: ``|G_t| (4B + 4) + 4`` bytes per worker (``4r + 4`` for a short last
       block; + 4 for the CRC-32C trailer), i.e. ``P (|G_t| (4B + 4) + 4)`` in all. With
       ``down_ratio``: ``u = aggregate + residual``
       (float64); the top blocks of ``u`` by energy among its non-zero blocks, the fewest with
       ``k B >= down_ratio n``, are sent as float32; the residual becomes ``u`` minus what was
       sent (exactly: ``aggregate + old residual == sent + new residual`` in float64).
       ``M_t`` = the blocks sent down.
    3. :meth:`shared`: the state of the workers' next push (``ctx.extra``) and its exact size
       per worker:

       * dynamic: ``{"dfs_block_size": B_{t+1}, "dfs_mask": M_t on the grid of B_{t+1},
         "dfs_report": True when the next push must carry a report}``, ``4 + ceil(nblk / 8)``
         bytes — one uint32 word (``B`` in bits 0-30, the report request in bit 31) and the
         bitmap over the ``nblk`` blocks of ``B_{t+1}``;
       * fixed ``B``: ``{"dfs_mask": M_t}``, ``ceil(nblk / 8)`` bytes (``B`` is a param both
         ends know).

       With ``lam = 0`` the workers have no use for the mask and it is not sent.

    Dynamic block size (our design's three steps): after the rounds ``t`` with ``t % K == 0``
    (:meth:`reselect_due`) the next pushes carry :class:`CostReport` words; the server takes
    ``up_p(B)`` from them, estimates the union from the masks of that step
    (:meth:`union_estimate`) and keeps the ``B`` of least ``sum_p up_p(B) + P |U(B)| (4B + 4)``
    (ties: the smaller ``B``; :attr:`last_costs`, :attr:`history`). When ``B`` changes the mask
    is remapped: a block of the new grid is in when it overlaps one of the old.

    Args:
        codec: The worker-side :class:`DFSCodec`.
    """

    codec: Any  # the worker-side DFSCodec (not imported: it imports this module)

    def __init__(self, codec: Codec) -> None:
        super().__init__(codec)
        self.block_size: int = codec.block_size  # B of the next step (published by shared)
        self.n: int | None = None
        self.union: np.ndarray | None = None  # G_t of the last aggregate, on union_block's grid
        self.union_block: int = codec.block_size
        self.pushed: int = 0  # sum_p |S_p| of the last aggregate (blocks pushed, with repeats)
        self.mask: np.ndarray | None = None  # M_t, the blocks sent down, on mask_block's grid
        self.mask_block: int = codec.block_size
        self.residual: np.ndarray | torch.Tensor | None = None  # a tensor on the torch path
        self.step: int | None = None  # ctx.step of the last aggregate
        self.last_costs: dict[int, int] = {}
        self.last_reports: list[CostReport] = []
        self.history: list[tuple[int, int]] = []  # (step of the reports, B chosen)

    def block_for(self, ctx: CodecContext) -> int:
        """``B`` of this step: the codec's, checked against the one this server published."""
        b = self.codec.resolve_block_size(ctx)
        if KEY_BLOCK not in ctx.extra and b != self.block_size:
            raise ValueError(
                f"ctx.extra lacks {KEY_BLOCK!r} but the server's block size is {self.block_size}: "
                "pass DFSServer.shared() into the step's context"
            )
        return b

    def aggregate(self, payloads: list[Payload], ctx: CodecContext) -> np.ndarray:
        """The sum of the pushes; remembers ``G_t``; picks the next ``B`` if they report costs."""
        b = self.block_for(ctx)
        n = payloads[0].n
        out = np.zeros(n, dtype=np.float32)
        union = np.zeros(block_count(n, b), dtype=bool)
        reports: list[CostReport] = []
        pushed = 0
        for p in payloads:
            if p.n != n:
                raise ValueError(f"pushes of different lengths ({p.n} and {n}) cannot be summed")
            report, ids, dense = self.codec.parse(p, ctx)
            out += dense
            union[ids] = True
            pushed += int(ids.size)
            if report is not None:
                reports.append(report)
        self.n, self.union, self.union_block, self.step = n, union, b, ctx.step
        self.pushed = pushed
        if reports:
            self.last_reports = reports
            self.history.append((ctx.step, self.choose_block_size(reports)))
        return out

    def aggregate_on(
        self, payloads: list[Payload], ctx: CodecContext, device: torch.device
    ) -> torch.Tensor:
        """:meth:`aggregate` on a torch ``device`` (union, reports and ``B`` kept on the host)."""
        from psml_core.codecs.blocks_torch import dfs_aggregate

        return dfs_aggregate(self, payloads, ctx, device)

    def down_budget(self, n: int, block: int) -> int | None:
        """Blocks sent down under ``down_ratio`` (None when off)."""
        if self.codec.down_ratio is None:
            return None
        return block_budget(self.codec.down_ratio, n, block)

    def encode_down(self, agg: np.ndarray, ctx: CodecContext) -> Payload:
        """Records of the union's aggregated blocks, or of the top blocks with ``down_ratio``.

        If ``agg`` did not come from :meth:`aggregate` (no union of its length), the blocks with
        a non-zero value stand for the union. A tensor is encoded on its device.
        """
        if is_tensor(agg):
            from psml_core.codecs.blocks_torch import dfs_encode_down

            return dfs_encode_down(self, agg, ctx)
        agg = check_vector(agg)
        n, b = int(agg.size), self.block_for(ctx)
        nblk = block_count(n, b)
        if self.codec.down_ratio is None:
            if self.union is not None and self.union.size == nblk and self.n == n:
                sent = self.union
            else:
                sent = block_maxabs(agg, b) > 0
            buf = encode_blocks(agg, np.flatnonzero(sent), b)
        else:
            if not isinstance(self.residual, np.ndarray) or self.residual.size != n:
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
        return Payload(f"{self.codec.name}/down", n, seal(buf, ctx.step, down=True, n=n))

    def decode_down(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """The broadcast vector (zeros outside the blocks sent down).

        Raises:
            ValueError: for a buffer no set of block records has, or more blocks than
                ``down_ratio`` allows.
        """
        b = self.codec.resolve_block_size(ctx)
        body = unseal(payload.buffer, f"{self.codec.name}/down", payload.n, ctx.step, down=True)
        ids, dense = decode_blocks(body, payload.n, b)
        k = self.down_budget(payload.n, b)
        if k is not None and ids.size > k:
            raise ValueError(f"dfs down payload has {ids.size} blocks, down_ratio allows {k}")
        return dense

    def decode_down_on(
        self, payload: Payload, ctx: CodecContext, device: torch.device
    ) -> torch.Tensor:
        """:meth:`decode_down` onto a torch ``device``."""
        from psml_core.codecs.blocks_torch import dfs_decode_down

        return dfs_decode_down(self, payload, ctx, device)

    def shared(self) -> tuple[dict[str, Any], int]:
        """The next step's ``ctx.extra`` and its size per worker (see the class docstring).

        Before the first :meth:`encode_down` there is no mask: dynamic ``({"dfs_block_size":
        B}, 4)``, fixed ``({}, 0)``.
        """
        extra: dict[str, Any] = {}
        nbytes = 0
        if self.codec.dynamic:
            extra[KEY_BLOCK] = self.block_size
            if self.step is not None and self.reselect_due(self.step):
                extra[KEY_REPORT] = True
            nbytes += 4  # uint32: B | report request << 31
        if self.mask is not None and self.n is not None and self.codec.lam > 0:
            mask = remap_mask(self.mask, self.mask_block, self.block_size, self.n)
            extra[KEY_MASK] = mask
            nbytes += bitmap_bytes(mask.size)
        return extra, nbytes

    def reselect_due(self, step: int) -> bool:
        """Whether the server asks for cost reports after round ``step`` (every K rounds).

        The reports come with the pushes of ``step + 1``; the ``B`` they choose is used from
        ``step + 2``.
        """
        return self.codec.dynamic and step % self.codec.reselect_every == 0

    def union_estimate(self, reports: Sequence[CostReport], block: int) -> tuple[int, bool]:
        """``(|U_p S_p(B)|, whether the short last block is in it)`` for candidate ``block``.

        Exact when every report carries its mask at ``block`` (local reports: an oracle for
        analysis). From the wire (counts only) it is estimated from the last step's masks [ours]:
        with ``G`` the union of the last :meth:`aggregate` (on its grid ``B'``) and
        ``c_p(B)`` the reported counts,

        * overlap: the workers overlap at ``B`` as they did at ``B'``:
          ``ceil(|G| sum_p c_p(B) / sum_p c_p(B'))`` (``c_p(B')`` counted from the records);
        * cover: the union stays where the energy was: at most the blocks of ``B`` that overlap
          ``G`` (``G`` remapped to the grid of ``B``; few when the energy is clustered);

        ``U = min(overlap, cover)``, clamped to what the counts allow,
        ``max_p c_p(B) <= U <= min(nblk, sum_p c_p(B))``. At ``B = B'`` both give the exact
        ``|G|``. The last-block flag is exact: the union holds the short last block iff some
        worker's report keeps it.
        """
        n = reports[0].n
        if all(block in r.masks for r in reports):
            union = np.zeros(block_count(n, block), dtype=bool)
            for r in reports:
                union |= r.masks[block]
            return int(union.sum()), bool(union.size) and bool(union[-1])
        counts = [r.counts[block] for r in reports]
        lo, hi = max(counts), min(block_count(n, block), sum(counts))
        guess = hi  # nothing known: the workers' blocks are disjoint
        if self.union is not None and self.n == n:
            cover = int(remap_mask(self.union, self.union_block, block, n).sum())
            g = int(self.union.sum())
            overlap = -(-g * sum(counts) // self.pushed) if self.pushed else hi  # exact integers
            guess = min(cover, overlap)
        est = min(max(guess, lo), hi)
        return est, est > 0 and any(r.keeps_last[block] for r in reports)

    def predicted_total(self, reports: Sequence[CostReport], block: int) -> int:
        """``sum_p up_p(B) + P |U(B)| (4B + 4)`` (exact records, short last block too).

        ``|U(B)|`` from :meth:`union_estimate`, capped by the down budget with ``down_ratio``.
        """
        n = reports[0].n
        up = sum(r.costs[block] for r in reports)
        count, last = self.union_estimate(reports, block)
        k = self.down_budget(n, block)
        if k is not None and count > k:
            count, last = k, False  # the top blocks down: where they lie is not predicted
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
