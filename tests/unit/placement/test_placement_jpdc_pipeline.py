"""jpdc end to end below training: the hash and placement stages, `psml partition`, `analyze`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from psml_core.cli import main
from psml_core.config import BlockSpec, HashingSpec
from psml_core.data.store import load_prepared
from psml_core.engine import build_job, staged_job
from psml_core.engine.stages import hash_stage, place_stage
from psml_core.engine.training import load_assignment
from psml_core.errors import ConfigError


def jpdc_spec(smoke, workload="rcv1_logreg", placement="parsa", ratio=1 / 16):
    run = smoke.run(workload, "dense_bsp", "dc_10g", smoke.seeds[0])
    method = dataclasses.replace(
        run.method,
        name="jpdc_test",
        hashing=HashingSpec(ratio=ratio),
        placement=BlockSpec(placement),
    )
    wl = dataclasses.replace(run.workload, iterations=2)
    return dataclasses.replace(run, method=method, workload=wl)


def test_staged_job_hashes_before_model_and_placement(smoke, prepared):
    spec = jpdc_spec(smoke)
    raw = load_prepared(prepared["zipf_rcv1"])
    m = spec.method.hashing.buckets_for(raw.n_features)
    job = staged_job(spec, raw)
    assert job.dataset.n_features == m and job.dataset.meta["hashing"]["buckets"] == m
    assert job.model.n_params == m + 1  # binary logistic regression: m weights and a bias
    assert job.assignment.key_owner.shape == (m + 1,)
    assert all(w.X.shape[1] == m for w in job.workers)
    assert raw.n_features > m  # the caller's data set is not modified


def test_build_job_requires_the_hash_stages_data(smoke, prepared):
    """build_job hashes nothing: raw data for a hashing recipe names the stage to run."""
    spec = jpdc_spec(smoke)
    raw = load_prepared(prepared["zipf_rcv1"])
    hashed = hash_stage(spec, raw)
    placed = place_stage(spec, hashed)
    with pytest.raises(ConfigError, match="is raw; give the data set `psml hash` wrote"):
        build_job(spec, raw, placed.assignment)
    job = build_job(spec, hashed, placed.assignment)
    staged = staged_job(spec, raw)
    assert job.dataset.n_features == staged.dataset.n_features
    assert (job.assignment.key_owner == staged.assignment.key_owner).all()
    assert (job.assignment.sample_owner == staged.assignment.sample_owner).all()


def test_partition_cli_uses_the_hashed_data(smoke, prepared, tmp_path: Path):
    spec = jpdc_spec(smoke)
    out, traffic = tmp_path / "a.npz", tmp_path / "t.json"
    data = str(prepared["zipf_rcv1"])
    rc = main(
        ["partition", "--run", spec.to_json(), "--data", data]
        + ["--out", str(out), "--traffic", str(traffic)]
    )
    assert rc == 0
    t = json.loads(traffic.read_text())
    m = t["hashing"]["buckets"]
    assert t["n_keys"] == m + 1 and t["placement"] == "parsa"
    # the assignment fits the job staged_job makes from the same raw data
    job = staged_job(spec, load_prepared(prepared["zipf_rcv1"]), load_assignment(out))
    assert job.model.n_params == m + 1


def test_analyze_cli_reports_raw_and_hashed(prepared, tmp_path: Path, capsys):
    out = tmp_path / "s.json"
    data = str(prepared["zipf_rcv1"])
    rc = main(
        ["analyze", "--data", data, "--workers", "4", "--out", str(out)]
        + ["--hashing", '{"ratio": 0.0625}', "--hashing", '{"buckets": 100, "signed": false}']
    )
    assert rc == 0
    stats = json.loads(out.read_text())
    assert [h["features"] for h in stats["hashed"]] == [round(stats["features"] / 16), 100]
    assert stats["hashed"][1]["hashing"]["signed"] is False
    capsys.readouterr()  # the good run's start and done lines
    rc = main(["analyze", "--data", data, "--workers", "4", "--out", str(out), "--hashing", "{}"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "give exactly one of 'buckets'" in err and "\n" not in err


def test_hashing_recipe_on_dense_data_is_a_config_error(smoke, prepared):
    spec = jpdc_spec(smoke, workload="digits_mlp")
    with pytest.raises(ConfigError, match="'hashing' field needs a sparse data set.*'digits'"):
        staged_job(spec, load_prepared(prepared["digits"]))


JPDC_RECIPES = ["jpdc", "jpdc_metis", "partition_only", "hashing_only", "random_partition"]


def test_shipped_jpdc_recipes_place_the_smoke_data(smoke, prepared, tmp_path: Path):
    from psml_core.recipes import load_methods

    recipes = load_methods()
    assert {r: recipes[r].role for r in JPDC_RECIPES} == {
        "jpdc": "method",
        "jpdc_metis": "method",
        "partition_only": "baseline",
        "hashing_only": "baseline",
        "random_partition": "baseline",
    }
    assert all(recipes[r].paper == "jpdc" and recipes[r].deviations for r in JPDC_RECIPES)
    remote = {}
    for name in JPDC_RECIPES:
        run = smoke.run("rcv1_logreg", "dense_bsp", "dc_10g", smoke.seeds[0])
        spec = dataclasses.replace(run, method=recipes[name])
        out, traffic = tmp_path / f"{name}.npz", tmp_path / f"{name}.json"
        args = ["partition", "--run", spec.to_json(), "--data", str(prepared["zipf_rcv1"])]
        assert main([*args, "--out", str(out), "--traffic", str(traffic)]) == 0
        t = json.loads(traffic.read_text())
        assert ("hashing" in t) == (recipes[name].hashing is not None)
        remote[name] = t["sum_remote"]
    assert remote["partition_only"] < remote["random_partition"]
    assert remote["jpdc"] <= remote["hashing_only"]
