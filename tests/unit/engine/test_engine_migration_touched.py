"""The dynamic partition under touched pulls, on a DNN of sparse features (sparse_mlp).

There a chunk's location decides which bytes cross machines: a worker pulls and pushes only the
keys its batch touches. Moving keys must still change nothing but where they live (kv pushes
are per key, summed in a fixed order), while the remote bytes, and the migration, change.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from psml_core.config import BlockSpec, DatasetSpec, WorkloadSpec
from psml_core.data import DATASETS
from psml_core.engine import SimBackend, staged_job
from psml_core.recipes import check_method, load_methods

P = 4


@pytest.fixture(scope="module")
def data():
    spec = DatasetSpec(
        name="zc", source="zipf_sparse", rows=1600, features=2000, nnz_per_row=15.0,
        communities=8, locality=0.8, seed=3,
    )  # fmt: skip
    return spec, DATASETS.get("zipf_sparse")(spec).load()


def spec_for(smoke, data, recipe: str, **placement):
    dspec, _ = data
    run = smoke.run("digits_mlp", "dense_bsp", "dc_10g", smoke.seeds[0])
    base = load_methods()[recipe]
    wl = WorkloadSpec(
        name="smlp", dataset="zc", model="sparse_mlp", hidden=(4, 4), batch_size=16,
        optimizer="adagrad", lr=0.05, iterations=13, eval_every=4, target_accuracy=0.9,
    )  # fmt: skip
    params = {**base.placement.params, "chunk": 16, **placement}
    method = dataclasses.replace(base, placement=BlockSpec("dynamic", params))
    return dataclasses.replace(
        run, dataset=dspec, workload=wl, method=method, workers=P, shards=P, colocated=True
    )


def simulate(spec, data):
    job = staged_job(spec, data[1])
    return job, sorted(SimBackend().run(job), key=lambda r: (r.iteration, r.worker))


def test_the_touched_recipes_pass_the_movability_check() -> None:
    for name in ("jpdc_dynamic_touched", "jpdc_touched_static"):
        check_method(load_methods()[name])


def test_moving_touched_keys_changes_the_bytes_not_the_training(smoke, data) -> None:
    static_job, static = simulate(spec_for(smoke, data, "jpdc_touched_static"), data)
    job, recs = simulate(spec_for(smoke, data, "jpdc_dynamic_touched", period=4), data)
    assert static_job.dynamic is not None and not any(r.migration_bytes for r in static)
    accepted = [d for d in job.dynamic.decisions if d.accepted]
    assert accepted, job.dynamic.decisions
    # Samples by true group; chunks moved; the math unchanged, bit for bit.
    groups = data[1].groups_train
    for w in range(P):
        assert np.unique(groups[job.assignment.sample_owner == w]).size < 8
    assert [r.loss for r in recs] == [r.loss for r in static]
    assert job.global_params().tobytes() == static_job.global_params().tobytes()
    # Traffic: the same bytes in all (the touched keys do not depend on where they live) plus
    # the migration; fewer of them remote once chunks sit with the workers that use them.
    moved = sum(r.migration_bytes for r in recs)
    assert moved > 0
    total = sum(r.bytes_up + r.bytes_down for r in recs)
    assert total == sum(r.bytes_up + r.bytes_down for r in static) + moved
    remote = sum(r.remote_bytes_up + r.remote_bytes_down for r in recs)
    static_remote = sum(r.remote_bytes_up + r.remote_bytes_down for r in static)
    assert remote < static_remote
    # The estimate that justified each move: saving over the horizon beat the migration.
    assert all(d.saving_bytes > d.migration_bytes for d in accepted)


def test_a_group_split_needs_planted_groups(smoke, data) -> None:
    from psml_core.errors import ConfigError

    spec = spec_for(smoke, data, "jpdc_dynamic_touched")
    plain = dataclasses.replace(data[1], groups_train=None, groups_test=None)
    with pytest.raises(ConfigError, match="needs a data set with planted groups"):
        staged_job(spec, plain)
