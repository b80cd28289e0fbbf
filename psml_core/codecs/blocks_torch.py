"""The block codecs' torch paths: OmniReduce and DFS, worker and server, on the device.

Same payloads as the NumPy paths: OmniReduce's blocks are chosen by a per-block maximum (exact
on any device), DFS's by energies summed in the fixed order of :mod:`.reduce` on both paths,
and the top blocks by :func:`~psml_core.codecs.torch_select.topk_indices` (ties to the lower
block id, as on the host). The small per-block state both ends publish (DFS's block mask, the
union of the last aggregate, the cost reports) stays in NumPy on the host, as the server's
``shared`` state and the block-size choice read it; only the vectors and the records are on
the device. With DFS's ``energy`` cut, the cut over the few kept blocks is made on the host
with the NumPy code (its cumulative sum is sequential there).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from psml_core.codecs.base import CodecContext, Payload
from psml_core.codecs.blocks import block_budget, ids_to_mask, records_bytes, remap_mask
from psml_core.codecs.dfs_cost import CostReport
from psml_core.codecs.formats import block_count
from psml_core.codecs.integrity import unseal
from psml_core.codecs.torch_select import block_energy, block_maxabs, topk_indices
from psml_core.codecs.torch_wire import (
    blocks_sent,
    check_tensor,
    decode_blocks,
    encode_blocks,
    seal,
    to_device,
    unseal_to,
)

__all__ = [
    "DFSParams",
    "DFSServerState",
    "OmniParams",
    "OmniServerState",
    "dfs_aggregate",
    "dfs_decode_down",
    "dfs_encode",
    "dfs_encode_sent",
    "dfs_encode_down",
    "dfs_parse",
    "omni_aggregate",
    "omni_decode_down",
    "omni_encode",
    "omni_encode_down",
    "omni_records",
]


@runtime_checkable
class OmniParams(Protocol):
    """What OmniReduce's torch half reads of its codec.

    :class:`~psml_core.codecs.omnireduce.OmniReduceCodec`.
    """

    @property
    def name(self) -> str:
        """The codec's name, as the payload carries it."""

    @property
    def topk(self) -> bool:
        """Whether the codec pre-sparsifies by top-k."""

    @property
    def block_size(self) -> int:
        """Elements per block."""

    @property
    def threshold(self) -> float:
        """The block-keep bound on ``|x|``."""

    def kept_elements(self, n: int, ctx: CodecContext) -> int:
        """Elements the top-k pre-sparsification keeps of ``n``."""


@runtime_checkable
class OmniServerState(Protocol):
    """OmniReduce's server as its torch half sees it: the codec, and the union it keeps."""

    union: np.ndarray | None

    @property
    def codec(self) -> OmniParams:
        """The worker-side codec."""


@runtime_checkable
class DFSParams(Protocol):
    """What DFS's torch half reads of :class:`~psml_core.codecs.dfs.DFSCodec`."""

    @property
    def name(self) -> str:
        """The codec's name, as the payload carries it."""

    @property
    def lam(self) -> float:
        """The bonus factor of last step's blocks."""

    @property
    def energy(self) -> float | None:
        """The energy cut (None: none)."""

    @property
    def candidates(self) -> tuple[int, ...]:
        """The candidate block sizes."""

    @property
    def down_ratio(self) -> float | None:
        """The broadcast's block fraction (None: the union)."""

    @property
    def cost_report_bytes(self) -> int:
        """Bytes of a cost report."""

    def resolve_block_size(self, ctx: CodecContext) -> int:
        """``B`` in force at ``ctx``."""

    def budget(self, n: int, block: int, ctx: CodecContext) -> int:
        """Blocks sent of ``n`` at block size ``block``."""

    def previous_mask(self, ctx: CodecContext, n: int, block: int) -> np.ndarray | None:
        """Last step's mask from ``ctx`` (None when absent)."""

    def reports_due(self, ctx: CodecContext) -> bool:
        """Whether this push carries a cost report."""

    def check_report(self, report: CostReport, ctx: CodecContext) -> None:
        """Refuse a report that does not fit ``ctx``."""


