from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from psml_core.data.base import Dataset
from psml_core.errors import ConfigError
from psml_core.placement.sparsity import (
    analyze,
    feature_counts,
    fit_zipf_exponent,
    worker_overlap,
    write_analysis,
)

# 5 rows x 6 features; feature 5 is never used. Row feature sets:
# r0 {0,1}  r1 {0}  r2 {0,2}  r3 {1,3}  r4 {0,1,2,4}
ROWS = [{0, 1}, {0}, {0, 2}, {1, 3}, {0, 1, 2, 4}]


def _dense() -> np.ndarray:
    X = np.zeros((5, 6), dtype=np.float32)
    for i, feats in enumerate(ROWS):
        X[i, sorted(feats)] = np.arange(1, len(feats) + 1)
    return X


def _ds(X) -> Dataset:
    return Dataset("hand", X, np.zeros(5, np.int64), X[:1], np.zeros(1, np.int64), 2, {})


def _ds_n(X) -> Dataset:
    n = X.shape[0]
    return Dataset("random", X, np.zeros(n, np.int64), X, np.zeros(n, np.int64), 2, {})


def _check_hand_example(stats: dict, workers: int) -> None:
    assert stats["rows"] == 5 and stats["features"] == 6 and stats["nnz"] == 11
    assert stats["density"] == pytest.approx(11 / 30)
    per_row = stats["nnz_per_row"]  # [2, 1, 2, 2, 4]
    assert per_row == {"mean": 2.2, "median": 2.0, "p90": pytest.approx(3.2), "min": 1, "max": 4}
    pop = stats["popularity"]  # rows per feature: [4, 3, 2, 1, 1, 0]
    assert pop["unused_features"] == 1 and pop["used_features"] == 5
    assert pop["top1pct_features"] == 1 and pop["top1pct_nnz_fraction"] == pytest.approx(4 / 11)
    assert pop["max_rows_per_feature"] == 4
    assert pop["zipf_exponent"] is None  # no rank >= 10 in range
    assert pop["zipf_fit"] == {
        "exponent": None,
        "rank_min": None,
        "rank_max": None,
        "r2": None,
        "points": 0,
    }
    assert stats["overlap"]["workers"] == workers


def test_hand_example_one_worker_per_row() -> None:
    stats = analyze(_ds(_dense()), workers=5, seed=7)
    _check_hand_example(stats, 5)
    ov = stats["overlap"]
    # Each worker holds one row, whatever the permutation.
    assert ov["rows_per_worker"] == [1] * 5
    assert sorted(ov["distinct_features"]) == [1, 2, 2, 2, 4]
    assert ov["union"] == 5
    assert ov["replication_factor"] == pytest.approx(11 / 5)
    # Jaccard of the 10 row pairs: 1/2 x4, 1/3 x2, 1/4, 1/5, 0 x2 -> 187/60 in total.
    assert ov["mean_pairwise_jaccard"] == pytest.approx(187 / 600)


def test_hand_example_single_worker() -> None:
    ov = analyze(_ds(_dense()), workers=1, seed=0)["overlap"]
    assert ov["rows_per_worker"] == [5] and ov["distinct_features"] == [5]
    assert ov["union"] == 5 and ov["replication_factor"] == 1.0
    assert ov["mean_pairwise_jaccard"] is None


def test_dense_sparse_and_stored_zeros_agree() -> None:
    X = _dense()
    Xs = sp.csr_matrix(X)
    with_zeros = sp.csr_matrix(
        (np.append(Xs.data, 0.0), np.append(Xs.indices, 5), np.append(Xs.indptr[:-1], Xs.nnz + 1)),
        shape=X.shape,
    )
    assert with_zeros.nnz == 12
    a, b, c = (analyze(_ds(m), workers=2, seed=3) for m in (X, Xs, with_zeros))
    assert a == b == c
    np.testing.assert_array_equal(feature_counts(with_zeros), [4, 3, 2, 1, 1, 0])


