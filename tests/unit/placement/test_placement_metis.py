from __future__ import annotations

import logging

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from psml_core.config import BlockSpec
from psml_core.data.zipf_sparse import ZipfParams, generate
from psml_core.errors import ConfigError
from psml_core.placement import PLACEMENTS, PlacementProblem, predicted_traffic
from psml_core.placement.metis import bipartite_graph
from psml_core.placement.parsa import capacity, rebalance_samples


def zipf_problem(rows: int = 800, features: int = 2000, nnz: float = 12, seed: int = 0):
    X, _, _ = generate(
        ZipfParams(
            rows=rows, features=features, nnz_per_row=nnz, zipf_exponent=1.0, positive_rate=0.5
        ),
        seed,
    )
    X.data[:] = 1
    return PlacementProblem(rows, features, X, seed=seed)


@st.composite
def sparse_problems(draw, max_n=60, max_m=50):
    n = draw(st.integers(1, max_n))
    m = draw(st.integers(1, max_m))
    workers = draw(st.integers(1, min(n, 6)))
    shards = draw(st.integers(1, min(m, 6)))
    density = draw(st.floats(0.0, 0.6))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    inc = sp.csr_matrix((rng.random((n, m)) < density).astype(np.int8))
    return PlacementProblem(n, m, inc, seed=draw(st.integers(0, 1000))), workers, shards


@settings(max_examples=50, deadline=None)
@given(sparse_problems(), st.booleans())
def test_metis_is_valid_balanced_and_deterministic(case, recursive):
    problem, workers, shards = case
    place = PLACEMENTS.build(BlockSpec("metis", {"recursive": recursive}))
    a = place.assign(problem, workers, shards)
    n, m = problem.n_samples, problem.n_keys
    assert a.sample_owner.shape == (n,) and a.key_owner.shape == (m,)
    assert a.sample_owner.dtype == np.int32 and a.key_owner.dtype == np.int32
    s_counts = np.bincount(a.sample_owner, minlength=workers)
    k_counts = np.bincount(a.key_owner, minlength=shards)
    assert s_counts.size == workers and k_counts.size == shards
    assert s_counts.min() >= 1 and k_counts.min() >= 1
    assert s_counts.max() <= capacity(n, workers, 0.05)
    assert s_counts.min() >= max(1, int(0.95 * n / workers))
    assert k_counts.max() <= capacity(m, shards, 0.05)
    b = place.assign(problem, workers, shards)
    assert np.array_equal(a.sample_owner, b.sample_owner)
    assert np.array_equal(a.key_owner, b.key_owner)


@pytest.mark.parametrize("seed", [0, 1])
def test_metis_cuts_remote_traffic_versus_random(seed):
    problem = zipf_problem(seed=seed)
    traffic = {}
    for name in ("random", "metis"):
        a = PLACEMENTS.build(BlockSpec(name)).assign(problem, 4, 4)
        traffic[name] = predicted_traffic(problem, a, 4, 4, colocated=True)
    assert traffic["metis"]["sum_remote"] < 0.8 * traffic["random"]["sum_remote"]
    assert traffic["metis"]["max_remote"] < traffic["random"]["max_remote"]


def test_disjoint_clusters_are_separated_exactly():
    rng = np.random.default_rng(0)
    dense = np.zeros((60, 40), dtype=np.int8)
    dense[:30, :20] = rng.random((30, 20)) < 0.3
    dense[30:, 20:] = rng.random((30, 20)) < 0.3
    dense[:30, 0] = dense[30:, 20] = 1  # one hub key per cluster keeps each one connected
    inc = sp.csr_matrix(dense)
    problem = PlacementProblem(60, 40, inc)
    a = PLACEMENTS.build(BlockSpec("metis")).assign(problem, 2, 2)
    assert predicted_traffic(problem, a, 2, 2, colocated=True)["sum_remote"] == 0


def test_bipartite_graph_weights():
    # key 0: 3 samples, key 1: 2 samples, key 2: 1 sample (left out), key 3: none (left out)
    inc = sp.csr_matrix(np.array([[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]], np.int8))
    xadj, adjncy, vw, ew = bipartite_graph(inc, edge_weight_scale=100)
    assert vw.tolist() == [1, 1, 1, 0, 0]  # 3 samples, 2 kept keys
    adj = {v: adjncy[xadj[v] : xadj[v + 1]].tolist() for v in range(5)}
    assert adj == {0: [3, 4], 1: [3, 4], 2: [3], 3: [0, 1, 2], 4: [0, 1]}
    w = {v: ew[xadj[v] : xadj[v + 1]].tolist() for v in range(5)}
    # weight = round(100 / (deg(k) - 1)): key 0 -> 50, key 1 -> 100; symmetric
    assert w == {0: [50, 100], 1: [50, 100], 2: [50], 3: [50, 50, 50], 4: [100, 100]}


def test_rebalance_enforces_both_bounds():
    rng = np.random.default_rng(1)
    inc = sp.csr_matrix((rng.random((100, 30)) < 0.2).astype(np.int8))
    owner = np.zeros(100, dtype=np.int32)
    owner[:5] = 1  # worker 0 holds 95 samples, worker 1 5, worker 2 none
    out = rebalance_samples(inc, owner, 3, cap=35, floor=31)
    counts = np.bincount(out, minlength=3)
    assert counts.sum() == 100 and counts.max() <= 35 and counts.min() >= 31


def test_graph_without_edges_still_gets_a_valid_placement():
    inc = sp.csr_matrix(np.eye(8, dtype=np.int8))  # every key has one sample: no kept key
    a = PLACEMENTS.build(BlockSpec("metis")).assign(PlacementProblem(8, 8, inc), 4, 4)
    assert np.bincount(a.sample_owner).tolist() == [2, 2, 2, 2]
    t = predicted_traffic(PlacementProblem(8, 8, inc), a, 4, 4, colocated=True)
    assert t["sum_remote"] == 0  # Step B keeps each key with its only user


def test_dense_problem_falls_back_to_range_with_a_note(caplog):
    with caplog.at_level(logging.WARNING):
        a = PLACEMENTS.build(BlockSpec("metis")).assign(PlacementProblem(12, 9), 3, 3)
    assert np.bincount(a.sample_owner).tolist() == [4, 4, 4]
    assert np.bincount(a.key_owner).tolist() == [3, 3, 3]
    assert "'metis'" in caplog.text and "dense" in caplog.text


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"eps": "x"}, "params.eps must be a number >= 0"),
        ({"edge_weight_scale": 0}, "params.edge_weight_scale must be an integer >= 1"),
        ({"ufactor": 3}, "bad params"),
        ({"recursive": "yes"}, "params.recursive must be true or false"),
    ],
)
def test_bad_params_are_config_errors(params, fragment):
    with pytest.raises(ConfigError, match=fragment):
        PLACEMENTS.build(BlockSpec("metis", params))
