from __future__ import annotations

import numpy as np
import pytest

from psml_core.config import DatasetSpec
from psml_core.data import DATASETS, DigitsSource


def _load(seed: int = 0, test_fraction: float = 0.2):
    spec = DatasetSpec(name="digits", source="digits", seed=seed, test_fraction=test_fraction)
    return DATASETS.get("digits")(spec).load()


def test_registered_under_its_name() -> None:
    assert DATASETS.get("digits") is DigitsSource
    assert DigitsSource.name == "digits"


def test_shapes_types_and_range() -> None:
    ds = _load()
    assert ds.X_train.shape[0] + ds.X_test.shape[0] == 1797
    assert ds.X_test.shape == (360, 64)  # ceil(0.2 * 1797), as train_test_split rounds
    assert ds.n_features == 64 and not ds.sparse
    assert ds.X_train.dtype == np.float32 and ds.y_train.dtype == np.int64
    both = np.vstack([ds.X_train, ds.X_test])
    assert both.min() == 0.0 and both.max() == 1.0
    assert ds.n_classes == 10
    assert set(np.unique(ds.y_train)) == set(range(10)) == set(np.unique(ds.y_test))
    assert ds.meta["source"] == "digits"


def test_split_is_stratified() -> None:
    ds = _load(test_fraction=0.25)
    y = np.concatenate([ds.y_train, ds.y_test])
    expected = np.bincount(y) * ds.y_test.size / y.size
    assert np.all(np.abs(np.bincount(ds.y_test, minlength=10) - expected) <= 1.0)


def test_seed_controls_the_split() -> None:
    a, b, c = _load(seed=3), _load(seed=3), _load(seed=4)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert not np.array_equal(a.y_test, c.y_test)


@pytest.mark.parametrize("fraction", [0.1, 0.5])
def test_test_fraction(fraction: float) -> None:
    ds = _load(test_fraction=fraction)
    assert abs(ds.X_test.shape[0] - fraction * 1797) <= 1
