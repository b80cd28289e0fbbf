"""Sparsity analysis of a data set, as seen by sample/parameter placement (method jpdc).

:func:`analyze` summarises the training rows: non-zeros per row, feature popularity (how many
rows touch each feature, and how Zipf-like that is), and how much the feature sets ``N_p`` of
``workers`` workers overlap when rows are dealt out at random. ``sum_p |N_p| / |union|`` (the
"replication factor") is the baseline that jpdc's data partition tries to bring down: with
parameters sharded over the workers' machines, every extra copy of a feature in some ``N_p``
is a remote pull and push per iteration.

Dense data is treated by its non-zeros, as a boolean mask: never as CSR, whose index arrays
would take several times a dense image set's memory (CIFAR-10: 150M non-zeros). Sparse data is
vectorised with ``scipy.sparse``.

jpdc hashes the features before it partitions (:mod:`psml_core.data.hashing`), and hashing
makes the rows denser and more overlapping. Given the recipes' ``hashing`` blocks,
:func:`analyze` also reports every statistic on the hashed rows, next to the raw ones
(:func:`analyze_hashed`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from psml_core.atomic import write_json
from psml_core.config import HashingSpec
from psml_core.data.base import Dataset, Matrix
from psml_core.data.hashing import hash_features
from psml_core.errors import ConfigError

__all__ = [
    "FIT_MIN_COUNT",
    "FIT_MIN_RANK",
    "analyze",
    "analyze_hashed",
    "feature_counts",
    "fit_zipf_exponent",
    "worker_overlap",
    "write_analysis",
]

FIT_MIN_RANK = 10
"""Zipf fit starts at this rank: the head saturates (a feature is in at most every row)."""
FIT_MIN_COUNT = 5
"""Zipf fit stops at the last rank with at least this many rows: small counts are mostly noise."""
_FIT_MIN_POINTS = 3


Pattern = sp.csr_matrix | np.ndarray
"""A non-zero pattern: canonical CSR for sparse data, a boolean array for dense data."""


def _binary_csr(X: sp.spmatrix) -> sp.csr_matrix:
    """CSR view of a sparse matrix's non-zeros: canonical (sorted, no duplicates, no zeros)."""
    M = sp.csr_matrix(X, copy=True)
    M.sum_duplicates()
    M.eliminate_zeros()
    return M


def _pattern(X: Matrix) -> Pattern:
    """The non-zero pattern of ``X``: canonical CSR if sparse, else the boolean ``X != 0``."""
    if sp.issparse(X):
        return _binary_csr(X)
    return np.asarray(X) != 0


def _row_nnz(P: Pattern) -> np.ndarray:
    """Non-zeros per row of a pattern (int64)."""
    if isinstance(P, np.ndarray):
        return P.sum(axis=1, dtype=np.int64)
    return np.diff(P.indptr).astype(np.int64)


def _feature_nnz(P: Pattern) -> np.ndarray:
    """Rows in which each feature is non-zero (int64)."""
    if isinstance(P, np.ndarray):
        return P.sum(axis=0, dtype=np.int64)
    return np.bincount(P.indices, minlength=P.shape[1]).astype(np.int64)


def feature_counts(X: Matrix) -> np.ndarray:
    """Number of rows in which each feature is non-zero.

    Args:
        X: Dense or sparse (n, d) matrix.

    Returns:
        int64 array of length d.
    """
    return _feature_nnz(_pattern(X))


def fit_zipf_exponent(
    counts: np.ndarray, min_rank: int = FIT_MIN_RANK, min_count: int = FIT_MIN_COUNT
) -> dict[str, Any]:
    """Fit ``count ~ C * rank^-s`` by least squares on ``log(count)`` vs ``log(rank)``.

    Features are ranked by decreasing count (rank 1 = most popular). The fit uses every rank
    ``r >= min_rank`` whose count is ``>= min_count``, one point per feature. Below
    ``min_rank`` the document frequency saturates near the row count; counts below
    ``min_count`` are dominated by sampling noise and ties, which flatten the curve.

    Args:
        counts: Rows per feature (any order; zeros are ignored).
        min_rank: First rank used.
        min_count: Smallest count used.

    Returns:
        ``{"exponent": s or None, "rank_min", "rank_max", "points", "r2"}``; ``exponent`` is
        None when fewer than 3 points are in range.
    """
    c = np.sort(np.asarray(counts)[np.asarray(counts) > 0])[::-1].astype(np.float64)
    ranks = np.arange(1, c.size + 1, dtype=np.float64)
    mask = (ranks >= min_rank) & (c >= min_count)
    out: dict[str, Any] = {"exponent": None, "rank_min": None, "rank_max": None, "r2": None}
    out["points"] = int(mask.sum())
    if out["points"] < _FIT_MIN_POINTS:
        return out
    x, y = np.log(ranks[mask]), np.log(c[mask])
    slope, intercept = np.polyfit(x, y, 1)
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    ss_res = float(np.sum((y - (slope * x + intercept)) ** 2))
    out.update(
        exponent=float(-slope),
        rank_min=int(ranks[mask][0]),
        rank_max=int(ranks[mask][-1]),
        r2=1.0 - ss_res / ss_tot if ss_tot > 0 else None,
    )
    return out


