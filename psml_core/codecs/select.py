"""Fast exact top-k selection by magnitude.

``np.argpartition`` over 25M elements runs near 0.2 GB/s, a hundred times below memory
bandwidth. :func:`topk_indices` instead estimates the k-th largest magnitude from a strided
sample, keeps the candidates at or above a safely lower threshold in one vectorised pass, and
finishes with an exact selection among the few candidates. The result is exact: the same set as
a full sort (ties at the threshold go to the lower indices); only the speed is heuristic.
"""

from __future__ import annotations

import numpy as np

__all__ = ["topk_indices"]

_SAMPLE = 65_536


def _exact_among(a: np.ndarray, cand: np.ndarray, k: int) -> np.ndarray:
    """The k largest of ``a[cand]`` (ties to the lower index), as ascending indices.

    ``cand`` is ascending, so the survivors of a filter over it are too: only ties at the k-th
    value (rare for real-valued data) need a merge.
    """
    vals = a[cand]
    kth = vals[np.argpartition(vals, vals.size - k)[vals.size - k]]
    keep = vals > kth
    above = cand[keep]
    need = k - above.size
    if need == 0:
        return above
    ties = cand[vals == kth][:need]  # lowest indices first
    return np.sort(np.concatenate([above, ties]))


def topk_indices(x: np.ndarray, k: int, scratch: np.ndarray | None = None) -> np.ndarray:
    """Indices of the ``k`` entries of largest magnitude, ascending; ties go to lower indices.

    Args:
        x: A 1-D float vector.
        k: How many to keep (clipped to [0, len(x)]).
        scratch: Optional buffer like ``x`` for ``|x|`` (reusing it saves the page faults of a
            fresh allocation on every call).
    """
    n = int(x.size)
    k = max(0, min(k, n))
    if k == 0:
        return np.empty(0, dtype=np.int64)
    if k == n:
        return np.arange(n, dtype=np.int64)
    if scratch is not None and scratch.shape == x.shape and scratch.dtype == x.dtype:
        a = np.abs(x, out=scratch)
    else:
        a = np.abs(x)
    if n <= 4 * _SAMPLE or k > n // 4:
        return _exact_among(a, np.arange(n), k)
    sample = a[:: n // _SAMPLE]
    # The sample quantile misplaces the k-th magnitude by about sqrt(p (1 - p) / m) of n
    # (binomial error, m = sample size): aim 4 such errors below it, so that >= k candidates
    # survive almost always; lower the threshold and retry when they do not.
    p = k / n
    margin = 4.0 * np.sqrt(p * (1.0 - p) / sample.size) + 1.0 / sample.size
    want = min(1.0, p + margin)
    for _ in range(4):
        pos = max(0, int(sample.size * (1.0 - want)) - 1)
        t = np.partition(sample, pos)[pos]
        cand = np.flatnonzero(a >= t)
        if cand.size >= k:
            return _exact_among(a, cand, k)
        want = min(1.0, want + 4 * margin)
    return _exact_among(a, np.arange(n), k)
