"""A training job's SLURM memory: its own measured peak, else an estimate sized from the run."""

from __future__ import annotations

import dataclasses
import json

import pytest

from psml_core.footprint import (
    BASE_MB,
    FLOOR_MB,
    MARGIN,
    PER_REPLICA_PARAM_BYTES,
    estimate_mb,
    measured_mb,
    train_mem_mb,
)
from psml_core.models import make_model


@pytest.fixture
def digits(smoke, prepared):
    spec = smoke.run("digits_mlp", "topk_ef", "dc_10g", smoke.seeds[0])
    manifest = json.loads((prepared["digits"] / "manifest.json").read_text())
    return spec, manifest


def test_a_measured_peak_wins_over_the_estimate_and_a_retry_asks_for_more(digits, tmp_path):
    spec, manifest = digits
    bench = tmp_path / "seed0.tsv"
    bench.write_text("s\th:m:s\tmax_rss\tmax_vms\n12.0\t0:00:12\t2000.5\t3000\n")
    assert measured_mb(bench) == 2000.5
    assert train_mem_mb(spec, manifest, bench) == 2700  # 1.3 x 2000.5, rounded up to 100 MB
    assert train_mem_mb(spec, manifest, bench, attempt=2) == 5300
    assert measured_mb(tmp_path / "none.tsv") is None
    bench.write_text("garbage\n")
    assert measured_mb(bench) is None


def test_the_estimate_grows_with_workers_and_model_and_counts_processes(digits):
    spec, manifest = digits
    n = make_model(spec.workload, manifest["n_features"], manifest["n_classes"]).n_params
    base = estimate_mb(spec, n, 0)
    more = estimate_mb(dataclasses.replace(spec, workers=spec.workers + 10), n, 0)
    assert more - base == pytest.approx(10 * n * PER_REPLICA_PARAM_BYTES / 1e6)
    assert estimate_mb(spec, n, 10**9) - base == pytest.approx(2000.0)  # the data, twice
    dist = dataclasses.replace(spec, backend="dist")
    extra = spec.workers + spec.shards - 1
    assert estimate_mb(dist, n, 0) - base == pytest.approx(extra * BASE_MB)
    # A smoke run asks for the floor, not the 16 GB every train job used to reserve.
    assert train_mem_mb(spec, manifest, "no-benchmark.tsv") == FLOOR_MB
    assert MARGIN * base <= FLOOR_MB


def test_a_hashing_recipe_is_sized_for_its_hashed_model(smoke, prepared):
    from psml_core.footprint import _params

    spec = smoke.run("rcv1_logreg", "jpdc", "dc_10g", smoke.seeds[0])
    manifest = json.loads((prepared[spec.dataset.name] / "manifest.json").read_text())
    m = spec.method.hashing.buckets_for(manifest["n_features"])
    want = make_model(spec.workload, m, manifest["n_classes"]).n_params
    assert _params(spec, manifest) == want and m < manifest["n_features"]
    # The workflow trains a hashing recipe on the hash stage's output, whose manifest says m.
    hashed = {**manifest, "n_features": m, "meta": {**manifest["meta"], "hashing": {"buckets": m}}}
    assert _params(spec, hashed) == want
