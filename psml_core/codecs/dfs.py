"""DFS: joint data formatting and block sparsification (Yang et al., Computer Networks 2023)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

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

# Keys of the state the server publishes (``ctx.extra`` of the workers' next push).
KEY_BLOCK = "dfs_block_size"
KEY_MASK = "dfs_mask"
KEY_REPORT = "dfs_report"

_LAST = 1 << 31  # report word flag: the kept set holds the short last block
_U32 = np.dtype("<u4")


def _short_tail(n: int, block: int) -> int:
    """Elements missing from the last block: ``B - r`` (0 when ``B`` divides ``n``)."""
    nblk = block_count(n, block)
    return 0 if nblk == 0 else nblk * block - n


def cost_word(n: int, block: int, cost: int) -> int:
    """The report word of an exact up cost: ``|S|``, plus bit 31 if the short last block is kept.

    Inverse of :func:`word_cost`. ``cost`` is ``|S| (4B + 4)`` less ``4 (B - r)`` when the short
    last block (``r < B`` elements) is one of the ``|S|`` records; the two cases never give the
    same residue modulo ``4B + 4``, so the word is unique.

    Raises:
        ValueError: for a cost no set of block records of an ``n``-vector has.
    """
    full = 4 * block + 4
    if cost < 0:
        raise ValueError(f"a cost of {cost} bytes is negative")
    short = _short_tail(n, block)
    count, last = (cost // full, False) if cost % full == 0 else ((cost + 4 * short) // full, True)
    if last and (short == 0 or (cost + 4 * short) % full):
        raise ValueError(f"{cost} bytes are no set of {block}-element block records (n = {n})")
    if count > block_count(n, block) or count >= _LAST:
        raise ValueError(f"{cost} bytes name more blocks of {block} than an {n}-vector has")
    return count | (_LAST if last else 0)


def word_cost(n: int, block: int, word: int) -> int:
    """Exact up bytes of a report word (:func:`cost_word`), after checking it against ``n``.

    Raises:
        ValueError: for more blocks than the vector has, or a last-block flag that cannot be
            (no short last block, no block at all, or every block kept without the flag).
    """
    count, last = word & (_LAST - 1), bool(word & _LAST)
    nblk = block_count(n, block)
    short = _short_tail(n, block)
    if count > nblk:
        raise ValueError(f"a report counts {count} blocks of {block}; the vector has {nblk}")
    if last and (short == 0 or count == 0):
        raise ValueError(f"a report flags a short last block of {block} that cannot be sent")
    if short and count == nblk and nblk and not last:
        raise ValueError(f"a report keeps all {nblk} blocks of {block} but not the last one")
    return records_bytes(n, block, count, last)


@dataclass(frozen=True)
class CostReport:
    """A worker's predicted up cost at every candidate block size (dynamic block size, step 1).

    On the wire (:meth:`to_bytes`) a report is one little-endian uint32 word per candidate
    ``B``, in ascending ``B``: the number of blocks ``|S_p(B)|`` the worker would keep, with bit
    31 set when the short last block (``r = n - (nblk - 1) B < B`` elements) is one of them —
    so the exact cost ``|S_p(B)| (4B + 4) - [last] 4 (B - r)`` follows from the word
    (:func:`word_cost`).
    No header: the candidates and ``n`` are known to both ends, so the length is ``4 |B-set|``.

    Attributes:
        n: Length of the vector the report was made on.
        costs: Candidate ``B`` -> exact up bytes of the block records the worker would send.
        masks: Candidate ``B`` -> the kept block mask ``S_p(B)``. Local only (empty for a report
            parsed from the wire): with masks the server computes the exact union (an oracle
            for analysis); without, it estimates the union (:meth:`DFSServer.union_estimate`).
    """

    n: int
    costs: dict[int, int]
    masks: dict[int, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    @property
    def wire_bytes(self) -> int:
        """Size of the report on the wire: one uint32 per candidate."""
        return 4 * len(self.costs)

    @property
    def counts(self) -> dict[int, int]:
        """Candidate ``B`` -> ``|S_p(B)|``, the number of kept blocks."""
        return {b: cost_word(self.n, b, c) & (_LAST - 1) for b, c in self.costs.items()}

    @property
    def keeps_last(self) -> dict[int, bool]:
        """Candidate ``B`` -> whether the short last block is kept (False when ``B | n``)."""
        return {b: bool(cost_word(self.n, b, c) & _LAST) for b, c in self.costs.items()}

    def to_bytes(self) -> bytes:
        """The wire form: a uint32 word per candidate, ascending ``B`` (:func:`cost_word`)."""
        words = [cost_word(self.n, b, self.costs[b]) for b in sorted(self.costs)]
        return np.array(words, dtype=_U32).tobytes()

    @classmethod
    def from_bytes(cls, buf: bytes | memoryview, n: int, candidates: Sequence[int]) -> CostReport:
        """Parse :meth:`to_bytes` output for an ``n``-vector and the ascending ``candidates``.

        Raises:
            ValueError: for a length other than ``4 |candidates|`` or an impossible word.
        """
        if len(buf) != 4 * len(candidates):
            raise ValueError(
                f"a cost report over {len(candidates)} block sizes takes "
                f"{4 * len(candidates)} bytes, got {len(buf)}"
            )
        words = np.frombuffer(buf, dtype=_U32, count=len(candidates))
        return cls(n, {b: word_cost(n, b, int(w)) for b, w in zip(candidates, words, strict=True)})


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

    Wire format (up): ``[cost report] + block records``.

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
        if cands[-1] >= _LAST:
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
        """Send the selected blocks of ``x`` as block records, after a cost report if asked."""
        x = check_vector(x)
        n = int(x.size)
        b = self.resolve_block_size(ctx)
        prev = self.previous_mask(ctx, n, b)
        ids = self.select(x, b, prev, self.budget(n, b, ctx))
        records = encode_blocks(x, ids, b)
        if not self.reports_due(ctx):
            return Payload(self.name, n, records)
        report = self._report(x, ctx, b, prev, ids)
        return Payload(self.name, n, report.to_bytes() + records)

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
        buf: bytes | memoryview = payload.buffer
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


class DFSServer(ServerCodec):
    """The DFS parameter server: aggregate per block, send the union down, publish ``B`` and mask.

    Per step ``t`` (``B_t`` from ``ctx``, as on the workers):

    1. :meth:`aggregate`: the sum of the pushes (float32, summed in the order given) and
       ``G_t``, the union of the workers' blocks; if the pushes carry cost reports, the choice
       of ``B_{t+1}`` (:meth:`choose_block_size`).
    2. :meth:`encode_down`: block records of the aggregate (sums; the engine divides by ``P``)
       over ``G_t``: ``|G_t| (4B + 4)`` bytes per worker (``4r + 4`` for a short last block),
       i.e. ``P |G_t| (4B + 4)`` in all. With ``down_ratio``: ``u = aggregate + residual``
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

    codec: DFSCodec

    def __init__(self, codec: DFSCodec) -> None:
        super().__init__(codec)
        self.block_size: int = codec.block_size  # B of the next step (published by shared)
        self.n: int | None = None
        self.union: np.ndarray | None = None  # G_t of the last aggregate, on union_block's grid
        self.union_block: int = codec.block_size
        self.pushed: int = 0  # sum_p |S_p| of the last aggregate (blocks pushed, with repeats)
        self.mask: np.ndarray | None = None  # M_t, the blocks sent down, on mask_block's grid
        self.mask_block: int = codec.block_size
        self.residual: np.ndarray | None = None
        self.step: int | None = None  # ctx.step of the last aggregate
        self.last_costs: dict[int, int] = {}
        self.last_reports: list[CostReport] = []
        self.history: list[tuple[int, int]] = []  # (step of the reports, B chosen)

    def _block(self, ctx: CodecContext) -> int:
        b = self.codec.resolve_block_size(ctx)
        if KEY_BLOCK not in ctx.extra and b != self.block_size:
            raise ValueError(
                f"ctx.extra lacks {KEY_BLOCK!r} but the server's block size is {self.block_size}: "
                "pass DFSServer.shared() into the step's context"
            )
        return b

    def aggregate(self, payloads: list[Payload], ctx: CodecContext) -> np.ndarray:
        """The sum of the pushes; remembers ``G_t``; picks the next ``B`` if they report costs."""
        b = self._block(ctx)
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