def _popularity(counts: np.ndarray, nnz: int) -> dict[str, Any]:
    """Unused features, top-1% share of the non-zeros, and the Zipf fit."""
    d = counts.size
    top_k = max(1, math.ceil(d / 100))
    top = np.sort(counts)[::-1][:top_k]
    fit = fit_zipf_exponent(counts)
    return {
        "unused_features": int(np.sum(counts == 0)),
        "used_features": int(np.sum(counts > 0)),
        "top1pct_features": top_k,
        "top1pct_nnz_fraction": float(top.sum() / nnz) if nnz else 0.0,
        "max_rows_per_feature": int(counts.max()) if d else 0,
        "zipf_exponent": fit["exponent"],
        "zipf_fit": fit,
    }


def worker_overlap(X: Matrix, workers: int, seed: int) -> dict[str, Any]:
    """Feature sets of ``workers`` workers after a seeded random even split of the rows.

    Rows are permuted by ``np.random.default_rng(seed)`` and dealt out with
    ``np.array_split`` (sizes differ by at most one).

    Args:
        X: Dense or sparse (n, d) matrix.
        workers: Number of workers P >= 1.
        seed: Seed of the split.

    Returns:
        ``rows_per_worker`` and ``distinct_features`` (|N_p|, per worker), ``union``
        (|U_p N_p|), ``mean_pairwise_jaccard`` (mean over pairs p < q of
        |N_p & N_q| / |N_p | N_q|, pairs of two empty sets left out; None without pairs) and
        ``replication_factor`` (sum_p |N_p| / |union|; None when the union is empty).

    Raises:
        ConfigError: ``workers < 1``.
    """
    return _overlap(_pattern(X), workers, seed)


def _overlap(P: Pattern, workers: int, seed: int) -> dict[str, Any]:
    """:func:`worker_overlap` of a non-zero pattern (no second copy of it)."""
    if workers < 1:
        raise ConfigError(f"workers must be >= 1 for the sparsity analysis, got {workers}")
    n, d = P.shape
    owner = np.empty(n, dtype=np.int64)
    for p, rows in enumerate(np.array_split(np.random.default_rng(seed).permutation(n), workers)):
        owner[rows] = p
    if isinstance(P, np.ndarray):
        used = np.zeros((workers, d), dtype=np.int64)
        for p in range(workers):
            used[p] = P[owner == p].any(axis=0)
        W = sp.csr_matrix(used)
    else:
        owner_nnz = np.repeat(owner, np.diff(P.indptr))
        W = sp.csr_matrix(
            (np.ones(P.nnz, dtype=np.int64), (owner_nnz, P.indices)), shape=(workers, d)
        )
        W.data[:] = 1  # duplicates were summed: back to a 0/1 pattern
    sizes = np.diff(W.indptr).astype(np.int64)
    union = int(np.count_nonzero(np.bincount(W.indices, minlength=d)))
    inter = (W @ W.T).toarray()
    iu, ju = np.triu_indices(workers, k=1)
    pair_union = sizes[iu] + sizes[ju] - inter[iu, ju]
    keep = pair_union > 0
    jac = inter[iu, ju][keep] / pair_union[keep]
    return {
        "workers": workers,
        "seed": seed,
        "rows_per_worker": np.bincount(owner, minlength=workers).tolist(),
        "distinct_features": sizes.tolist(),
        "union": union,
        "mean_pairwise_jaccard": float(jac.mean()) if jac.size else None,
        "replication_factor": float(sizes.sum() / union) if union else None,
    }


def _matrix_stats(P: Pattern, workers: int, seed: int) -> dict[str, Any]:
    """Row, feature and overlap statistics of a non-zero pattern."""
    n, d = P.shape
    per_row = _row_nnz(P)
    counts = _feature_nnz(P)
    nnz = int(per_row.sum())
    empty = per_row.size == 0
    return {
        "rows": int(n),
        "features": int(d),
        "nnz": nnz,
        "density": float(nnz / (n * d)) if n * d else 0.0,
        "nnz_per_row": {
            "mean": 0.0 if empty else float(per_row.mean()),
            "median": 0.0 if empty else float(np.median(per_row)),
            "p90": 0.0 if empty else float(np.percentile(per_row, 90)),
            "min": 0 if empty else int(per_row.min()),
            "max": 0 if empty else int(per_row.max()),
        },
        "popularity": _popularity(counts, nnz),
        "overlap": _overlap(P, workers, seed),
    }


