"""The oracle bound: true-group sample split, every key on its majority worker."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from psml_core.config import DatasetSpec, WorkloadSpec
from psml_core.data import DATASETS
from psml_core.errors import ConfigError
from psml_core.models import make_model
from psml_core.placement.base import PlacementProblem
from psml_core.placement.cost import expected_step_traffic
from psml_core.placement.oracle import (
    dataset_oracle,
    group_split,
    oracle_assignment,
    oracle_bound,
)


def _problem(rows: int, locality: float | None, seed: int = 0, **kw):
    spec = DatasetSpec(name="z", source="zipf_sparse", rows=rows, locality=locality, **kw)
    ds = DATASETS.get("zipf_sparse")(spec).load()
    wl = WorkloadSpec(name="w", dataset="z", model="logreg", batch_size=128, lr=0.1, iterations=1)
    m = make_model(wl, ds.n_features, 2)
    return PlacementProblem(ds.X_train.shape[0], m.n_params, m.incidence(ds.X_train), seed), ds


def test_group_split_keeps_groups_whole_and_balances() -> None:
    groups = np.repeat(np.arange(10), [50, 40, 30, 30, 20, 20, 10, 10, 5, 5])
    owner = group_split(groups, 3)
    for g in range(10):
        assert np.unique(owner[groups == g]).size == 1
    assert np.ptp(np.bincount(owner)) <= 50
    with pytest.raises(ConfigError, match="3 groups cannot be split over 4 workers"):
        group_split(np.arange(3), 4)


def test_a_block_diagonal_problem_has_no_remote_traffic_left() -> None:
    # Two groups with disjoint keys: the oracle keeps every touch local.
    inc = sp.csr_matrix(np.kron(np.eye(2), np.ones((6, 5))).astype(np.int8))
    prob = PlacementProblem(12, 10, inc, seed=3)
    groups = np.repeat([0, 1], 6)
    a = oracle_assignment(prob, groups, 2, 2)
    np.testing.assert_array_equal(a.key_owner, np.repeat(a.sample_owner[[0, 6]], 5))
    b = oracle_bound(prob, groups, 2, 2)
    # Only the three CRC-32 trailers of each (empty) message to the other machine remain.
    assert b.oracle_remote_bytes == pytest.approx(2 * 3 * 4)
    assert b.bound > 0.5 and b.share_of(b.random_remote_bytes) == 0.0
    assert b.share_of(b.oracle_remote_bytes) == 1.0


def test_counts_remote_bytes_as_the_engine_does() -> None:
    prob, ds = _problem(3000, 0.5, features=3000, nnz_per_row=20.0, communities=16)
    b = oracle_bound(prob, ds.groups_train, 4, 32)
    a = oracle_assignment(prob, ds.groups_train, 4, 32)
    ref = expected_step_traffic(prob, a, 4, 4, True, 32)
    assert b.oracle_remote_bytes == ref["remote_bytes_up"] + ref["remote_bytes_down"]
    assert b.remaining == pytest.approx(b.oracle_remote_bytes / b.random_remote_bytes)


def test_the_bound_rises_with_locality() -> None:
    bounds = [oracle_bound(*_bound_args(lam), 8, 128).bound for lam in (0.0, 0.3, 0.6, 0.9)]
    assert all(a < b for a, b in zip(bounds, bounds[1:], strict=False)), bounds
    assert bounds[-1] > 0.7


def _bound_args(lam: float):
    prob, ds = _problem(8000, lam, communities=64)
    return prob, ds.groups_train


def test_at_lambda_zero_the_small_tier_bound_is_the_measured_9p6_percent() -> None:
    """Issue 27's figure: 32,000 training rows, 8 workers, batch 128, random split: 9.6%."""
    prob, ds = _problem(40_000, 0.0, communities=103)
    b = oracle_bound(prob, ds.groups_train, 8, 128)
    assert b.bound == pytest.approx(0.096, abs=0.01)
    wl = WorkloadSpec(name="w", dataset="z", model="logreg", batch_size=128, lr=0.1, iterations=1)
    same = dataset_oracle(ds, make_model(wl, ds.n_features, 2), 8, 128)
    assert same == b


