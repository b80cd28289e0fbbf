"""Feature hashing: jpdc's model compression for sparse linear models (docs/methods.md, JPDC).

Raw feature ``j`` goes to bucket ``h(j)`` in ``[0, m)`` with sign ``xi(j)`` in ``{+1, -1}``
(Weinberger et al., "Feature Hashing for Large Scale Multitask Learning", ICML 2009); the hashed
row is ``x~_k = sum_{j : h(j) = k} xi(j) x_j``. The model then has m weights instead of d, and
the samples' supports ``F_i = {h(j) : x_ij != 0}`` get denser and overlap more, which is what
changes jpdc's placement problem.

Both hash functions are MurmurHash3 (x86, 32 bit) of the feature id as an int32, from
:func:`sklearn.utils.murmurhash3_32`, with two seeds derived from the run seed, so ``h`` and
``xi`` are independent:

* ``h(j) = murmurhash3_32(j, seed=2 * seed mod 2^32, positive=True) mod m``;
* ``xi(j) = +1`` if ``murmurhash3_32(j, seed=2 * seed + 1 mod 2^32, positive=True)`` is even,
  else ``-1`` (``+1`` for every feature when unsigned).

The hashed matrix is ``X @ H`` with ``H`` the sparse d x m matrix holding ``xi(j)`` at
``(j, h(j))``: colliding features are summed in one vectorised sparse product. Exact
cancellations (two colliding features with opposite signs and equal values) are dropped, so
the result's pattern is the hashed gradient's support.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from psml_core.config import HashingSpec
from psml_core.data.base import Dataset, Matrix
from psml_core.errors import ConfigError

__all__ = [
    "feature_buckets",
    "feature_signs",
    "hash_features",
    "hashed_dataset",
    "hashed_once",
    "hashing_matrix",
    "murmurhash3_32",
]

_U32 = 1 << 32
_MAX_FEATURES = 1 << 31  # feature ids are hashed as int32


def _check_ids(ids: np.ndarray) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.size and (ids.min() < 0 or ids.max() >= _MAX_FEATURES):
        raise ConfigError(f"feature hashing: feature ids must be in [0, 2^31), got {ids.max()}")
    return ids.astype(np.int32, copy=False)


def feature_buckets(ids: np.ndarray, buckets: int, seed: int) -> np.ndarray:
    """Bucket ``h(j)`` of each feature id (int64 in ``[0, buckets)``), vectorised.

    Args:
        ids: Feature ids in ``[0, 2^31)``.
        buckets: The number of buckets m >= 1.
        seed: The run seed; the bucket hash uses ``2 * seed mod 2^32``.
    """
    if buckets < 1:
        raise ConfigError(f"feature hashing: buckets must be >= 1, got {buckets}")
    return murmurhash3_32(_check_ids(ids), (2 * seed) % _U32) % buckets


def murmurhash3_32(ids: np.ndarray, seed: int) -> np.ndarray:
    """scikit-learn's vectorised MurmurHash3 of int32 ids, as unsigned 32-bit values (int64).

    scikit-learn is imported on first use: importing it costs every ``psml`` process about
    1.7 s, and only hashing recipes and placements need it.
    """
    from sklearn.utils import murmurhash3_32 as sk_murmurhash3_32

    return np.asarray(sk_murmurhash3_32(ids, seed=seed, positive=True), dtype=np.int64)


def feature_signs(ids: np.ndarray, seed: int) -> np.ndarray:
    """Sign ``xi(j)`` of each feature id (int8, +1 or -1), vectorised.

    Args:
        ids: Feature ids in ``[0, 2^31)``.
        seed: The run seed; the sign hash uses ``2 * seed + 1 mod 2^32``.
    """
    h = murmurhash3_32(_check_ids(ids), (2 * seed + 1) % _U32)
    return (1 - 2 * (h & 1)).astype(np.int8)


def hashing_matrix(features: int, buckets: int, seed: int, signed: bool = True) -> sp.csr_matrix:
    """The sparse d x m matrix ``H`` with ``H[j, h(j)] = xi(j)`` (float32, one entry per row).

    Args:
        features: The raw feature count d.
        buckets: The number of buckets m.
        seed: The run seed.
        signed: Whether to apply the signs ``xi`` (else every entry is +1).
    """
    ids = np.arange(features, dtype=np.int64)
    cols = feature_buckets(ids, buckets, seed)
    vals = feature_signs(ids, seed) if signed else np.ones(features, dtype=np.int8)
    # One entry per row: build the CSR arrays directly (no COO sort needed).
    return sp.csr_matrix(
        (vals.astype(np.float32), cols, np.arange(features + 1, dtype=np.int64)),
        shape=(features, buckets),
    )


def hash_features(X: Matrix, buckets: int, seed: int, signed: bool = True) -> sp.csr_matrix:
    """Hash the columns of a sparse matrix into ``buckets`` columns: ``X @ H``.

    Args:
        X: Sparse (n, d) matrix (CSR, or anything scipy converts to CSR).
        buckets: The number of buckets m >= 1.
        seed: The run seed (both hash functions derive from it).
        signed: Whether colliding features are summed with random signs.

    Returns:
        The (n, m) CSR matrix, canonical (sorted indices, no duplicates, no stored zeros), in
        X's floating dtype (float32 for prepared data).

    Raises:
        ConfigError: ``X`` is dense; hashing exploits sparsity and is a recipe field
            (``hashing``) for sparse data sets only.
    """
    if not sp.issparse(X):
        raise ConfigError(
            "feature hashing (the method recipe's 'hashing' field) needs a sparse data set; "
            f"got a dense {type(X).__name__} of shape {getattr(X, 'shape', '?')}: remove "
            "'hashing' from the recipe or train on a sparse data set (zipf_sparse, libsvm)"
        )
    Xc = sp.csr_matrix(X)
    dtype = Xc.dtype if np.issubdtype(Xc.dtype, np.floating) else np.float32
    H = hashing_matrix(Xc.shape[1], buckets, seed, signed).astype(dtype)
    out = sp.csr_matrix(Xc.astype(dtype, copy=False) @ H)
    out.sum_duplicates()
    out.eliminate_zeros()
    out.sort_indices()
    return out


def hashed_dataset(ds: Dataset, spec: HashingSpec | None, seed: int) -> Dataset:
    """The data set with its train and test features hashed (``spec`` None: ``ds`` itself).

    Both splits use the same hash functions. ``meta["hashing"]`` records the raw feature
    count, the bucket count, the signs and the seed.

    Args:
        ds: A sparse data set.
        spec: The recipe's ``hashing`` block, or None.
        seed: The run seed.

    Returns:
        A new Dataset with ``n_features == m``; labels are shared with ``ds``.

    Raises:
        ConfigError: ``ds`` is dense; the message names the data set and the recipe field.
    """
    if spec is None:
        return ds
    if not ds.sparse:
        raise ConfigError(
            f"the method recipe's 'hashing' field needs a sparse data set, but dataset "
            f"{ds.name!r} is dense: remove 'hashing' from the recipe or use a sparse data set "
            "(zipf_sparse, libsvm)"
        )
    d = ds.n_features
    m = spec.buckets_for(d)
    info = {
        "raw_features": d,
        "buckets": m,
        "compression": d / m,
        "signed": bool(spec.signed),
        "seed": int(seed),
    }
    return dataclasses.replace(
        ds,
        X_train=hash_features(ds.X_train, m, seed, spec.signed),
        X_test=hash_features(ds.X_test, m, seed, spec.signed),
        meta={**ds.meta, "hashing": info},
    )


def hashed_once(ds: Dataset, spec: HashingSpec | None, seed: int, who: str) -> Dataset:
    """A recipe's data: hashed here if ``ds`` is raw, passed through if already hashed alike.

    The workflow hands partition and training the data set the ``hash`` stage wrote (``psml
    hash``), and the dist spawner ships a job's hashed data set to every rank, which builds its
    job from it again: hashing twice would shrink ``m`` to ``m / 16``. An already hashed data
    set passes if it is this recipe's hashing with this seed.

    Args:
        ds: The data set, raw or hashed.
        spec: The recipe's ``hashing`` block (None: no hashing).
        seed: The run seed.
        who: What asks, for the error (``run 'w/m/s/seed0'``).

    Raises:
        ConfigError: ``ds`` is hashed otherwise (another ratio, signs or seed), or hashed for a
            recipe without hashing.
    """
    done = ds.meta.get("hashing")
    if done is None:
        return hashed_dataset(ds, spec, seed)
    raw = int(done["raw_features"])
    if spec is None or (done["buckets"], done["signed"], done["seed"]) != (
        spec.buckets_for(raw),
        bool(spec.signed),
        seed,
    ):
        raise ConfigError(
            f"{who}: data set {ds.name!r} is already hashed ({done}), not as the recipe hashes "
            "it with this seed; pass the raw data set or the one `psml hash` wrote for it"
        )
    return ds