@runtime_checkable
class DFSServerState(Protocol):
    """DFS's server as its torch half sees it, and the state it leaves there.

    :class:`~psml_core.codecs.dfs_server.DFSServer`; the residual lives on the device.
    """

    n: int | None
    step: int | None
    union: np.ndarray | None
    union_block: int
    pushed: int
    mask: np.ndarray | None
    mask_block: int
    residual: np.ndarray | torch.Tensor | None
    last_reports: list[CostReport]
    history: list[tuple[int, int]]

    @property
    def codec(self) -> DFSParams:
        """The worker-side codec."""

    def block_for(self, ctx: CodecContext) -> int:
        """``B`` of this step, checked against the published one."""

    def choose_block_size(self, reports: Sequence[CostReport]) -> int:
        """The cheapest ``B`` by the reports."""

    def down_budget(self, n: int, block: int) -> int | None:
        """Blocks the broadcast may send (None: no limit)."""


def _ids_of(mask: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.flatnonzero(mask)).to(device)


def _host_mask(ids: torch.Tensor, nblk: int) -> np.ndarray:
    return ids_to_mask(ids.cpu().numpy(), nblk)


# -------------------------------------------------------------------------------- OmniReduce


def omni_encode(codec: OmniParams, x: torch.Tensor, ctx: CodecContext) -> Payload:
    """:meth:`OmniReduceCodec.encode <psml_core.codecs.omnireduce.OmniReduceCodec.encode>`."""
    x = check_tensor(x)
    n = int(x.numel())
    if codec.topk:
        idx = topk_indices(x, codec.kept_elements(n, ctx))
        sparse = torch.zeros(n, dtype=torch.float32, device=x.device)
        sparse[idx] = x[idx]
        x = sparse
    keep = torch.nonzero(block_maxabs(x, codec.block_size) > codec.threshold).reshape(-1)
    return Payload(codec.name, n, seal(encode_blocks(x, keep, codec.block_size), ctx.step, n=n))


