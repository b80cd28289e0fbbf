"""scikit-learn's ``digits``: 1,797 real 8x8 handwritten digit images, shipped with the package."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from psml_core.config import DatasetSpec
from psml_core.data.base import DATASETS, Dataset, DatasetSource

__all__ = ["ROWS", "DigitsSource", "load_split"]

ROWS = 1797
"""Images in scikit-learn's digits set (``load_digits().data.shape[0]``), known before loading."""


@DATASETS.register("digits")
class DigitsSource(DatasetSource):
    """The digits set: 64 pixel features scaled to [0, 1], 10 classes, stratified split."""

    @classmethod
    def planned_train_rows(cls, spec: DatasetSpec) -> int | None:
        """The images left for training by the split (sklearn rounds the test part up)."""
        return ROWS - math.ceil(ROWS * spec.test_fraction)

    def load(self) -> Dataset:
        """Load the images and split them, stratified by class, with our design's seed."""
        return load_split(
            self.spec,
            lambda bunch: (np.asarray(bunch.data, dtype=np.float64) / 16.0).astype(np.float32),
            {
                "source": self.name,
                "origin": "sklearn.datasets.load_digits (UCI optical digits, 8x8, values 0-16)",
                "scaling": "pixel / 16",
            },
        )


def load_split(
    spec: DatasetSpec, features: Callable[[Any], np.ndarray], meta: dict[str, Any]
) -> Dataset:
    """scikit-learn's digits as ``features(bunch)`` rows, split stratified by class.

    The split uses the data set's seed; the digits and digits28 sources share it.
    """
    # Imported here: sklearn takes ~1 s to import and only these sources need it.
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    X = features(bunch)
    y = np.asarray(bunch.target, dtype=np.int64)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=spec.test_fraction, random_state=spec.seed, stratify=y
    )
    return Dataset(
        name=spec.name,
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
        n_classes=10,
        meta={**meta, "seed": spec.seed, "test_fraction": spec.test_fraction},
    )
