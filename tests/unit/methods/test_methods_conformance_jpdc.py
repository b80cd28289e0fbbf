"""Conformance of jpdc (Duan & Wu, JPDC 2023) and its placement/hashing baselines.

Linear models on the sparse workload (hashing needs a sparse data set); the DNN dynamic
partition on the digits MLP (its reassignments: tests/unit/engine/test_engine_migration.py), and
under touched pulls on a DNN of sparse features over data with planted groups
(tests/unit/engine/test_engine_migration_touched.py).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conformance import MethodConformance, RunCache

from psml_core.config import DatasetSpec
from psml_core.data import prepare_dataset
from psml_core.data.store import load_prepared
from psml_core.engine.stages import staged_job
from psml_core.engine.torchdist.backend import DistBackend, DistOptions
from psml_core.errors import ConfigError


class TestJPDCConformance(MethodConformance):
    paper = "jpdc"
    recipes = ("jpdc", "jpdc_metis", "partition_only", "hashing_only", "random_partition")
    dist_recipes = ("jpdc",)
    workload = "rcv1_logreg"


class TestJPDCDNNConformance(MethodConformance):
    paper = "jpdc"
    recipes = ("jpdc_dynamic", "jpdc_dnn_fixed")
    workload = "digits_mlp"

    def test_dist_backend(self, runs: RunCache, prepared: dict[str, Path]) -> None:  # type: ignore[override]
        """No dist run: the dist backend refuses a dynamic placement, naming the sim backend."""
        for name in self.recipes:
            spec = runs.spec(name, backend="dist")
            job = staged_job(spec, load_prepared(prepared[spec.dataset.name]))
            with pytest.raises(ConfigError, match="placement 'dynamic'.*sim backend"):
                DistBackend(DistOptions()).run(job)


class _GroupedRuns(RunCache):
    """The smoke runs on a sparse DNN (sparse_mlp) over Zipf data with planted communities."""

    def __init__(self, smoke, prepared, owner, dataset: DatasetSpec) -> None:
        super().__init__(smoke, prepared, owner)
        self.dataset = dataset

    def spec(self, name: str, backend: str = "sim"):
        base = super().spec(name, backend)
        wl = dataclasses.replace(
            base.workload, dataset=self.dataset.name, model="sparse_mlp", hidden=(4, 4)
        )
        return dataclasses.replace(base, dataset=self.dataset, workload=wl)


class TestJPDCTouchedConformance(MethodConformance):
    """The dynamic partition under touched pulls, on a DNN of sparse features with true groups."""

    paper = "jpdc"
    recipes = ("jpdc_dynamic_touched", "jpdc_touched_static")
    workload = "rcv1_logreg"

    @pytest.fixture(scope="class")
    @classmethod
    def runs(cls, smoke, prepared, tmp_path_factory) -> RunCache:  # type: ignore[override]
        ds = DatasetSpec(
            name="zipf_groups", source="zipf_sparse", rows=2000, features=3000,
            nnz_per_row=20.0, communities=8, locality=0.5,
        )  # fmt: skip
        where = tmp_path_factory.mktemp("zipf_groups")
        prepare_dataset(ds, where)
        return _GroupedRuns(smoke, {**prepared, ds.name: where}, cls, ds)

    def test_dist_backend(self, runs: RunCache, prepared: dict[str, Path]) -> None:  # type: ignore[override]
        """No dist run: the dist backend refuses a dynamic placement, naming the sim backend."""
        for name in self.recipes:
            spec = runs.spec(name, backend="dist")
            job = staged_job(spec, load_prepared(runs.prepared[spec.dataset.name]))
            with pytest.raises(ConfigError, match="placement 'dynamic'.*sim backend"):
                DistBackend(DistOptions()).run(job)
