"""The Dataset container, the DatasetSource ABC and its registry."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from psml_core.config import DatasetSpec
from psml_core.registry import Registry

__all__ = ["DATASETS", "Dataset", "DatasetSource", "Matrix"]

Matrix = np.ndarray | sp.csr_matrix


@dataclass
class Dataset:
    """A prepared classification data set, split into train and test.

    Attributes:
        name: The dataset's config name.
        X_train: float32 features, dense (n, d) or CSR.
        y_train: int64 labels in [0, n_classes).
        X_test: float32 test features, same kind as X_train.
        y_test: int64 test labels.
        n_classes: Number of classes.
        meta: Facts about the source (calibration, file names, generator parameters).
        groups_train: The planted group of each training row, where the source plants them
            (``zipf_sparse`` with communities), else None.
        groups_test: The same for the test rows.
    """

    name: str
    X_train: Matrix
    y_train: np.ndarray
    X_test: Matrix
    y_test: np.ndarray
    n_classes: int
    meta: dict[str, Any] = field(default_factory=dict)
    groups_train: np.ndarray | None = None
    groups_test: np.ndarray | None = None

    @property
    def n_features(self) -> int:
        """Number of features d."""
        return int(self.X_train.shape[1])

    @property
    def sparse(self) -> bool:
        """Whether the features are stored as CSR."""
        return sp.issparse(self.X_train)


class DatasetSource(ABC):
    """Builds one kind of data set from its config entry.

    Subclasses register under the name used in ``datasets.<name>.source``.
    """

    name: ClassVar[str]

    def __init__(self, spec: DatasetSpec) -> None:
        self.spec = spec

    @abstractmethod
    def load(self) -> Dataset:
        """Build the data set (generate, or read and parse files), deterministically from spec."""

    @classmethod
    def planned_train_rows(cls, spec: DatasetSpec) -> int | None:
        """Training rows the data set will have, known before it is built; None: unknown.

        A generator knows its ``rows`` (the held-out part rounded up, so that the figure is
        never above the split's); a file's rows are known only once it is read.
        """
        if spec.rows is None:
            return None
        return spec.rows - math.ceil(spec.rows * spec.test_fraction)


DATASETS: Registry[type[DatasetSource]] = Registry("dataset source")
