"""Conformance of jpdc (Duan & Wu, JPDC 2023) and its placement/hashing baselines.

Linear models on the sparse workload (hashing needs a sparse data set); the DNN dynamic
partition on the digits MLP (its reassignments: tests/unit/engine/test_engine_migration.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conformance import MethodConformance, RunCache

from psml_core.data.store import load_prepared
from psml_core.engine.job import build_job
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
            job = build_job(spec, load_prepared(prepared[spec.dataset.name]))
            with pytest.raises(ConfigError, match="placement 'dynamic'.*sim backend"):
                DistBackend(DistOptions()).run(job)
