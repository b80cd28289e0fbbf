from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.utils import murmurhash3_32

from psml_core.config import HashingSpec, RunSpec
from psml_core.data.base import Dataset
from psml_core.data.hashing import (
    feature_buckets,
    feature_signs,
    hash_features,
    hashed_dataset,
    hashing_matrix,
)
from psml_core.errors import ConfigError
from psml_core.recipes import load_methods


def reference_hash(X: np.ndarray, m: int, seed: int, signed: bool) -> np.ndarray:
    """Plain NumPy feature hashing: one scalar MurmurHash3 call per feature, summed by column."""
    out = np.zeros((X.shape[0], m), dtype=np.float64)
    for j in range(X.shape[1]):
        bucket = murmurhash3_32(j, seed=(2 * seed) % 2**32, positive=True) % m
        sign = 1.0
        if signed and murmurhash3_32(j, seed=(2 * seed + 1) % 2**32, positive=True) % 2:
            sign = -1.0
        out[:, bucket] += sign * X[:, j]
    return out


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 12),
    d=st.integers(1, 40),
    m=st.integers(1, 16),
    seed=st.integers(-(2**40), 2**40),
    signed=st.booleans(),
    density=st.floats(0.0, 1.0),
    draw=st.integers(0, 2**31 - 1),
)
def test_hash_features_matches_numpy_reference(n, d, m, seed, signed, density, draw):
    rng = np.random.default_rng(draw)
    # Small integers make exact cancellations between colliding features likely.
    X = rng.integers(-2, 3, size=(n, d)).astype(np.float32) * (rng.random((n, d)) < density)
    got = hash_features(sp.csr_matrix(X), m, seed, signed)
    assert got.shape == (n, m) and got.dtype == np.float32
    np.testing.assert_allclose(got.toarray(), reference_hash(X, m, seed, signed), atol=1e-6)
    # canonical: sorted, no duplicates, no stored zeros (cancellations are dropped)
    assert got.has_canonical_format and np.all(got.data != 0)


def test_hashing_matrix_one_signed_entry_per_feature():
    H = hashing_matrix(1000, 37, seed=5)
    assert H.shape == (1000, 37) and H.nnz == 1000
    assert set(np.unique(H.data)) == {-1.0, 1.0}
    ids = np.arange(1000)
    np.testing.assert_array_equal(H.indices, feature_buckets(ids, 37, 5))
    np.testing.assert_array_equal(H.data, feature_signs(ids, 5))
    assert set(np.unique(hashing_matrix(1000, 37, 5, signed=False).data)) == {1.0}


def test_deterministic_per_seed_and_seeds_differ():
    ids = np.arange(5000)
    np.testing.assert_array_equal(feature_buckets(ids, 97, 3), feature_buckets(ids, 97, 3))
    np.testing.assert_array_equal(feature_signs(ids, 3), feature_signs(ids, 3))
    assert np.mean(feature_buckets(ids, 97, 3) != feature_buckets(ids, 97, 4)) > 0.9
    assert np.mean(feature_signs(ids, 3) != feature_signs(ids, 4)) > 0.4


def test_signs_are_balanced_and_buckets_uniform():
    n = 200_000
    ids = np.arange(n)
    signs = feature_signs(ids, 11)
    assert abs(signs.mean()) < 5 / np.sqrt(n)  # 5 sigma of a fair coin
    counts = np.bincount(feature_buckets(ids, 64, 11), minlength=64)
    expected = n / 64
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 150  # 63 degrees of freedom: mean 63, sd ~11
    # sign and bucket come from independent hashes: balanced within buckets too
    within = np.bincount(feature_buckets(ids, 64, 11), weights=signs, minlength=64)
    assert np.all(np.abs(within) < 5 * np.sqrt(expected))


def _sparse_ds(d: int = 400) -> Dataset:
    rng = np.random.default_rng(0)
    Xtr = sp.random(60, d, density=0.05, random_state=1, format="csr", dtype=np.float32)
    Xte = sp.random(20, d, density=0.05, random_state=2, format="csr", dtype=np.float32)
    return Dataset(
        "toy", Xtr, rng.integers(0, 2, 60), Xte, rng.integers(0, 2, 20), 2, {"source": "toy"}
    )


def test_hashed_dataset_hashes_both_splits_with_the_same_functions():
    ds = _sparse_ds()
    out = hashed_dataset(ds, HashingSpec(ratio=1 / 16), seed=7)
    assert out.n_features == 25 and out.sparse
    np.testing.assert_array_equal(out.X_test.toarray(), hash_features(ds.X_test, 25, 7).toarray())
    np.testing.assert_array_equal(out.X_train.toarray(), hash_features(ds.X_train, 25, 7).toarray())
    assert out.y_train is ds.y_train and out.name == ds.name
    assert out.meta["hashing"] == {
        "raw_features": 400,
        "buckets": 25,
        "compression": 16.0,
        "signed": True,
        "seed": 7,
    }
    assert out.meta["source"] == "toy" and "hashing" not in ds.meta
    assert hashed_dataset(ds, None, 7) is ds
    assert hashed_dataset(ds, HashingSpec(buckets=3, signed=False), 0).n_features == 3


