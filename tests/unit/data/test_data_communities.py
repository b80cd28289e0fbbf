"""Planted communities in zipf_sparse: lambda = 0 is today's data; lambda > 0 adds locality."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from psml_core.config import DatasetSpec
from psml_core.data import DATASETS, load_prepared, save_prepared
from psml_core.data.communities import plant, solve_rate
from psml_core.data.zipf_sparse import ZipfParams, generate, generate_with_groups, solve_draw_rate
from psml_core.errors import ConfigError

SMALL = {"rows": 2000, "features": 5000, "nnz_per_row": 20.0, "zipf_exponent": 1.0}


def _digest(X, y) -> str:
    return hashlib.sha256(
        X.data.tobytes() + X.indices.tobytes() + X.indptr.tobytes() + y.tobytes()
    ).hexdigest()


def _load(**kw):
    base = {"name": "z", "source": "zipf_sparse", "rows": 4000, "seed": 0}
    return DATASETS.get("zipf_sparse")(DatasetSpec(**{**base, **kw})).load()


def test_data_without_communities_is_pinned() -> None:
    """The generator's stream as it was before communities existed (digest taken then)."""
    X, y, _ = generate(ZipfParams(positive_rate=0.474, **SMALL), 0)
    assert _digest(X, y) == "dc2243f4cedf4cd53c79cbe59918928e1d11ae1f28135fd4efa2dd18161c1f07"


@pytest.mark.parametrize("k", [1, 10, 103])
def test_lambda_zero_reproduces_the_data_exactly_and_only_adds_groups(k) -> None:
    plain = generate(ZipfParams(positive_rate=0.474, **SMALL), 0)
    X, y, groups, _ = generate_with_groups(
        ZipfParams(positive_rate=0.474, communities=k, locality=0.0, **SMALL), 0
    )
    assert _digest(X, y) == _digest(plain[0], plain[1])
    assert groups.shape == (2000,) and groups.min() >= 0 and groups.max() < k


def _own_share(X, groups, com) -> float:
    """Fraction of the non-zeros that lie in the row's own vocabulary."""
    home = np.empty(X.shape[1], dtype=np.int64)
    for g in range(com.k):
        home[com.vocab[com.bounds[g] : com.bounds[g + 1]]] = g
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    return float(np.mean(home[X.indices] == groups[rows]))


def test_locality_moves_the_non_zeros_into_the_groups_vocabularies() -> None:
    shares = []
    for lam in (0.0, 0.3, 0.6, 0.9):
        params = ZipfParams(positive_rate=0.474, communities=20, locality=lam, **SMALL)
        X, _, groups, stats = generate_with_groups(params, 1)
        com = plant(2000, 5000, 20, lam, 1.0, 1)
        np.testing.assert_array_equal(groups, com.group)
        shares.append(_own_share(X, groups, com))
        # The calibration holds whatever lambda: distinct non-zeros per row.
        assert X.nnz / 2000 == pytest.approx(20.0, rel=0.03)
    assert shares[0] == pytest.approx(1 / 20, abs=0.02)  # chance: vocabularies are 1/K of d
    assert all(a < b for a, b in zip(shares, shares[1:], strict=False))
    assert shares[-1] > 0.8


def test_rcv1_calibration_names_its_topics_and_groups_survive_prepare(tmp_path: Path) -> None:
    ds = _load(locality=0.5)
    assert ds.meta["params"]["communities"] == 103 and ds.meta["params"]["locality"] == 0.5
    assert "103 topic categories" in ds.meta["calibration_figures"]["source"]
    assert ds.groups_train.size == ds.X_train.shape[0] and ds.groups_test.size == ds.X_test.shape[0]
    back = load_prepared(Path(save_prepared(ds, tmp_path)).parent)
    np.testing.assert_array_equal(back.groups_train, ds.groups_train)
    np.testing.assert_array_equal(back.groups_test, ds.groups_test)
    plain = _load()
    assert plain.groups_train is None
    assert load_prepared(Path(save_prepared(plain, tmp_path / "p")).parent).groups_train is None


def test_dataset_json_keeps_its_form_without_communities() -> None:
    spec = DatasetSpec(name="z", source="zipf_sparse", rows=10)
    assert "communities" not in spec.to_dict() and "locality" not in spec.to_dict()
    assert (
        DatasetSpec(name="z", source="zipf_sparse", rows=10, locality=0.3).to_dict()["locality"]
        == 0.3
    )


def test_newton_rate_equals_the_bisection() -> None:
    p = np.arange(1, 3001, dtype=np.float64) ** -1.0
    p /= p.sum()
    assert solve_rate(p, 40.0) == pytest.approx(solve_draw_rate(p, 40.0), rel=1e-9)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"locality": 1.0}, r"locality: must be in \[0, 1\)"),
        ({"communities": 0}, "communities: must be an integer"),
        ({"communities": 10**6}, "communities: must be an integer"),
    ],
)
def test_bad_community_settings_name_the_key(kw, match) -> None:
    with pytest.raises(ConfigError, match=match):
        _load(**kw)
