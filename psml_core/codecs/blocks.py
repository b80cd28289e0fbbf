"""Vectorised block helpers shared by the block codecs (OmniReduce, DFS).

A vector of ``n`` elements is cut into ``nblk = ceil(n / B)`` blocks of ``B`` elements; the last
block has ``r = n - (nblk - 1) B`` elements (``r = B`` when ``B`` divides ``n``). Every helper
works on the ``(n // B, B)`` reshape of the full blocks plus, when ``r < B``, the short tail — no
Python loop over blocks or elements. Block ids are ``int64`` arrays, block masks boolean arrays
of length ``nblk``.

Wire sizes follow :func:`psml_core.codecs.formats.encode_blocks`: a record is a 4-byte block id
plus its values, ``4 + 4B`` bytes, or ``4 + 4r`` for the short last block.
"""

from __future__ import annotations

import numpy as np

from psml_core.codecs.formats import block_count
from psml_core.codecs.reduce import halving_rows
from psml_core.codecs.select import topk_indices

__all__ = [
    "block_budget",
    "block_energy",
    "block_maxabs",
    "check_block_size",
    "check_fraction",
    "expand_mask",
    "ids_to_mask",
    "records_bytes",
    "remap_mask",
    "top_blocks",
]

_CHUNK = 1 << 16  # elements per chunk of the chunked passes: cache-resident temporaries


def check_block_size(value: object, param: str = "block_size") -> int:
    """A block size parameter: an int >= 1 (not a bool). Raises ValueError naming ``param``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{param} must be an integer >= 1, got {value!r}")
    return int(value)


def check_fraction(value: object, param: str) -> float:
    """A fraction parameter in (0, 1]. Raises ValueError naming ``param`` and the range."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise ValueError(f"{param} must be a number in (0, 1], got {value!r}")
    v = float(value)
    if not 0.0 < v <= 1.0:
        raise ValueError(f"{param} must be in (0, 1], got {value!r}")
    return v


def records_bytes(n: int, block: int, nblocks: int, has_last: bool) -> int:
    """Exact bytes of ``nblocks`` block records, ``has_last`` telling if the last block is one.

    ``nblocks (4 + 4B)``, with ``4 + 4r`` instead of ``4 + 4B`` for the short last block.
    """
    full = 4 + 4 * block
    if nblocks == 0:
        return 0
    nblk = block_count(n, block)
    tail = n - (nblk - 1) * block
    return nblocks * full - (4 * (block - tail) if has_last else 0)


def ids_to_mask(ids: np.ndarray, nblk: int) -> np.ndarray:
    """A boolean block mask with ``ids`` set."""
    mask = np.zeros(nblk, dtype=bool)
    mask[ids] = True
    return mask


def expand_mask(mask: np.ndarray, block: int, n: int) -> np.ndarray:
    """A block mask as an element mask of length ``n``."""
    return np.repeat(mask, block)[:n]


def _split(x: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """(full blocks as an (n // B, B) view, the short tail, possibly empty)."""
    full = (x.size // block) * block
    return x[:full].reshape(-1, block), x[full:]


def block_energy(x: np.ndarray, block: int) -> np.ndarray:
    """Per-block energy ``||x_b||^2`` as float64 (length ``nblk``), summed in a fixed order.

    float32 input: the float32 squares of each block summed by halving
    (:func:`~psml_core.codecs.reduce.halving_rows`), the order the torch path
    (:func:`~psml_core.codecs.torch_select.block_energy`) uses too, so both select the same
    blocks bit for bit; if a square or a sum overflows float32, every energy is recomputed from
    float64 squares (exact) by the same tree. float32 sums carry a relative error of about
    ``log2(B) * 6e-8``, and squares below float32's smallest subnormal (``|x| < ~4e-23``) count
    as 0. float64 input is squared and summed in float64.
    """
    nblk = block_count(int(x.size), block)
    out = np.empty(nblk, dtype=np.float64)
    full, tail = _split(x, block)
    wide = x.dtype == np.float64
    with np.errstate(over="ignore"):
        _energies(full, tail, out, np.float64 if wide else np.float32)
    if not wide and not np.isfinite(out).all():
        _energies(full, tail, out, np.float64)
    return out


def _energies(full: np.ndarray, tail: np.ndarray, out: np.ndarray, dtype: type) -> None:
    """Halving-tree sums of the squares of the full blocks and of the tail, in ``dtype``."""
    m = full.shape[0]
    if m:
        f = full.astype(dtype, copy=False)
        out[:m] = halving_rows(f * f)
    if tail.size:
        t = tail.astype(dtype, copy=False)
        out[m] = halving_rows((t * t)[None, :])[0]


def block_maxabs(x: np.ndarray, block: int) -> np.ndarray:
    """Per-block ``max |x_b|`` (length ``nblk``, dtype of ``x``), in cache-sized chunks."""
    nblk = block_count(int(x.size), block)
    out = np.empty(nblk, dtype=x.dtype)
    full, tail = _split(x, block)
    m = full.shape[0]
    if m:
        rows = max(1, _CHUNK // block)
        buf = np.empty((min(rows, m), block), dtype=x.dtype)
        for i in range(0, m, rows):
            c = full[i : i + rows]
            b = buf[: c.shape[0]]
            np.abs(c, out=b)
            np.max(b, axis=1, out=out[i : i + b.shape[0]])
    if tail.size:
        out[m] = np.abs(tail).max()
    return out


def block_budget(ratio: float, n: int, block: int) -> int:
    """Fewest blocks ``k`` with ``k B >= ratio n``: at least 1 when ``n > 0``, at most ``nblk``.

    Computed exactly against the float ``ratio * n`` (no off-by-one from rounding ``/``).
    """
    nblk = block_count(n, block)
    if nblk == 0:
        return 0
    target = ratio * n
    k = int(np.ceil(target / block))
    while k > 0 and (k - 1) * block >= target:
        k -= 1
    while k * block < target:
        k += 1
    return max(1, min(k, nblk))


def top_blocks(scores: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` blocks of largest (non-negative) score, ascending; ties go to lower ids."""
    return topk_indices(scores, k)


def remap_mask(mask: np.ndarray, old_block: int, new_block: int, n: int) -> np.ndarray:
    """A block mask on the ``old_block`` grid moved to the ``new_block`` grid of ``n`` elements.

    A new block is in the result when it overlaps (shares an element with) an old block that is
    in ``mask``. Vectorised over the set blocks with a difference array.

    Raises:
        ValueError: if ``mask`` does not have one entry per old block.
    """
    old_nblk = block_count(n, old_block)
    new_nblk = block_count(n, new_block)
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != (old_nblk,):
        raise ValueError(
            f"block mask of shape {mask.shape} does not match {old_nblk} blocks of {old_block}"
        )
    if old_block == new_block:
        return mask.copy()
    ids = np.flatnonzero(mask)
    first = ids * old_block // new_block
    last = (np.minimum((ids + 1) * old_block, n) - 1) // new_block
    diff = np.bincount(first, minlength=new_nblk + 1) - np.bincount(
        last + 1, minlength=new_nblk + 1
    )
    return np.cumsum(diff[:new_nblk]) > 0