def test_dataset_oracle_needs_planted_groups() -> None:
    _, ds = _problem(500, None, features=400, nnz_per_row=10.0)
    wl = WorkloadSpec(name="w", dataset="z", model="logreg", batch_size=8, lr=0.1, iterations=1)
    with pytest.raises(ConfigError, match="has no planted groups"):
        dataset_oracle(ds, make_model(wl, ds.n_features, 2), 2, 8)


def test_dense_models_and_mismatched_groups_are_refused() -> None:
    with pytest.raises(ConfigError, match="dense model"):
        oracle_bound(PlacementProblem(4, 3), np.arange(4), 2, 2)
    inc = sp.csr_matrix(np.ones((4, 3), np.int8))
    with pytest.raises(ConfigError, match="3 group labels for 4 samples"):
        oracle_bound(PlacementProblem(4, 3, inc), np.arange(3), 2, 2)


def test_the_partition_job_states_each_placements_share_of_the_bound() -> None:
    """`psml partition` writes the bound beside the prediction: random 0, the oracle itself 1."""
    from types import SimpleNamespace

    from psml_core.cli import _oracle_of
    from psml_core.placement.cost import predicted_traffic
    from psml_core.placement.random import RandomPlacement

    prob, ds = _problem(3000, 0.6, features=2000, nnz_per_row=20.0, communities=16)
    wl = WorkloadSpec(name="w", dataset="z", model="logreg", batch_size=32, lr=0.1, iterations=1)
    model = make_model(wl, ds.n_features, 2)
    spec = SimpleNamespace(workers=4, shards=4, colocated=True, seed=0, workload=wl)

    def share(assignment) -> float:
        per = predicted_traffic(prob, assignment, 4, 4, True, batch_size=32)["per_step"]
        got = _oracle_of(spec, ds, model, per)
        assert 0.0 < got["bound"] < 1.0 and got["groups"] == 16
        return got["share"]

    assert share(RandomPlacement().assign(prob, 4, 4)) == pytest.approx(0.0, abs=1e-12)
    assert share(oracle_assignment(prob, ds.groups_train, 4, 32)) == pytest.approx(1.0)
    # Undefined without planted groups, or with shards off the workers' machines.
    assert _oracle_of(SimpleNamespace(**{**vars(spec), "colocated": False}), ds, model, {}) == {}
    _, flat = _problem(500, None, features=400, nnz_per_row=10.0)
    assert _oracle_of(spec, flat, model, {"remote_bytes_up": 1, "remote_bytes_down": 1}) == {}


def test_the_report_table_sets_each_placement_against_the_bound() -> None:
    import pandas as pd

    from psml_core.report.tables import oracle_table

    bound = {"random_remote_bytes": 1000.0, "oracle_remote_bytes": 400.0, "bound": 0.6,
             "share": 0.5}  # fmt: skip
    parts = {("w", "jpdc"): {"placement": "parsa", "oracle": {**bound}},
             ("w", "rand"): {"placement": "random", "oracle": {**bound, "share": 0.0}},
             ("w", "dense"): {"placement": "range"}}  # fmt: skip
    runs = pd.DataFrame(
        [{"workload": "w", "method": "jpdc", "remote_bytes_up": 500, "remote_bytes_down": 200,
          "iterations": 1}]  # 700 B per step: (1000 - 700) / 600 = 50 % of the possible cut
    )  # fmt: skip
    table = oracle_table("t", runs, parts, ["jpdc", "rand", "dense"])
    assert [r[0] for r in table.rows] == ["w · jpdc (parsa)", "w · rand (random)"]
    assert table.rows[0][3:] == ["60.0\u00a0%", "50.0\u00a0%", "50.0\u00a0%"]
    assert table.rows[1][5] == "–"  # no runs of it
    assert oracle_table("t", runs, {("w", "dense"): {}}, ["dense"]) is None
