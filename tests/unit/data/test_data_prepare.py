from __future__ import annotations

import importlib

import numpy as np
import pytest

from psml_core.config import DatasetSpec
from psml_core.data import DATASETS, holdout_split, load_prepared, prepare_dataset
from psml_core.errors import ConfigError


def test_importing_the_package_registers_every_source() -> None:
    data = importlib.import_module("psml_core.data")
    assert {"digits", "zipf_sparse", "libsvm"} <= set(data.DATASETS.names())
    for name in ("digits", "zipf_sparse", "libsvm"):
        assert DATASETS.get(name).name == name


def test_prepare_then_load(tmp_path) -> None:
    spec = DatasetSpec(name="small", source="zipf_sparse", rows=300, features=500, seed=2)
    manifest = prepare_dataset(spec, tmp_path / "small")
    assert manifest == tmp_path / "small" / "manifest.json" and manifest.is_file()
    ds = load_prepared(tmp_path / "small")
    direct = DATASETS.get("zipf_sparse")(spec).load()
    np.testing.assert_array_equal(ds.X_train.toarray(), direct.X_train.toarray())
    np.testing.assert_array_equal(ds.y_test, direct.y_test)
    assert ds.meta["params"]["features"] == 500


def test_prepare_digits(tmp_path) -> None:
    prepare_dataset(DatasetSpec(name="digits", source="digits"), tmp_path)
    ds = load_prepared(tmp_path)
    assert ds.n_classes == 10 and not ds.sparse and ds.n_features == 64


def test_unknown_source_names_the_key(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"datasets\.x\.source"):
        prepare_dataset(DatasetSpec(name="x", source="imagenet"), tmp_path)


@pytest.mark.parametrize(("n", "fraction", "n_test"), [(10, 0.2, 2), (2, 0.01, 1), (2, 0.99, 1)])
def test_holdout_split(n: int, fraction: float, n_test: int) -> None:
    train, test = holdout_split(n, fraction, seed=0)
    assert test.size == n_test and train.size == n - n_test
    assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(n))
    assert np.all(np.diff(train) > 0) and np.all(np.diff(test) > 0)
    assert np.array_equal(holdout_split(n, fraction, seed=0)[1], test)
