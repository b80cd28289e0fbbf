"""scikit-learn's ``digits``: 1,797 real 8x8 handwritten digit images, shipped with the package."""

from __future__ import annotations

import math

import numpy as np

from psml_core.config import DatasetSpec
from psml_core.data.base import DATASETS, Dataset, DatasetSource

__all__ = ["ROWS", "DigitsSource"]

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
        # Imported here: sklearn takes ~1 s to import and only this source needs it.
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        spec = self.spec
        bunch = load_digits()
        X = (np.asarray(bunch.data, dtype=np.float64) / 16.0).astype(np.float32)
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
            meta={
                "source": self.name,
                "origin": "sklearn.datasets.load_digits (UCI optical digits, 8x8, values 0-16)",
                "scaling": "pixel / 16",
                "seed": spec.seed,
                "test_fraction": spec.test_fraction,
            },
        )
