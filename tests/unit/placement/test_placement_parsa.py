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
from psml_core.placement import PLACEMENTS, Assignment, PlacementProblem, predicted_traffic
from psml_core.placement.parsa import assign_keys, capacity, greedy_samples, worker_users


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
    density = draw(st.floats(0.0, 0.5))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    inc = sp.csr_matrix((rng.random((n, m)) < density).astype(np.int8))
    return PlacementProblem(n, m, inc, seed=draw(st.integers(0, 1000))), workers, shards


def check_assignment(a, problem, workers, shards, eps):
    n, m = problem.n_samples, problem.n_keys
    assert a.sample_owner.shape == (n,) and a.key_owner.shape == (m,)
    assert a.sample_owner.dtype == np.int32 and a.key_owner.dtype == np.int32
    s_counts = np.bincount(a.sample_owner, minlength=workers)
    k_counts = np.bincount(a.key_owner, minlength=shards)
    assert s_counts.size == workers and k_counts.size == shards  # nothing out of range
    assert s_counts.min() >= 1 and k_counts.min() >= 1
    assert s_counts.max() <= capacity(n, workers, eps)
    assert k_counts.max() <= capacity(m, shards, eps)


@settings(max_examples=60, deadline=None)
@given(sparse_problems(), st.sampled_from(["partition", "stream"]), st.integers(1, 80))
def test_parsa_is_valid_balanced_and_deterministic(case, visit, block):
    problem, workers, shards = case
    place = PLACEMENTS.build(BlockSpec("parsa", {"block": block, "visit": visit}))
    a = place.assign(problem, workers, shards)
    check_assignment(a, problem, workers, shards, eps=0.05)
    b = place.assign(problem, workers, shards)
    assert np.array_equal(a.sample_owner, b.sample_owner)
    assert np.array_equal(a.key_owner, b.key_owner)


def test_partition_order_is_balanced_to_one_sample():
    problem = zipf_problem(rows=803)
    a = PLACEMENTS.build(BlockSpec("parsa", {"block": 100})).assign(problem, 8, 8)
    counts = np.bincount(a.sample_owner)
    assert counts.max() - counts.min() <= 1


@pytest.mark.parametrize("seed", [0, 1])
def test_parsa_cuts_remote_traffic_versus_random(seed):
    problem = zipf_problem(seed=seed)
    traffic = {}
    for name in ("random", "parsa"):
        a = PLACEMENTS.build(BlockSpec(name)).assign(problem, 4, 4)
        traffic[name] = predicted_traffic(problem, a, 4, 4, colocated=True)
    assert traffic["parsa"]["sum_remote"] < 0.8 * traffic["random"]["sum_remote"]
    assert traffic["parsa"]["max_remote"] < traffic["random"]["max_remote"]


def test_disjoint_clusters_are_separated_exactly():
    # Samples 0-9 use keys 0-4 only, samples 10-19 keys 5-9 only (interleaved in the stream).
    rows = []
    for i in range(20):
        base = 0 if i % 2 == 0 else 5
        rows.append([base + (i % 5), base + ((i + 1) % 5), base + ((i + 2) % 5)])
    inc = sp.csr_matrix(
        (np.ones(60, np.int8), (np.repeat(np.arange(20), 3), np.array(rows).ravel())),
        shape=(20, 10),
    )
    problem = PlacementProblem(20, 10, inc)
    a = PLACEMENTS.build(BlockSpec("parsa")).assign(problem, 2, 2)
    t = predicted_traffic(problem, a, 2, 2, colocated=True)
    assert t["sum_remote"] == 0
    assert len(set(a.sample_owner[0::2])) == 1 and len(set(a.sample_owner[1::2])) == 1


def test_step_a_cost_hand_example():
    # Partition order, 2 workers, one block. Costs |F_i \ N_p| start at |F_i| = [2, 2, 2, 1]:
    # worker 0 takes sample 3 ({3}); worker 1 (empty) takes the first cheapest, sample 0
    # ({0, 1}); worker 0 then prefers sample 1 ({3, 4}, cost 1) and worker 1 gets sample 2,
    # which shares key 0 with its sample 0.
    inc = sp.csr_matrix(
        np.array([[1, 1, 0, 0, 0], [0, 0, 0, 1, 1], [1, 0, 1, 0, 0], [0, 0, 0, 1, 0]], np.int8)
    )
    assert greedy_samples(inc, workers=2, block=10, eps=0.05).tolist() == [1, 0, 1, 0]
    # Stream order: sample 0 to worker 0 (equal costs and loads: lower id), sample 1 to worker 1
    # (equal costs, lower load), sample 2 to worker 0 (cost 1 against 2), sample 3 to worker 1
    # (cost 0 there; worker 0 is full at floor(1.05 * 4 / 2) = 2 samples).
    stream = greedy_samples(inc, workers=2, block=10, eps=0.05, visit="stream")
    assert stream.tolist() == [0, 1, 0, 1]


def test_step_b_puts_every_key_on_a_user_when_capacity_allows():
    problem = zipf_problem(rows=400, features=600, nnz=8)
    owner = PLACEMENTS.build(BlockSpec("random")).assign(problem, 4, 4).sample_owner
    inc = problem.incidence.tocsr()
    keys = assign_keys(inc, owner, workers=4, shards=4, eps=10.0)  # capacity never binds
    U = worker_users(inc, owner, 4).tocsc()
    for k in range(problem.n_keys):
        users = U.indices[U.indptr[k] : U.indptr[k + 1]]
        if users.size:
            assert keys[k] in users
    # so the sum of remote keys is the lower bound sum_k (|W_k| - 1)
    w = np.diff(U.indptr)
    t = predicted_traffic(problem, Assignment(owner, keys), 4, 4, colocated=True)
    assert t["sum_remote"] == int(np.sum(np.maximum(w - 1, 0)))


def test_step_b_untouched_keys_go_round_robin():
    inc = sp.csr_matrix(np.array([[1, 0, 0, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0, 0, 0]], np.int8))
    keys = assign_keys(inc, np.array([0, 1], np.int32), workers=2, shards=2, eps=0.05)
    assert keys[:2].tolist() == [0, 1]  # local to their only user
    assert keys[2:].tolist() == [0, 1, 0, 1, 0, 1]


def test_dense_problem_falls_back_to_range_with_a_note(caplog):
    with caplog.at_level(logging.WARNING):
        a = PLACEMENTS.build(BlockSpec("parsa")).assign(PlacementProblem(10, 20), 2, 4)
    assert a.sample_owner.tolist() == [0] * 5 + [1] * 5
    assert np.bincount(a.key_owner).tolist() == [5, 5, 5, 5]
    assert "dense" in caplog.text and "range" in caplog.text


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"eps": -0.1}, "params.eps must be a number >= 0"),
        ({"block": 0}, "params.block must be an integer >= 1"),
        ({"visit": "random"}, "params.visit 'random' is not allowed; allowed values: partition"),
        ({"blocks": 3}, "bad params"),
    ],
)
def test_bad_params_are_config_errors(params, fragment):
    with pytest.raises(ConfigError, match=fragment):
        PLACEMENTS.build(BlockSpec("parsa", params))


def test_too_many_workers_is_a_clear_error():
    inc = sp.csr_matrix(np.ones((3, 4), np.int8))
    with pytest.raises(ConfigError, match="cannot split 3 samples over 4 parts"):
        PLACEMENTS.build(BlockSpec("parsa")).assign(PlacementProblem(3, 4, inc), 4, 2)