@pytest.mark.parametrize(
    ("ratio", "d", "m"), [(1.0, 10, 10), (0.25, 10, 2), (0.001, 10, 1), (1 / 16, 47236, 2952)]
)
def test_ratio_to_buckets(ratio, d, m):
    assert HashingSpec(ratio=ratio).buckets_for(d) == m


def test_dense_data_is_a_config_error_naming_the_field():
    X = np.ones((4, 5), dtype=np.float32)
    dense = Dataset("digits", X, np.zeros(4, np.int64), X, np.zeros(4, np.int64), 2, {})
    with pytest.raises(ConfigError, match=r"'hashing'.*sparse.*'digits' is dense"):
        hashed_dataset(dense, HashingSpec(buckets=4), 0)
    with pytest.raises(ConfigError, match=r"'hashing' field\) needs a sparse data set"):
        hash_features(X, 4, 0)


# ------------------------------------------------------------------ the recipe field


@pytest.mark.parametrize(
    ("block", "fragment"),
    [
        ({}, "key 'dense_bsp.hashing': give exactly one of the keys buckets, ratio; got none"),
        (
            {"buckets": 8, "ratio": 0.5},
            "key 'dense_bsp.hashing': give exactly one of the keys buckets, ratio; "
            "got buckets, ratio",
        ),
        ({"ratio": 0}, "key 'dense_bsp.hashing.ratio': 0 is out of range; must be > 0"),
        ({"ratio": 1.5}, "key 'dense_bsp.hashing.ratio': 1.5 is out of range; must be <= 1"),
        ({"buckets": 0}, "key 'dense_bsp.hashing.buckets': 0 is out of range; must be >= 1"),
        ({"buckets": 2.5}, "key 'dense_bsp.hashing.buckets': expected integer"),
        (
            {"bucket": 8},
            "unknown key 'bucket' in 'dense_bsp.hashing'; did you mean 'buckets'? allowed keys",
        ),
        ({"ratio": 0.5, "signed": "yes"}, "key 'dense_bsp.hashing.signed': expected boolean"),
    ],
)
def test_bad_hashing_block_is_one_line_config_error(tmp_path: Path, repo, block, fragment):
    methods = yaml.safe_load((repo / "config" / "methods.yaml").read_text())
    methods["dense_bsp"]["hashing"] = block
    p = tmp_path / "methods.yaml"
    p.write_text(yaml.safe_dump(methods))
    with pytest.raises(ConfigError) as info:
        load_methods(p)
    msg = str(info.value)
    assert fragment in msg and "\n" not in msg


def test_good_hashing_block_defaults_signed(tmp_path: Path, repo):
    methods = yaml.safe_load((repo / "config" / "methods.yaml").read_text())
    methods["dense_bsp"]["hashing"] = {"ratio": 0.0625}
    p = tmp_path / "methods.yaml"
    p.write_text(yaml.safe_dump(methods))
    recipes = load_methods(p)
    assert recipes["dense_bsp"].hashing == HashingSpec(ratio=0.0625, signed=True)
    assert recipes["topk_ef"].hashing is None


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({}, "give exactly one of 'buckets'"),
        ({"buckets": 2, "ratio": 0.5}, "give exactly one of 'buckets'"),
        ({"buckets": True}, "'hashing.buckets': must be an integer >= 1"),
        ({"ratio": 2.0}, "'hashing.ratio': must be a number in (0, 1]"),
        ({"ratio": 0.5, "signed": 1}, "'hashing.signed': must be true or false"),
    ],
)
def test_hashing_spec_checks_itself(kwargs, fragment):
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(").replace("]", r"\]")):
        HashingSpec(**kwargs)


def test_run_spec_json_round_trip_with_hashing(smoke):
    import dataclasses

    run = smoke.run("rcv1_logreg", "dense_bsp", "dc_10g", 0)
    run = dataclasses.replace(
        run, method=dataclasses.replace(run.method, hashing=HashingSpec(ratio=0.25))
    )
    back = RunSpec.from_json(run.to_json())
    assert back == run and back.method.hashing == HashingSpec(ratio=0.25)
    assert json.loads(run.to_json())["method"]["hashing"] == {
        "buckets": None,
        "ratio": 0.25,
        "signed": True,
    }
