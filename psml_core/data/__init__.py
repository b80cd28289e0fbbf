"""Data sets: sources (registered in :data:`DATASETS`), prepared storage, preparation.

Importing this package registers every source: ``digits``, ``digits28``, ``zipf_sparse``,
``libsvm``, ``cifar10``, ``mnist`` and ``synthetic_images``.
"""

from __future__ import annotations

from psml_core.data import (  # noqa: F401  (registers sources)
    cifar,
    digits,
    digits28,
    libsvm,
    mnist,
    synthetic_images,
    zipf_sparse,
)
from psml_core.data.base import DATASETS, Dataset, DatasetSource, Matrix
from psml_core.data.cifar import Cifar10Source
from psml_core.data.digits import DigitsSource
from psml_core.data.digits28 import Digits28Source
from psml_core.data.libsvm import LibsvmSource, parse_libsvm
from psml_core.data.mnist import MnistSource
from psml_core.data.prepare import holdout_split, prepare_dataset
from psml_core.data.store import file_sha256, load_prepared, manifest_sha256, save_prepared
from psml_core.data.synthetic_images import SyntheticImagesSource
from psml_core.data.zipf_sparse import CALIBRATIONS, Calibration, ZipfSparseSource

__all__ = [
    "CALIBRATIONS",
    "DATASETS",
    "Calibration",
    "Cifar10Source",
    "Dataset",
    "DatasetSource",
    "Digits28Source",
    "DigitsSource",
    "LibsvmSource",
    "MnistSource",
    "Matrix",
    "SyntheticImagesSource",
    "ZipfSparseSource",
    "file_sha256",
    "holdout_split",
    "load_prepared",
    "manifest_sha256",
    "parse_libsvm",
    "prepare_dataset",
    "save_prepared",
]
