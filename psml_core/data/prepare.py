"""Turn a dataset config entry into prepared files (``data.npz`` + ``manifest.json``)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from psml_core.config import DatasetSpec
from psml_core.data.base import DATASETS, Dataset, Matrix
from psml_core.data.store import save_prepared

__all__ = ["holdout_dataset", "holdout_split", "prepare_dataset"]


def holdout_split(n_rows: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split row ids into train and test by a seeded permutation.

    Used by every source that has no predefined test set. Both parts keep the original row
    order (sorted ids), and each gets at least one row when ``n_rows >= 2``.

    Args:
        n_rows: Number of rows.
        test_fraction: Fraction held out, in (0, 1); the test size is rounded.
        seed: Seed of ``np.random.default_rng``.

    Returns:
        ``(train_ids, test_ids)``, int64, sorted.
    """
    n_test = round(test_fraction * n_rows)
    if n_rows >= 2:
        n_test = min(max(n_test, 1), n_rows - 1)
    perm = np.random.default_rng(seed).permutation(n_rows)
    return np.sort(perm[n_test:]).astype(np.int64), np.sort(perm[:n_test]).astype(np.int64)


def holdout_dataset(
    spec: DatasetSpec,
    X: Matrix,
    y: np.ndarray,
    n_classes: int,
    meta: dict[str, object],
    groups: np.ndarray | None = None,
) -> Dataset:
    """The data set of all rows ``X``, ``y``, with ``spec.test_fraction`` of them held out.

    The split is :func:`holdout_split` with ``spec.seed``; ``groups`` (a planted group per
    row) is split alike.
    """
    train, test = holdout_split(X.shape[0], spec.test_fraction, spec.seed)
    split = {} if groups is None else {"groups_train": groups[train], "groups_test": groups[test]}
    return Dataset(
        name=spec.name,
        X_train=X[train],
        y_train=y[train],
        X_test=X[test],
        y_test=y[test],
        n_classes=n_classes,
        meta=dict(meta),
        **split,
    )


def prepare_dataset(spec: DatasetSpec, out_dir: str | os.PathLike[str]) -> Path:
    """Build the data set described by ``spec`` and store it under ``out_dir``.

    Args:
        spec: The dataset's config entry.
        out_dir: Directory that receives ``data.npz`` and ``manifest.json``.

    Returns:
        The path of the manifest.

    Raises:
        ConfigError: Unknown source or invalid generator settings.
        DataError: A source file is missing, malformed or fails its checksum.
    """
    source = DATASETS.get(spec.source, where=f"datasets.{spec.name}.source")
    return save_prepared(source(spec).load(), out_dir)
