"""DFS's cost model on the wire: the cost report a worker sends when the server asks.

A report holds, per candidate block size ``B``, the up bytes the worker's push would have
taken at ``B`` (a uint32 word each, with a flag for the short last block); the server adds them
to its estimate of the down bytes and keeps the cheapest ``B``
(:meth:`~psml_core.codecs.dfs_server.DFSServer.choose_block_size`). The keys of the state the
server publishes to the workers are here too, as both sides read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from psml_core.codecs.blocks import records_bytes
from psml_core.codecs.formats import block_count

__all__ = [
    "KEY_BLOCK",
    "KEY_MASK",
    "KEY_REPORT",
    "LAST_BLOCK_FLAG",
    "CostReport",
    "cost_word",
    "word_cost",
]

# Keys of the state the server publishes (``ctx.extra`` of the workers' next push).
KEY_BLOCK = "dfs_block_size"
KEY_MASK = "dfs_mask"
KEY_REPORT = "dfs_report"

LAST_BLOCK_FLAG = 1 << 31  # report word flag: the kept set holds the short last block
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
    if count > block_count(n, block) or count >= LAST_BLOCK_FLAG:
        raise ValueError(f"{cost} bytes name more blocks of {block} than an {n}-vector has")
    return count | (LAST_BLOCK_FLAG if last else 0)


def word_cost(n: int, block: int, word: int) -> int:
    """Exact up bytes of a report word (:func:`cost_word`), after checking it against ``n``.

    Raises:
        ValueError: for more blocks than the vector has, or a last-block flag that cannot be
            (no short last block, no block at all, or every block kept without the flag).
    """
    count, last = word & (LAST_BLOCK_FLAG - 1), bool(word & LAST_BLOCK_FLAG)
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
        return {b: cost_word(self.n, b, c) & (LAST_BLOCK_FLAG - 1) for b, c in self.costs.items()}

    @property
    def keeps_last(self) -> dict[int, bool]:
        """Candidate ``B`` -> whether the short last block is kept (False when ``B | n``)."""
        return {b: bool(cost_word(self.n, b, c) & LAST_BLOCK_FLAG) for b, c in self.costs.items()}

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
