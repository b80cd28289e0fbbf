"""Selections and reductions on a torch device that equal their NumPy twins exactly.

* :func:`topk_indices` keeps the same set as :func:`psml_core.codecs.select.topk_indices`:
  the ``k`` largest magnitudes, ties at the ``k``-th going to the **lower indices**, returned
  ascending. It reads the vector a few times, not ``log n`` times: a threshold from a strided
  sample keeps a safe superset of candidates (one compare and one compaction over the vector),
  and a stable descending sort of the few candidates (ascending indices, so equal magnitudes
  stay in index order) takes the first ``k``. A short candidate set lowers the threshold and
  tries again, as on the host. A vector too short to sample takes the ``k``-th largest
  magnitude (``torch.topk``) as its threshold, so only the candidates are sorted.
* :func:`halving_rows`, :func:`tree_sum`: the fixed-order sums of :mod:`.reduce`.
* :func:`block_energy`, :func:`block_maxabs`: :mod:`.blocks`' per-block reductions.
"""

from __future__ import annotations

import math

import torch

from psml_core.codecs.formats import block_count
from psml_core.codecs.reduce import ROW, pow2_at_least

__all__ = [
    "block_energy",
    "block_maxabs",
    "halving_rows",
    "top_in_order",
    "topk_indices",
    "tree_sum",
]

_SAMPLE = 65_536  # as psml_core.codecs.select


def top_in_order(vals: torch.Tensor, cand: torch.Tensor, k: int) -> torch.Tensor:
    """The ``k`` of ``cand`` (ascending indices) with the largest ``vals``; ties to lower ones.

    A stable sort keeps equal values in ``cand``'s order, so the first ``k`` after a descending
    stable sort are the largest with ties broken towards the lower index. Ascending result.
    """
    order = torch.sort(vals, descending=True, stable=True).indices[:k]
    return torch.sort(cand[order]).values


def topk_indices(x: torch.Tensor, k: int) -> torch.Tensor:
    """Indices (int64, ascending) of the ``k`` entries of largest ``|x|``; ties to lower indices."""
    n = int(x.numel())
    k = max(0, min(k, n))
    device = x.device
    if k == 0:
        return torch.empty(0, dtype=torch.int64, device=device)
    if k == n:
        return torch.arange(n, dtype=torch.int64, device=device)
    a = torch.abs(x)
    if k > n // 4:
        return top_in_order(a, torch.arange(n, device=device), k)
    if n <= 4 * _SAMPLE:  # too short to sample: the k-th largest magnitude is the threshold
        cand = torch.nonzero(a >= torch.topk(a, k, sorted=False).values.min()).reshape(-1)
        return top_in_order(a[cand], cand, k)
    sample = a[:: n // _SAMPLE]
    m = int(sample.numel())
    p = k / n
    margin = 4.0 * math.sqrt(p * (1.0 - p) / m) + 1.0 / m
    want = min(1.0, p + margin)
    ordered = torch.sort(sample).values
    for _ in range(4):
        pos = max(0, int(m * (1.0 - want)) - 1)
        cand = torch.nonzero(a >= ordered[pos]).reshape(-1)
        if cand.numel() >= k:
            return top_in_order(a[cand], cand, k)
        want = min(1.0, want + 4 * margin)
    return top_in_order(a, torch.arange(n, device=device), k)


def halving_rows(a: torch.Tensor) -> torch.Tensor:
    """:func:`psml_core.codecs.reduce.halving_rows` on the device."""
    rows, w = a.shape
    if w == 0:
        return torch.zeros(rows, dtype=a.dtype, device=a.device)
    p = pow2_at_least(w)
    if p != w:
        a = torch.cat([a, torch.zeros((rows, p - w), dtype=a.dtype, device=a.device)], dim=1)
    while a.shape[1] > 1:
        h = a.shape[1] // 2
        a = a[:, :h] + a[:, h:]
    return a[:, 0]


def tree_sum(v: torch.Tensor) -> torch.Tensor:
    """:func:`psml_core.codecs.reduce.tree_sum` on the device: a 0-d tensor of ``v``'s dtype."""
    if v.numel() == 0:
        return torch.zeros((), dtype=v.dtype, device=v.device)
    while v.numel() > 1:
        rows = -(-v.numel() // ROW)
        if rows * ROW != v.numel():
            v = torch.cat([v, torch.zeros(rows * ROW - v.numel(), dtype=v.dtype, device=v.device)])
        v = halving_rows(v.view(rows, ROW))
    return v[0]


def _split(x: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    full = (x.numel() // block) * block
    return x[:full].view(-1, block), x[full:]


def _energies(full: torch.Tensor, tail: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    parts = []
    if full.shape[0]:
        f = full.to(dtype)
        parts.append(halving_rows(f * f))
    if tail.numel():
        t = tail.to(dtype)
        parts.append(halving_rows((t * t).view(1, -1)))
    return torch.cat(parts).to(torch.float64)


def block_energy(x: torch.Tensor, block: int) -> torch.Tensor:
    """:func:`psml_core.codecs.blocks.block_energy` on the device (float64, bit for bit)."""
    if x.numel() == 0:
        return torch.zeros(0, dtype=torch.float64, device=x.device)
    full, tail = _split(x, block)
    if x.dtype == torch.float64:
        return _energies(full, tail, torch.float64)
    out = _energies(full, tail, torch.float32)
    if not bool(torch.isfinite(out).all()):
        out = _energies(full, tail, torch.float64)
    return out


def block_maxabs(x: torch.Tensor, block: int) -> torch.Tensor:
    """:func:`psml_core.codecs.blocks.block_maxabs` on the device (exact: a max)."""
    nblk = block_count(int(x.numel()), block)
    full, tail = _split(x, block)
    parts = []
    if full.shape[0]:
        parts.append(torch.abs(full).amax(dim=1))
    if tail.numel():
        parts.append(torch.abs(tail).amax().view(1))
    out = torch.cat(parts) if parts else torch.zeros(0, dtype=x.dtype, device=x.device)
    assert out.numel() == nblk
    return out
