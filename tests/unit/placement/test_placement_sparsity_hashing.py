from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from psml_core.config import HashingSpec
from psml_core.data.base import Dataset
from psml_core.data.hashing import hash_features
from psml_core.placement.sparsity import analyze, analyze_hashed


def _ds(d: int = 800, rows: int = 300) -> Dataset:
    X = sp.random(rows, d, density=0.02, random_state=3, format="csr", dtype=np.float32)
    y = np.zeros(rows, dtype=np.int64)
    return Dataset("toy", X, y, X[:5], y[:5], 2, {})


def test_without_hashing_the_output_is_unchanged():
    stats = analyze(_ds(), workers=4, seed=0)
    assert "hashed" not in stats
    assert analyze(_ds(), workers=4, seed=0, hashing=[]) == stats


def test_hashed_statistics_next_to_raw():
    ds = _ds()
    raw = analyze(ds, workers=4, seed=1)
    stats = analyze(ds, workers=4, seed=1, hashing=[HashingSpec(ratio=1 / 16)])
    assert {k: v for k, v in stats.items() if k != "hashed"} == raw
    (h,) = stats["hashed"]
    assert h["hashing"] == {
        "buckets": 50,
        "ratio": 1 / 16,
        "signed": True,
        "compression": 16.0,
        "seed": 1,
    }
    # the hashed statistics are those of the hashed matrix, with the same row split
    Xh = hash_features(ds.X_train, 50, 1)
    assert h["features"] == 50 and h["rows"] == 300
    assert h["nnz"] == Xh.nnz
    assert h["nnz_per_row"]["mean"] == pytest.approx(Xh.nnz / 300)
    assert h["overlap"]["rows_per_worker"] == raw["overlap"]["rows_per_worker"]
    # hashing merges features: rows get (weakly) fewer non-zeros, workers overlap more
    vs = h["vs_raw"]
    assert vs["nnz_per_row_mean"]["raw"] == raw["nnz_per_row"]["mean"]
    assert vs["nnz_per_row_mean"]["hashed"] <= vs["nnz_per_row_mean"]["raw"]
    assert vs["nnz_per_row_mean"]["ratio"] == pytest.approx(
        vs["nnz_per_row_mean"]["hashed"] / vs["nnz_per_row_mean"]["raw"]
    )
    assert vs["replication_factor"]["hashed"] > vs["replication_factor"]["raw"]
    assert vs["mean_pairwise_jaccard"]["hashed"] > vs["mean_pairwise_jaccard"]["raw"]


def test_several_blocks_deduplicated_in_order():
    specs = [HashingSpec(buckets=10), HashingSpec(ratio=0.5), HashingSpec(buckets=10)]
    stats = analyze(_ds(), workers=2, seed=0, hashing=specs)
    assert [h["hashing"]["buckets"] for h in stats["hashed"]] == [10, 400]
    one = analyze(_ds(), workers=2, seed=0, hashing=HashingSpec(buckets=10))
    assert one["hashed"] == stats["hashed"][:1]


def test_dense_data_is_skipped_with_a_reason():
    X = np.eye(6, dtype=np.float32)
    y = np.zeros(6, dtype=np.int64)
    ds = Dataset("digits", X, y, X, y, 2, {})
    out = analyze_hashed(ds, workers=2, seed=0, spec=HashingSpec(buckets=3))
    assert out["hashing"]["buckets"] == 3
    assert "dense" in out["skipped"] and "features" not in out
