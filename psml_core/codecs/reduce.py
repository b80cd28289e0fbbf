"""Sums in a fixed order, so that a NumPy path and a torch path give the same bits.

A float sum's rounding depends on the order of its additions, and NumPy (``einsum``, pairwise
``sum``) and torch (parallel reductions) add in different orders, so their sums can differ in
the last bit, and a selection made from them (DFS's top blocks by energy, QSGD's norm in the
wire bytes) can differ too. The codecs whose output depends on a sum use these instead, and
their torch paths use the same trees (:mod:`.torch_select`):

* :func:`halving_rows`: each row of a 2-D array summed by halving, first half plus second
  half, the row zero-padded at its end to a power of two (adding zeros is exact, so padding to
  any larger power of two gives the same bits);
* :func:`tree_sum`: a vector cut into rows of :data:`ROW` elements (zero-padded), each row
  summed by :func:`halving_rows`, and the row sums summed the same way until one is left.

Every step is an elementwise IEEE addition, so both libraries round identically. A halving
tree's error is at most about ``log2(width)`` roundings, no worse than NumPy's pairwise sum.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ROW", "halving_rows", "pow2_at_least", "tree_sum"]

ROW = 1024
"""Elements per row of :func:`tree_sum`."""


def pow2_at_least(w: int) -> int:
    """The smallest power of two that is at least ``w`` (1 for ``w <= 1``)."""
    return 1 if w <= 1 else 1 << (w - 1).bit_length()


def halving_rows(a: np.ndarray) -> np.ndarray:
    """Each row of ``a`` (2-D) summed by halving, in ``a``'s dtype (see the module)."""
    rows, w = a.shape
    if w == 0:
        return np.zeros(rows, dtype=a.dtype)
    p = pow2_at_least(w)
    if p != w:
        a = np.concatenate([a, np.zeros((rows, p - w), dtype=a.dtype)], axis=1)
    while a.shape[1] > 1:
        h = a.shape[1] // 2
        a = a[:, :h] + a[:, h:]
    return a[:, 0]


def tree_sum(v: np.ndarray) -> np.floating:
    """The sum of a 1-D array in the fixed order of the module, in its dtype."""
    v = np.asarray(v)
    if v.size == 0:
        return v.dtype.type(0)
    while v.size > 1:
        rows = -(-v.size // ROW)
        if rows * ROW != v.size:
            v = np.concatenate([v, np.zeros(rows * ROW - v.size, dtype=v.dtype)])
        v = halving_rows(v.reshape(rows, ROW))
    return v[0]
