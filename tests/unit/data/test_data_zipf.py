from __future__ import annotations

import dataclasses
import json
import time

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from psml_core.config import DatasetSpec
from psml_core.data import CALIBRATIONS, DATASETS, ZipfSparseSource, save_prepared
from psml_core.data.store import file_sha256
from psml_core.data.zipf_sparse import (
    _rank_probabilities,
    expected_distinct,
    solve_draw_rate,
)
from psml_core.errors import ConfigError
from psml_core.placement.sparsity import analyze

CAL = CALIBRATIONS["rcv1_v2"]


def _spec(**kw) -> DatasetSpec:
    base = {"name": "zipf", "source": "zipf_sparse", "rows": 4000, "seed": 0}
    return DatasetSpec(**{**base, **kw})


def _load(**kw):
    return DATASETS.get("zipf_sparse")(_spec(**kw)).load()


def _all(ds):
    return sp.vstack([ds.X_train, ds.X_test]).tocsr(), np.concatenate([ds.y_train, ds.y_test])


@pytest.fixture(scope="module")
def rcv1_4k():
    return _load()


def test_calibration_figures_and_sources() -> None:
    assert CAL.features == 47_236
    assert CAL.nnz_per_row == pytest.approx(75.58, abs=0.01)
    assert CAL.positive_rate == pytest.approx(0.474, abs=0.001)
    assert CAL.zipf_exponent == 1.0
    assert "JMLR 5" in CAL.source and "fetch_rcv1" in CAL.source and "[ours]" in CAL.source
    with pytest.raises(dataclasses.FrozenInstanceError):
        CAL.features = 1  # type: ignore[misc]


def test_registered() -> None:
    assert DATASETS.get("zipf_sparse") is ZipfSparseSource


def test_shape_format_and_meta(rcv1_4k) -> None:
    ds = rcv1_4k
    X, y = _all(ds)
    assert ds.sparse and X.shape == (4000, CAL.features)
    assert ds.X_test.shape[0] == 800
    assert X.dtype == np.float32 and y.dtype == np.int64 and ds.n_classes == 2
    assert set(np.unique(y)) == {0, 1}
    assert X.has_canonical_format
    assert np.all(np.diff(X.indptr) >= 1) and np.all(X.data > 0)
    np.testing.assert_allclose(sp.linalg.norm(X, axis=1), 1.0, rtol=1e-5)
    meta = ds.meta
    assert meta["calibration_figures"]["features"] == CAL.features
    assert meta["params"]["rows"] == 4000
    json.dumps(meta, allow_nan=False)


def test_fast() -> None:
    start = time.perf_counter()
    _load(seed=11)
    assert time.perf_counter() - start < 1.0


def test_realised_stats_match_the_calibration(rcv1_4k) -> None:
    X, y = _all(rcv1_4k)
    assert X.nnz / X.shape[0] == pytest.approx(CAL.nnz_per_row, rel=0.10)
    assert abs(y.mean() - CAL.positive_rate) <= 0.03
    assert rcv1_4k.meta["realised_nnz_per_row"] == pytest.approx(X.nnz / X.shape[0])


# Tolerance 0.1: on 4,000 rows the fit (ranks >= 10 with >= 5 rows) lands 0.03-0.05 below s,
# because document frequencies of the head still saturate a little.
@pytest.mark.parametrize("s", [0.7, 1.0, 1.3])
def test_fitted_zipf_exponent_near_the_calibrated_one(s: float) -> None:
    ds = _load(zipf_exponent=s, seed=5)
    pop = analyze(ds, workers=2, seed=0)["popularity"]
    assert pop["zipf_fit"]["points"] > 100
    assert pop["zipf_exponent"] == pytest.approx(s, abs=0.1)


def test_learnable_by_logistic_regression(rcv1_4k) -> None:
    from sklearn.linear_model import LogisticRegression

    ds = rcv1_4k
    acc = LogisticRegression(max_iter=1000).fit(ds.X_train, ds.y_train).score(ds.X_test, ds.y_test)
    majority = max(ds.y_test.mean(), 1 - ds.y_test.mean())
    assert acc >= majority + 0.1


def test_deterministic_arrays_and_bytes(tmp_path, rcv1_4k) -> None:
    again = _load()
    for name in ("X_train", "X_test"):
        a, b = getattr(rcv1_4k, name), getattr(again, name)
        for part in ("data", "indices", "indptr"):
            np.testing.assert_array_equal(getattr(a, part), getattr(b, part))
    np.testing.assert_array_equal(rcv1_4k.y_train, again.y_train)
    save_prepared(rcv1_4k, tmp_path / "a")
    save_prepared(again, tmp_path / "b")
    data_a, data_b = (tmp_path / "a" / "data.npz"), (tmp_path / "b" / "data.npz")
    assert data_a.read_bytes() == data_b.read_bytes()
    assert file_sha256(data_a) == file_sha256(data_b)
    assert (tmp_path / "a" / "manifest.json").read_bytes() == (
        tmp_path / "b" / "manifest.json"
    ).read_bytes()


def test_seed_changes_the_data(rcv1_4k) -> None:
    other = _load(seed=1)
    assert not np.array_equal(other.X_train.indices[:200], rcv1_4k.X_train.indices[:200])


def test_popular_features_are_not_at_low_indices(rcv1_4k) -> None:
    X, _ = _all(rcv1_4k)
    counts = np.bincount(X.indices, minlength=X.shape[1])
    top = np.argsort(-counts)[:100]
    assert top.mean() > X.shape[1] / 4  # a sorted layout would put them all below 100


@settings(max_examples=25, deadline=None)
@given(
    features=st.integers(50, 3000),
    nnz_frac=st.floats(0.0, 0.3),
    s=st.floats(0.5, 1.5),
    rate=st.floats(0.1, 0.9),
    seed=st.integers(0, 2**16),
)
def test_overrides_hit_their_targets(
    features: int, nnz_frac: float, s: float, rate: float, seed: int
) -> None:
    nnz = max(1.0, min(nnz_frac * features, 40.0))
    ds = _load(
        rows=600, features=features, nnz_per_row=nnz, zipf_exponent=s, positive_rate=rate, seed=seed
    )
    X, y = _all(ds)
    assert X.shape == (600, features) and X.has_canonical_format
    assert X.nnz / 600 == pytest.approx(nnz, rel=0.10)
    assert abs(y.mean() - rate) <= 0.03


@pytest.mark.parametrize("target", [1.0, 2.5, 75.58, 900.0])
def test_solve_draw_rate(target: float) -> None:
    p = _rank_probabilities(1000 if target > 100 else CAL.features, 1.0)
    lam = solve_draw_rate(p, target)
    assert expected_distinct(p, lam) == pytest.approx(target, rel=1e-9)


@pytest.mark.parametrize(
    ("kw", "key"),
    [
        ({"rows": None}, "rows"),
        ({"calibration": "nope"}, "calibration"),
        ({"features": 50, "nnz_per_row": 50.0}, "nnz_per_row"),
        ({"features": 50, "nnz_per_row": 0.5}, "nnz_per_row"),
        ({"features": 1000, "nnz_per_row": 999.0, "zipf_exponent": 2.0}, "nnz_per_row"),
    ],
)
def test_config_errors(kw: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        _load(**kw)