def omni_records(
    codec: OmniParams, payload: Payload, ctx: CodecContext, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """:meth:`OmniReduceCodec.decode_records` onto ``device``: ``(block ids, dense vector)``."""
    n, b = payload.n, codec.block_size
    body = unseal_to(payload.buffer, codec.name, n, ctx.step, device)
    ids, dense = decode_blocks(body, n, b)
    if ids.numel():
        peak = block_maxabs(dense, b)[ids]
        low = peak <= codec.threshold
        if bool(low.any()):
            bad = int(ids[torch.nonzero(low)[0, 0]])
            raise ValueError(
                f"block {bad} has every |x| <= threshold {codec.threshold}: "
                "omnireduce never sends such a block"
            )
    if codec.topk and int(torch.count_nonzero(dense)) > codec.kept_elements(n, ctx):
        raise ValueError("payload has more non-zeros than the top-k pre-sparsification keeps")
    return ids, dense


def omni_aggregate(
    server: OmniServerState, payloads: list[Payload], ctx: CodecContext, device: torch.device
) -> torch.Tensor:
    """:meth:`OmniReduceServer.aggregate` on the device; the union is kept on the host."""
    n = payloads[0].n
    nblk = block_count(n, server.codec.block_size)
    out = torch.zeros(n, dtype=torch.float32, device=device)
    union = torch.zeros(nblk, dtype=torch.bool, device=device)
    for p in payloads:
        if p.n != n:
            raise ValueError(f"pushes of different lengths ({p.n} and {n}) cannot be summed")
        ids, dense = omni_records(server.codec, p, ctx, device)
        out += dense
        union[ids] = True
    server.union = union.cpu().numpy()
    return out


def omni_encode_down(server: OmniServerState, agg: torch.Tensor, ctx: CodecContext) -> Payload:
    """:meth:`OmniReduceServer.encode_down` of a device aggregate."""
    agg = check_tensor(agg)
    n, b = int(agg.numel()), server.codec.block_size
    if server.union is not None and server.union.size == block_count(n, b):
        ids = _ids_of(server.union, agg.device)
    else:
        ids = torch.nonzero(block_maxabs(agg, b) > 0).reshape(-1)
    body = encode_blocks(agg, ids, b)
    return Payload(f"{server.codec.name}/down", n, seal(body, ctx.step, down=True, n=n))


def omni_decode_down(
    server: OmniServerState, payload: Payload, ctx: CodecContext, device: torch.device
) -> torch.Tensor:
    """:meth:`OmniReduceServer.decode_down` onto ``device``."""
    name = f"{server.codec.name}/down"
    body = unseal_to(payload.buffer, name, payload.n, ctx.step, device, down=True)
    return decode_blocks(body, payload.n, server.codec.block_size)[1]


# --------------------------------------------------------------------------------------- DFS


def dfs_select(
    codec: DFSParams, v: torch.Tensor, block: int, mask: np.ndarray | None, k: int
) -> torch.Tensor:
    """:meth:`DFSCodec.select <psml_core.codecs.dfs.DFSCodec.select>` on the device."""
    e = block_energy(v, block)
    if mask is None or codec.lam == 0:
        scores = e
    else:
        scores = torch.where(torch.from_numpy(mask).to(v.device), e * (1 + codec.lam), e)
    ids = topk_indices(scores, k)
    if codec.energy is None or ids.numel() == 0:
        return ids
    he, hs, hi = e.cpu().numpy(), scores.cpu().numpy(), ids.cpu().numpy()
    order = hi[np.lexsort((hi, -hs[hi]))]
    kept = np.cumsum(he[order])
    count = min(hi.size, int(np.searchsorted(kept, codec.energy * he.sum(), "left")) + 1)
    return torch.from_numpy(np.sort(order[:count])).to(v.device)


def _report(
    codec: DFSParams,
    v: torch.Tensor,
    ctx: CodecContext,
    block: int,
    prev: np.ndarray | None,
    ids_now: torch.Tensor,
) -> CostReport:
    n = int(v.numel())
    costs: dict[int, int] = {}
    masks: dict[int, np.ndarray] = {}
    for b in codec.candidates:
        if b == block:
            ids = ids_now
        else:
            mask = None if prev is None else remap_mask(prev, block, b, n)
            ids = dfs_select(codec, v, b, mask, codec.budget(n, b, ctx))
        nblk = block_count(n, b)
        host = ids.cpu().numpy()
        has_last = bool(host.size) and int(host[-1]) == nblk - 1
        costs[b] = records_bytes(n, b, int(host.size), has_last)
        masks[b] = ids_to_mask(host, nblk)
    return CostReport(n, costs, masks)


def dfs_encode(codec: DFSParams, x: torch.Tensor, ctx: CodecContext) -> Payload:
    """:meth:`DFSCodec.encode <psml_core.codecs.dfs.DFSCodec.encode>` on ``x``'s device."""
    return dfs_encode_sent(codec, x, ctx, sent=False)[0]


def dfs_encode_sent(
    codec: DFSParams, x: torch.Tensor, ctx: CodecContext, sent: bool = True
) -> tuple[Payload, torch.Tensor | None]:
    """:func:`dfs_encode`, and (``sent``) the vector its records decode to."""
    x = check_tensor(x)
    n = int(x.numel())
    b = codec.resolve_block_size(ctx)
    prev = codec.previous_mask(ctx, n, b)
    ids = dfs_select(codec, x, b, prev, codec.budget(n, b, ctx))
    records = encode_blocks(x, ids, b)
    head = _report(codec, x, ctx, b, prev, ids).to_bytes() if codec.reports_due(ctx) else b""
    payload = Payload(codec.name, n, seal(records, ctx.step, n=n, head=head))
    return payload, blocks_sent(x, ids, b) if sent else None


def dfs_parse(
    codec: DFSParams, payload: Payload, ctx: CodecContext, device: torch.device
) -> tuple[CostReport | None, torch.Tensor, torch.Tensor]:
    """:meth:`DFSCodec.parse <psml_core.codecs.dfs.DFSCodec.parse>` onto ``device``."""
    n = payload.n
    b = codec.resolve_block_size(ctx)
    buf: bytes | memoryview = unseal(payload.buffer, codec.name, n, ctx.step)
    report = None
    if codec.reports_due(ctx):
        m = codec.cost_report_bytes
        if len(buf) < m:
            raise ValueError(f"dfs payload of {len(buf)} bytes lacks its {m}-byte cost report")
        report = CostReport.from_bytes(memoryview(buf)[:m], n, codec.candidates)
        codec.check_report(report, ctx)
        buf = memoryview(buf)[m:]
    ids, dense = decode_blocks(to_device(buf, device), n, b)
    k = codec.budget(n, b, ctx)
    count = int(ids.numel())
    if codec.energy is None and count != k:
        raise ValueError(f"dfs payload has {count} blocks, the budget sends exactly {k}")
    if not min(k, 1) <= count <= k:
        raise ValueError(f"dfs payload has {count} blocks, the budget sends 1 to {k}")
    if report is not None and b in report.costs and report.costs[b] != len(buf):
        raise ValueError(
            f"dfs cost report says {report.costs[b]} bytes of records at B = {b}, {len(buf)} follow"
        )
    return report, ids, dense


def dfs_aggregate(
    server: DFSServerState, payloads: list[Payload], ctx: CodecContext, device: torch.device
) -> torch.Tensor:
    """:meth:`DFSServer.aggregate <psml_core.codecs.dfs_server.DFSServer.aggregate>`."""
    b = server.block_for(ctx)
    n = payloads[0].n
    out = torch.zeros(n, dtype=torch.float32, device=device)
    union = torch.zeros(block_count(n, b), dtype=torch.bool, device=device)
    reports: list[CostReport] = []
    pushed = 0
    for p in payloads:
        if p.n != n:
            raise ValueError(f"pushes of different lengths ({p.n} and {n}) cannot be summed")
        report, ids, dense = dfs_parse(server.codec, p, ctx, device)
        out += dense
        union[ids] = True
        pushed += int(ids.numel())
        if report is not None:
            reports.append(report)
    server.n, server.union, server.union_block, server.step = n, union.cpu().numpy(), b, ctx.step
    server.pushed = pushed
    if reports:
        server.last_reports = reports
        server.history.append((ctx.step, server.choose_block_size(reports)))
    return out


def dfs_encode_down(server: DFSServerState, agg: torch.Tensor, ctx: CodecContext) -> Payload:
    """:meth:`DFSServer.encode_down <psml_core.codecs.dfs_server.DFSServer.encode_down>`."""
    agg = check_tensor(agg)
    n, b = int(agg.numel()), server.block_for(ctx)
    nblk = block_count(n, b)
    codec = server.codec
    if codec.down_ratio is None:
        if server.union is not None and server.union.size == nblk and server.n == n:
            sent = server.union
            ids = _ids_of(sent, agg.device)
        else:
            ids = torch.nonzero(block_maxabs(agg, b) > 0).reshape(-1)
            sent = _host_mask(ids, nblk)
        body = encode_blocks(agg, ids, b)
    else:
        if isinstance(server.residual, np.ndarray):  # a host residual (a run moved here)
            server.residual = torch.from_numpy(server.residual).to(agg.device)
        if server.residual is None or server.residual.numel() != n:
            server.residual = torch.zeros(n, dtype=torch.float64, device=agg.device)
        u = agg.to(torch.float64) + server.residual
        live = torch.nonzero(block_maxabs(u, b) > 0).reshape(-1)
        k = min(block_budget(codec.down_ratio, n, b), int(live.numel()))
        ids = live[topk_indices(block_energy(u, b)[live], k)]
        sent = _host_mask(ids, nblk)
        u32 = u.to(torch.float32)
        elems = torch.repeat_interleave(torch.from_numpy(sent).to(agg.device), b)[:n]
        u[elems] -= u32[elems].to(torch.float64)
        server.residual = u
        body = encode_blocks(u32, ids, b)
    server.n, server.mask, server.mask_block = n, sent, b
    return Payload(f"{codec.name}/down", n, seal(body, ctx.step, down=True, n=n))


def dfs_decode_down(
    server: DFSServerState, payload: Payload, ctx: CodecContext, device: torch.device
) -> torch.Tensor:
    """:meth:`DFSServer.decode_down <psml_core.codecs.dfs_server.DFSServer.decode_down>`."""
    b = server.codec.resolve_block_size(ctx)
    name = f"{server.codec.name}/down"
    body = unseal_to(payload.buffer, name, payload.n, ctx.step, device, down=True)
    ids, dense = decode_blocks(body, payload.n, b)
    k = server.down_budget(payload.n, b)
    if k is not None and ids.numel() > k:
        raise ValueError(f"dfs down payload has {ids.numel()} blocks, down_ratio allows {k}")
    return dense