def test_fit_zipf_exponent_exact_power_law() -> None:
    counts = np.array([600, 3600, 900, 1200, 720, 1800])  # 3600 / rank, shuffled
    fit = fit_zipf_exponent(counts, min_rank=1, min_count=0)
    assert fit["exponent"] == pytest.approx(1.0, abs=1e-12)
    assert fit["r2"] == pytest.approx(1.0)
    assert (fit["rank_min"], fit["rank_max"], fit["points"]) == (1, 6, 6)
    ranged = fit_zipf_exponent(counts, min_rank=2, min_count=1000)  # ranks 2..3
    assert ranged["points"] == 2 and ranged["exponent"] is None


def test_fit_range_defaults() -> None:
    ranks = np.arange(1, 201)
    counts = np.floor(10_000 * ranks**-1.2).astype(int)
    fit = fit_zipf_exponent(counts)
    assert fit["rank_min"] == 10 and counts[fit["rank_max"] - 1] >= 5
    assert fit["exponent"] == pytest.approx(1.2, abs=0.02)


def _brute_force(X: sp.csr_matrix, workers: int, seed: int) -> dict:
    perm = np.random.default_rng(seed).permutation(X.shape[0])
    sets = [set(X[part].indices.tolist()) for part in np.array_split(perm, workers)]
    union = set().union(*sets)
    pairs = [(a, b) for a, b in itertools.combinations(sets, 2) if a | b]
    return {
        "sizes": [len(s) for s in sets],
        "union": len(union),
        "jaccard": np.mean([len(a & b) / len(a | b) for a, b in pairs]) if pairs else None,
        "replication": sum(map(len, sets)) / len(union) if union else None,
    }


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 40),
    d=st.integers(1, 30),
    density=st.floats(0.0, 0.5),
    workers=st.integers(1, 8),
    seed=st.integers(0, 1000),
)
def test_overlap_matches_brute_force(n, d, density, workers, seed) -> None:
    X = sp.random(n, d, density=density, format="csr", random_state=seed)
    got = worker_overlap(X, workers, seed)
    want = _brute_force(X, workers, seed)
    # Dense data takes the boolean-mask path (never CSR): the same answer.
    assert worker_overlap(X.toarray(), workers, seed) == got
    dense = analyze(_ds_n(X.toarray()), workers, seed)
    assert dense == analyze(_ds_n(X), workers, seed)
    assert got["distinct_features"] == want["sizes"] and got["union"] == want["union"]
    assert sum(got["rows_per_worker"]) == n
    assert max(got["rows_per_worker"]) - min(got["rows_per_worker"]) <= 1
    if want["jaccard"] is None:
        assert got["mean_pairwise_jaccard"] is None
    else:
        assert got["mean_pairwise_jaccard"] == pytest.approx(want["jaccard"])
    if want["replication"] is None:
        assert got["replication_factor"] is None
    else:
        assert got["replication_factor"] == pytest.approx(want["replication"])


def test_workers_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="workers"):
        analyze(_ds(_dense()), workers=0, seed=0)


@pytest.mark.parametrize("dense", [False, True])
def test_empty_matrix(dense: bool) -> None:
    X = sp.csr_matrix((0, 4), dtype=np.float32)
    X = X.toarray() if dense else X
    stats = analyze(Dataset("e", X, np.zeros(0, np.int64), X, np.zeros(0, np.int64), 2), 3, 0)
    assert stats["nnz"] == 0 and stats["overlap"]["replication_factor"] is None
    json.dumps(stats, allow_nan=False)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 100))
def test_write_analysis_sorted_json(tmp_path, seed: int) -> None:
    stats = analyze(_ds(_dense()), workers=2, seed=seed)
    path = tmp_path / "out" / "sparsity.json"
    write_analysis(stats, path)
    text = path.read_text()
    assert json.loads(text) == stats
    assert text == json.dumps(stats, indent=2, sort_keys=True) + "\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["sparsity.json"]
