"""Calibrated sweeps: a paper's parameter in its own units, mapped by one fitted factor."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from psml_core.config.calibration import (
    apply_calibration,
    calibration_json,
    calibration_runs,
    read_factor,
)
from psml_core.engine.calibrate import fit_factor, search_factor
from psml_core.errors import ConfigError, DataError, RunError
from psml_core.recipes import load_experiment
from psml_core.run_resolver import calibrated

REPO = Path(__file__).resolve().parents[2]
KEY = "ratatouille.theta0"
SWEEP = {
    "method": "ratatouille_async",
    "params": ["codec.params.theta0"],
    "values": [0.2, 0.6],
    "labels": ["t0p2", "t0p6"],
    "calibration": KEY,
}


def _exp(sweep=None, **top):
    user = {
        "tier": "smoke",
        "experiments": {
            "pf_theta": {"methods": ["dense_asp"], "sweep": sweep or SWEEP},
            "jpdc": None,
            "dfs": None,
            "ratatouille": None,
            "dc2": None,
            "pcp": None,
            "overview": None,
        },
        **top,
    }
    return load_experiment(user, REPO / "config")


@pytest.fixture(scope="module")
def exp():
    return _exp()


def test_a_calibrated_sweep_marks_its_recipes_and_schedules_the_fit(exp) -> None:
    t0p6 = exp.recipes["ratatouille_async__t0p6"]
    assert t0p6.calibrated == {"id": KEY, "params": SWEEP["params"], "value": 0.6}
    assert "paper's units" in t0p6.description
    cal = exp.calibrations[KEY]
    assert (cal.point, cal.reduction, cal.seed, cal.baseline) == (0.2, 38.37, 1000, "dense_asp")
    assert (cal.workload, cal.scenario) == ("digits_mlp_pf", "dc_10g")
    method, baseline = calibration_runs(exp, KEY)
    assert method.seed == baseline.seed == 1000
    assert method.method.name == "ratatouille_async__calibration"
    assert method.method.calibrated["value"] == 0.2 and baseline.method.name == "dense_asp"
    assert json.loads(calibration_json(exp, KEY))["calibration"]["key"] == KEY


def test_uncalibrated_recipes_keep_their_spec_json(exp) -> None:
    """A recipe without the marker has no 'calibrated' key: its config hash did not move."""
    run = exp.run("digits_mlp_pf", "dense_asp", "dc_10g", 0)
    assert "calibrated" not in run.to_dict()["method"]
    assert (
        "calibrated"
        in exp.run("digits_mlp_pf", "ratatouille_async__t0p2", "dc_10g", 0).to_dict()["method"]
    )


def test_apply_sets_every_path_to_value_times_factor_and_records_it(exp) -> None:
    run = exp.run("digits_mlp_pf", "ratatouille_async__t0p6", "dc_10g", 0)
    got = apply_calibration(run, 0.05)
    assert got.method.codec.params["theta0"] == pytest.approx(0.03)
    assert got.method.calibrated["factor"] == 0.05
    assert got.config_hash() != run.config_hash()
    with pytest.raises(ConfigError, match="factor must be positive"):
        apply_calibration(run, 0.0)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (
            {"calibration": "ratatouille.nope"},
            r"no calibration 'ratatouille.nope'.*known: ratatouille.theta0",
        ),
        ({"calibration": "dfs.theta0"}, r"no calibration 'dfs.theta0'"),
        ({"params": ["codec.params.theta0", "codec.params.a"]}, "make them the same"),
    ],
)
def test_a_sweep_that_does_not_match_its_calibration_is_refused(change, match) -> None:
    with pytest.raises(ConfigError, match=match):
        _exp({**SWEEP, **change})


def test_the_tuning_seed_may_not_be_a_verdict_seed() -> None:
    with pytest.raises(ConfigError, match=r"'tuning.seed': 1000 is a verdict seed"):
        _exp(seeds=[0, 1000])


def _cal(exp, **kw):
    return dataclasses.replace(exp.calibrations[KEY], **kw)


def test_search_bisects_in_log_factor_to_the_target(exp) -> None:
    calls = []

    def reduction(f: float) -> float:  # rises with the factor, 50% at f = 0.01
        calls.append(f)
        return 100.0 / (1.0 + (0.01 / f))

    factor, trials = search_factor(reduction, _cal(exp, reduction=50.0, tolerance=0.1))
    assert factor == pytest.approx(0.01, rel=0.01) and abs(trials[-1][1] - 50.0) <= 0.1
    assert calls[:2] == [exp.calibrations[KEY].low, exp.calibrations[KEY].high]
    assert len(trials) <= exp.calibrations[KEY].max_trials


def test_a_target_below_the_floor_fails_after_one_run(exp) -> None:
    calls = []

    def floor(f: float) -> float:
        calls.append(f)
        return 78.0 + math.log10(f / 1e-3)

    with pytest.raises(RunError, match=r"already 78.0%, above the reported 38.37%.*floor"):
        search_factor(floor, _cal(exp))
    assert len(calls) == 1
    with pytest.raises(RunError, match="only 1.0%, below the reported"):
        search_factor(lambda f: 1.0, _cal(exp))


def test_fit_factor_trains_the_baseline_and_trials_on_the_tuning_seed(exp, tmp_path) -> None:
    from psml_core.data import prepare_dataset

    method, baseline = calibration_runs(exp, KEY)
    short = dataclasses.replace(method.workload, iterations=8, eval_every=4)
    method = dataclasses.replace(method, workload=short)
    baseline = dataclasses.replace(baseline, workload=short)
    prepare_dataset(baseline.dataset, tmp_path / "data")
    # A tolerance that the first trial meets: the test is of the plumbing, not the search.
    cal = _cal(exp, reduction=50.0, tolerance=60.0)
    got = fit_factor(cal, method, baseline, str(tmp_path / "data"), tmp_path / "runs")
    assert got["factor"] == cal.low and got["seed"] == 1000 and len(got["trials"]) == 1
    # 8 iterations are all warm-up pushes: every key goes, with its 8-byte key number.
    assert got["baseline"]["bytes_up"] == pytest.approx(got["trials"][0]["bytes_up"], rel=0.01)
    assert got["trials"][0]["reduction"] <= 0.0
    assert (tmp_path / "runs" / "baseline" / "summary.json").is_file()
    summary = json.loads((tmp_path / "runs" / "trial00" / "summary.json").read_text())
    assert "theta0" in json.dumps(summary)


def test_training_refuses_a_recipe_still_in_the_papers_units(exp, tmp_path) -> None:
    from psml_core.engine.training import train

    run = exp.run("digits_mlp_pf", "ratatouille_async__t0p2", "dc_10g", 0)
    with pytest.raises(ConfigError, match="paper's units until calibration"):
        train(run, tmp_path, tmp_path / "out")


def test_psml_train_reads_the_factor_from_the_workflows_file(exp, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    run = exp.run("digits_mlp_pf", "ratatouille_async__t0p6", "dc_10g", 0)
    with pytest.raises(DataError, match="not fitted yet; run `snakemake --cores 1 results/smoke"):
        calibrated(run, None)
    path = tmp_path / "results" / "smoke" / "calibration" / f"{KEY}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"key": KEY, "factor": 0.1}))
    got, used = calibrated(run, None)
    assert got.method.codec.params["theta0"] == pytest.approx(0.06)
    assert json.loads(got.to_json())["method"]["calibrated"]["factor"] == 0.1
    assert used == Path("results", "smoke", "calibration", f"{KEY}.json")
    path.write_text(json.dumps({"key": "other.x", "factor": 0.1}))
    with pytest.raises(DataError, match="holds calibration 'other.x'"):
        read_factor(path, KEY)