def analyze_hashed(
    ds: Dataset, workers: int, seed: int, spec: HashingSpec, raw: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Sparsity statistics of the training rows after feature hashing, compared with raw.

    Args:
        ds: The (raw) data set.
        workers: Number of workers for the overlap statistics.
        seed: Seed of the hash functions and of the random row split (the same split as the
            raw statistics, so the overlaps compare like with like).
        spec: The recipe's ``hashing`` block.
        raw: The raw statistics (:func:`analyze` without hashing), to avoid recomputing them.

    Returns:
        ``hashing`` (the block, the bucket count m, the compression d / m), then for a sparse
        data set the same statistics as :func:`analyze` on the hashed rows, and ``vs_raw``:
        the mean non-zeros per row (raw, hashed, ratio: the share of a row's features that
        survive collisions), the replication factor and the mean pairwise Jaccard overlap of
        the workers' feature sets (raw and hashed). A dense data set gets ``skipped``
        instead: hashing applies to sparse data only.
    """
    d = ds.n_features
    m = spec.buckets_for(d)
    out: dict[str, Any] = {
        "hashing": {
            "buckets": m,
            "ratio": spec.ratio,
            "signed": bool(spec.signed),
            "compression": d / m,
            "seed": seed,
        }
    }
    if not ds.sparse:
        out["skipped"] = f"dataset {ds.name!r} is dense; feature hashing needs sparse data"
        return out
    raw = raw if raw is not None else analyze(ds, workers, seed)
    hashed = _matrix_stats(
        _binary_csr(hash_features(ds.X_train, m, seed, spec.signed)), workers, seed
    )
    raw_nnz, new_nnz = raw["nnz_per_row"]["mean"], hashed["nnz_per_row"]["mean"]
    out.update(hashed)
    out["vs_raw"] = {
        "nnz_per_row_mean": {
            "raw": raw_nnz,
            "hashed": new_nnz,
            "ratio": new_nnz / raw_nnz if raw_nnz else None,
        },
        "replication_factor": {
            "raw": raw["overlap"]["replication_factor"],
            "hashed": hashed["overlap"]["replication_factor"],
        },
        "mean_pairwise_jaccard": {
            "raw": raw["overlap"]["mean_pairwise_jaccard"],
            "hashed": hashed["overlap"]["mean_pairwise_jaccard"],
        },
    }
    return out


def analyze(
    ds: Dataset,
    workers: int,
    seed: int,
    hashing: HashingSpec | Sequence[HashingSpec] | None = None,
) -> dict[str, Any]:
    """Sparsity statistics of the training rows of ``ds`` (JSON-serialisable).

    Args:
        ds: The data set; only ``X_train`` is analysed (it is what workers hold).
        workers: Number of workers for the overlap statistics.
        seed: Seed of the random row split among workers (and of the hash functions).
        hashing: The ``hashing`` block(s) of the recipes in use; each adds an entry to
            ``hashed`` (see :func:`analyze_hashed`). Duplicates are analysed once.

    Returns:
        ``rows``, ``features``, ``nnz``, ``density``, ``nnz_per_row`` (``mean``, ``median``,
        ``p90`` (linear interpolation), ``min``, ``max``), ``popularity`` (rows per feature:
        ``unused_features``, ``used_features``, ``top1pct_nnz_fraction`` = share of the
        non-zeros held by the ``ceil(d / 100)`` most used features, ``zipf_exponent`` and the
        fit's details ``zipf_fit``, see :func:`fit_zipf_exponent`) and ``overlap`` (see
        :func:`worker_overlap`); with ``hashing``, also ``hashed``: one entry per distinct
        block, in the order given.
    """
    stats: dict[str, Any] = {
        "dataset": ds.name,
        "split": "train",
        **_matrix_stats(_pattern(ds.X_train), workers, seed),
    }
    specs = [hashing] if isinstance(hashing, HashingSpec) else list(hashing or [])
    if specs:
        unique = list(dict.fromkeys(specs))
        stats["hashed"] = [analyze_hashed(ds, workers, seed, h, raw=stats) for h in unique]
    return stats


def write_analysis(stats: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Write ``stats`` atomically as sorted, indented JSON.

    Args:
        stats: Output of :func:`analyze`.
        path: Target file.
    """
    write_json(path, stats)
