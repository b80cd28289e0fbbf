"""DFS: joint data formatting and block sparsification (Yang et al., Computer Networks 2023).

The worker side; the server is :mod:`.dfs_server`, the cost report :mod:`.dfs_cost`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from psml_core.codecs.base import CODECS, Codec, CodecContext, Payload, check_vector, is_tensor
from psml_core.codecs.blocks import (
    block_budget,
    block_energy,
    check_block_size,
    check_fraction,
    ids_to_mask,
    records_bytes,
    remap_mask,
    top_blocks,
)
from psml_core.codecs.dfs_cost import KEY_BLOCK, KEY_MASK, KEY_REPORT, LAST_BLOCK_FLAG, CostReport
from psml_core.codecs.dfs_server import DFSServer
from psml_core.codecs.formats import block_count, decode_blocks, encode_blocks
from psml_core.codecs.integrity import seal, unseal

if TYPE_CHECKING:
    import torch

__all__ = [
    "DEFAULT_CANDIDATES",
    "KEY_BLOCK",
    "KEY_MASK",
    "KEY_REPORT",
    "CostReport",
    "DFSCodec",
    "DFSServer",
    "remap_mask",
]

DEFAULT_CANDIDATES: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)


def _opt_fraction(value: float | None, param: str) -> float | None:
    return None if value is None else check_fraction(value, param)


@CODECS.register("dfs")
class DFSCodec(Codec):
    """DFS: sparsify by whole blocks, chosen by block energy with an alignment bonus.

    Source: Yang, Zhao, Zhao, Xu, "DFS: Joint data formatting and sparsification for efficient
    communication in distributed machine learning", Computer Networks 229, 2023. The paper's text
    was not available; this is the suite's spec (``specs/methods.md`` section 2, tagged [ours]).

    Algorithm (worker, per step; ``v`` is the input — what was not sent is carried by a wrapper,
    so **DFS recipes must set** ``error_feedback: true`` (our design's ``e <- v - g_hat``,
    :class:`~psml_core.codecs.error_feedback.ErrorFeedback`) or, under SGD with momentum,
    ``momentum_correction: true`` (DGC's accumulated velocity,
    :class:`~psml_core.codecs.momentum_correction.MomentumCorrection`; see Convergence)):

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

    Everything a step needs besides the vector comes from ``ctx.extra``, the state the server
    published after the previous step (:meth:`DFSServer.shared`): ``"dfs_block_size"`` (``B``;
    absent = the ``block_size`` param, e.g. at step 0 or with ``dynamic = false``),
    ``"dfs_mask"`` (``M_{t-1}``, a bool array over the blocks of that ``B``; absent = no bonus)
    and ``"dfs_report"`` (True = this push carries a cost report). Encoder and decoder read the
    same three keys, so both agree on ``B`` and on the layout without any header.

    Wire format (up): ``[cost report] + block records + CRC-32C`` (the 4-byte trailer of
    :mod:`~psml_core.codecs.integrity` over the report and the records; the cost report counts
    the records' bytes only).

    * Block records (:func:`~psml_core.codecs.formats.encode_blocks`): each a little-endian uint32
      block id then the block's float32 values, ascending ids: ``|S| (4B + 4)`` bytes, with
      ``4r + 4`` for the short last block of ``r = n - (nblk - 1) B`` elements when it is kept.
    * Cost report, only when ``ctx.extra["dfs_report"]`` (dynamic mode): :class:`CostReport`
      words first, ``4 |candidates|`` bytes — one uint32 per candidate ``B`` (ascending): the
      number of blocks the worker would keep at that ``B`` under the same budget (the bonus mask
      remapped to that grid), bit 31 = the short last block is one of them. Its length is known
      from the B-set, so no header; ``wire_bytes`` counts it exactly.

    The decoder checks the record count against the budget (``k``, or 1 to ``k`` with
    ``energy``), every report word against the budget at its ``B``, and that the word at the
    ``B`` in force matches the records that follow.

    Dynamic block size (``dynamic``, the default), wired through payloads and shared state:
    after the rounds ``t = 0, K, 2K, ...`` the server asks for reports (``"dfs_report"``); the
    pushes of step ``t + 1`` carry them; :meth:`DFSServer.aggregate` parses them and picks the
    ``B`` of least predicted ``sum_p up_p(B) + P |U_p S_p(B)| (4B + 4)`` (the union estimated
    from the masks of that step, :meth:`DFSServer.union_estimate`), which :meth:`DFSServer.shared`
    publishes for step ``t + 2`` together with the mask remapped to the new grid. Steps 0 and 1
    use ``block_size``: no server state reaches the workers before the first broadcast.

    Server side: :class:`DFSServer` (per-block sum, the union's aggregated blocks sent down,
    optional down sparsification with a server residual, ``B`` + mask bitmap broadcast).

    Tuning: ``rho = 0.01`` matches the top-k baseline budget (also 0.001, 0.1); ``lam = 1`` is
    our design's default (0 turns the bonus off, and the mask is then not broadcast) but under a
    tight budget use ``lam = 0`` (see Convergence); ``reselect_every = 50`` is the cheap mode of the
    dynamic block size (a 4 |candidates|-byte report per push and the selection's compute every
    50 steps instead of every step); ``dynamic = false`` with a fixed ``block_size`` isolates the
    dynamic-B gain. Small ``B`` tracks the gradient's energy better, large ``B`` pays fewer ids;
    with a pure ``rho`` budget every ``B`` sends about ``rho n`` elements, so the choice is
    driven by the union (overlap between workers) and by the rounding of ``ceil(rho n / B) B``;
    the rule minimises bytes per step, not bytes to accuracy, and drifts to the largest ``B``
    that still fits the budget in one block. Choose the candidates so that a push keeps at
    least ~3 blocks, ``B <= rho n / 3`` (1% of a 2150-element shard: {2, 4, 8}; our design's
    {32, ..., 1024} suits shards of 10^5 elements and more). ``energy`` makes the kept counts,
    hence the reports, depend on how the gradient's energy is laid out.

    Convergence — at ``rho = 0.01`` use ``momentum_correction`` with ``lam = 0`` and small
    blocks. At ``B = 1`` and ``lam = 0`` DFS *is* element top-k (same kept set; with error
    feedback a digits-MLP run is bit-identical to ``topk_ef`` when ``ceil(rho n) = floor(rho
    n)``), so what follows is inherent in whole-block selection. A block is kept for its summed
    energy, so the kept set holds a smaller share of ``||v||^2`` than as many largest elements
    and the largest coordinates of the other blocks wait, to go out late in bursts; momentum at
    the server amplifies the bursts, and the alignment bonus (workers keep re-sending the
    blocks of the last broadcast) makes the others wait longer. Moving the momentum onto the
    workers (DGC's momentum correction and factor masking: a coordinate sent after ``T`` steps
    carries what momentum SGD would have applied over them, and its stale velocity is dropped)
    fixes the bursts, provided each push holds several blocks. Measured on the small tier's
    digits MLP (P = 8, 8 shards of ~2150 parameters, lr 0.05, momentum 0.9, 400 steps,
    target 0.93, evaluated every 20 steps, seeds 0/1/2; "reached" = first evaluation from which
    the accuracy stays >= 0.93; bytes up + down):

    * The ``dfs`` recipe (``rho 0.01``, momentum correction, ``lam 0``, B-set {2, 4, 8}, which
      settles on ``B = 8``: 3 blocks, 1.1% of a shard) reaches 0.93 at step 239/359/279 with
      14/21/16 MB (final 0.964/0.950/0.975); fixed ``B = 4``: 219/299/159, 14/19/10 MB. Element
      top-k with the same correction (``topk_mc``): 179/179/279, 12/12/19 MB; with error feedback
      and server momentum (``topk_ef``): 299/279/319, 18/17/20 MB; dense: 119/79/79, 132/88/88
      MB. Per step DFS sends 12% fewer bytes than ``topk_mc`` (23.5 vs 26.9 MB in 400 steps); at
      equal accuracy the difference is within the seed spread.
    * Error feedback with server momentum instead (same B-set, ``lam = 0``): 379/359/never.
      ``lam = 1`` with momentum correction: 399/359/399 (only at the last evaluations), with
      our design's B-set {32, ..., 1024}: never/never/359 (final 0.92/0.90/0.95); the old bare
      setting (error feedback, ``lam = 1``, the reference B-set) ends at 0.85/0.75/0.86.
    * On the smoke MLP (P = 4, 2 shards of 2405, lr 0.1) with 240 steps: corrected 0.95/0.96/0.95,
      error feedback 0.87/0.85/0.88, dense 0.97. There the B-set {4, ..., 32} settles on one
      block of 32 per push and does not converge (0.47/0.45/0.58 at step 80).
    * DGC's density warm-up (25%, 6.25%, 1.56%, then 1%, one stage per ~epoch of 5 steps) gave
      no gain (B-set {4, ..., 32}: 339/319/299 vs 319/279/279, 15% more bytes); clipping each
      shard's gradient to norm 0.1 helped the single-block smoke case (0.74/0.81/0.77) less
      than smaller blocks do. Neither is implemented.
    * Keeping an energy share instead (the former recipe: ``energy = 0.5`` with ``ratio`` capped
      at 0.3, error feedback, server momentum) reaches 0.93 at 159/139/139 with 68/60/60 MB,
      3-4x ``topk_ef``'s bytes to target and 6.9x its total (1.7e8 B): not our design's budget.

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
        if cands[-1] >= LAST_BLOCK_FLAG:
            raise ValueError(f"candidates must be below 2**31, got {cands[-1]}")
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

    def reports_due(self, ctx: CodecContext) -> bool:
        """Whether a push under ``ctx`` carries a cost report (dynamic and asked for)."""
        return self.dynamic and bool(ctx.extra.get(KEY_REPORT, False))

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

    def _report(
        self,
        v: np.ndarray,
        ctx: CodecContext,
        block: int,
        prev: np.ndarray | None,
        ids_now: np.ndarray | None = None,
    ) -> CostReport:
        """The selection at every candidate (``ids_now``: the one already made at ``block``)."""
        n = int(v.size)
        costs: dict[int, int] = {}
        masks: dict[int, np.ndarray] = {}
        for b in self.candidates:
            if b == block and ids_now is not None:
                ids = ids_now
            else:
                mask = None if prev is None else remap_mask(prev, block, b, n)
                ids = self.select(v, b, mask, self.budget(n, b, ctx))
            nblk = block_count(n, b)
            has_last = bool(ids.size) and int(ids[-1]) == nblk - 1
            costs[b] = records_bytes(n, b, int(ids.size), has_last)
            masks[b] = ids_to_mask(ids, nblk)
        return CostReport(n, costs, masks)

    def encode(self, x: np.ndarray, ctx: CodecContext) -> Payload:
        """Send the selected blocks of ``x`` as block records, after a cost report if asked.

        A tensor is encoded on its device (:mod:`.blocks_torch`), to the same bytes.
        """
        if is_tensor(x):
            from psml_core.codecs.blocks_torch import dfs_encode

            return dfs_encode(self, x, ctx)
        x = check_vector(x)
        n = int(x.size)
        b = self.resolve_block_size(ctx)
        prev = self.previous_mask(ctx, n, b)
        ids = self.select(x, b, prev, self.budget(n, b, ctx))
        records = encode_blocks(x, ids, b)
        if not self.reports_due(ctx):
            return Payload(self.name, n, seal(records, ctx.step, n=n))
        report = self._report(x, ctx, b, prev, ids)
        return Payload(self.name, n, seal(report.to_bytes() + records, ctx.step, n=n))

    def encode_sent_on(self, x: torch.Tensor, ctx: CodecContext) -> tuple[Payload, torch.Tensor]:
        """:meth:`encode`, and its blocks of ``x`` in place (what the payload decodes to)."""
        from psml_core.codecs.blocks_torch import dfs_encode_sent

        return self._sent_by(DFSCodec, dfs_encode_sent, x, ctx)

    def check_report(self, report: CostReport, ctx: CodecContext) -> None:
        """Validate a parsed report against the budget at each candidate ``B``.

        Raises:
            ValueError: for a count the budget cannot give (exactly ``k(B)`` without
                ``energy``, 1 to ``k(B)`` with it).
        """
        n = report.n
        for b, count in report.counts.items():
            k = self.budget(n, b, ctx)
            if (self.energy is None and count != k) or not min(k, 1) <= count <= k:
                raise ValueError(
                    f"dfs cost report counts {count} blocks of {b}; the budget keeps "
                    f"{k if self.energy is None else f'1 to {k}'}"
                )

    def parse(
        self, payload: Payload, ctx: CodecContext
    ) -> tuple[CostReport | None, np.ndarray, np.ndarray]:
        """Parse and validate an up payload: ``(cost report or None, block ids, dense vector)``.

        Needs nothing but ``ctx`` (``B``, whether a report leads the buffer, the budget).

        Raises:
            ValueError: for a length no report plus records has, bad ids or report words, a
                record count the budget cannot give, or a report that contradicts the records.
        """
        n = payload.n
        b = self.resolve_block_size(ctx)
        buf: bytes | memoryview = unseal(payload.buffer, self.name, n, ctx.step)
        report = None
        if self.reports_due(ctx):
            m = self.cost_report_bytes
            if len(buf) < m:
                raise ValueError(f"dfs payload of {len(buf)} bytes lacks its {m}-byte cost report")
            report = CostReport.from_bytes(memoryview(buf)[:m], n, self.candidates)
            self.check_report(report, ctx)
            buf = memoryview(buf)[m:]
        ids, dense = decode_blocks(buf, n, b)
        k = self.budget(n, b, ctx)
        if self.energy is None and ids.size != k:
            raise ValueError(f"dfs payload has {ids.size} blocks, the budget sends exactly {k}")
        if not min(k, 1) <= ids.size <= k:
            raise ValueError(f"dfs payload has {ids.size} blocks, the budget sends 1 to {k}")
        if report is not None and b in report.costs and report.costs[b] != len(buf):
            raise ValueError(
                f"dfs cost report says {report.costs[b]} bytes of records at B = {b}, "
                f"{len(buf)} follow"
            )
        return report, ids, dense

    def decode_records(self, payload: Payload, ctx: CodecContext) -> tuple[np.ndarray, np.ndarray]:
        """Parse and validate an up payload: ``(block ids, dense float32 vector)``.

        Raises:
            ValueError: as :meth:`parse`.
        """
        return self.parse(payload, ctx)[1:]

    def decode(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """The dense vector: the kept blocks' values, zeros elsewhere (a report is skipped)."""
        return self.parse(payload, ctx)[2]

    def decode_on(self, payload: Payload, ctx: CodecContext, device: torch.device) -> torch.Tensor:
        """:meth:`decode` onto a torch ``device``, parsed there."""
        from psml_core.codecs.blocks_torch import dfs_parse

        return dfs_parse(self, payload, ctx, device)[2]

    def predicted_costs(self, v: np.ndarray, ctx: CodecContext) -> CostReport:
        """Exact up bytes (and kept masks) at every candidate ``B`` under the same budget.

        What :meth:`encode` puts on the wire as the cost report, plus the masks (local only).
        ``M_{t-1}`` (on the grid of the ``B`` in force) is remapped to each candidate's grid for
        the alignment bonus. ``v`` must be what :meth:`encode` would see: with error feedback,
        the input plus the residual (``ErrorFeedback.compensated``).
        """
        v = check_vector(v)
        b = self.resolve_block_size(ctx)
        return self._report(v, ctx, b, self.previous_mask(ctx, int(v.size), b))

    def server(self) -> DFSServer:
        """The DFS server: block sums, union down, optional down residual, B + mask broadcast."""
        return DFSServer(self)
