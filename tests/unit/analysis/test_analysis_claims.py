"""Verdicts: reported vs reproduced on a synthetic runs table with known effects."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from psml_core.analysis.claims import evaluate_claims, load_papers, metric_values
from psml_core.errors import ConfigError


def runs_table(rows):
    base = {"workload": "w", "compute_s": 1.0, "comm_s": 1.0, "wait_s": 0.0,
            "remote_bytes_up": 0, "remote_bytes_down": 0, "final_test_accuracy": 0.9,
            "time_to_target_s": math.nan, "total_time_s": 1.0, "bytes_total": 1}  # fmt: skip
    return pd.DataFrame([{**base, **r} for r in rows])


def claim(kind, value=None, up_to=False, baseline="base", metrics=("bytes_total",), **measure):
    rep = {"kind": kind, "up_to": up_to}
    if value is not None:
        rep["value"] = value
    return {"id": "c", "statement": "s", "source": "abs", "setup": "x", "reported": rep,
            "measure": {"experiment": "e", "method": "m", "baseline": baseline,
                        "metrics": list(metrics), **measure}}  # fmt: skip


def verdict(c, runs, scenarios=("a",)):
    papers = {"p": {"claims": [c]}}
    return evaluate_claims(papers, runs, {"e": {"scenarios": list(scenarios)}}, list(scenarios))[0]


def two_seeds(method_bytes, base_bytes, scenario="a"):
    return runs_table(
        [{"method": "m", "seed": s, "scenario": scenario, "bytes_total": b}
         for s, b in enumerate(method_bytes)]
        + [{"method": "base", "seed": s, "scenario": scenario, "bytes_total": b}
           for s, b in enumerate(base_bytes)]
    )  # fmt: skip


def test_reduction_within_tolerance_is_reproduced_with_its_spread():
    res = verdict(claim("reduction", 75.0), two_seeds([24, 26], [100, 100]))
    assert res.verdict == "REPRODUCED"
    assert res.ours == pytest.approx(75.0) and (res.low, res.high) == (74.0, 76.0)
    assert res.seeds == 2 and res.metric == "bytes_total"


def test_smaller_effect_in_the_right_direction_is_partial_wrong_direction_is_not():
    assert verdict(claim("reduction", 75.0), two_seeds([80, 80], [100, 100])).verdict == "PARTIAL"
    res = verdict(claim("reduction", 75.0), two_seeds([120, 120], [100, 100]))
    assert res.verdict == "NOT REPRODUCED" and res.ours == pytest.approx(-20.0)


def test_up_to_claims_take_the_best_scenario_and_baseline_and_may_exceed():
    runs = pd.concat([two_seeds([50, 50], [100, 100], "a"), two_seeds([5, 5], [100, 100], "b")])
    other = [{"method": "other", "seed": s, "scenario": "b", "bytes_total": 1000} for s in (0, 1)]
    runs = pd.concat([runs, runs_table(other)])
    res = verdict(claim("speedup", 14.0, up_to=True, baseline=["base", "other"]), runs, "ab")
    assert res.scenario == "b" and res.baseline == "other" and res.ours == pytest.approx(200.0)
    assert res.verdict == "REPRODUCED"  # "up to 14x": we see more in our best case
    # The detail says the bound is exceeded, not that we are "1329% from" the claim.
    assert res.detail.startswith("beyond the reported upper bound by 1329%")
    within = verdict(claim("speedup", 14.0, up_to=True), two_seeds([7.5, 7.5], [100, 100]))
    assert within.verdict == "REPRODUCED" and within.detail.startswith("5% from the reported")


def test_non_up_to_claims_use_the_strongest_baseline():
    weak = [{"method": "weak", "seed": s, "scenario": "a", "bytes_total": 1000} for s in (0, 1)]
    runs = pd.concat([two_seeds([10, 10], [100, 100]), runs_table(weak)])
    res = verdict(claim("speedup", 100.0, baseline=["weak", "base"]), runs)
    assert res.baseline == "base" and res.ours == pytest.approx(10.0)
    assert res.verdict == "PARTIAL"


def test_time_to_target_falls_back_when_a_run_never_reached_it():
    runs = two_seeds([1, 1], [1, 1])
    runs["total_time_s"] = [1.0, 1.0, 4.0, 4.0]
    res = verdict(claim("speedup", 4.0, metrics=("time_to_target_s", "total_time_s")), runs)
    assert res.metric == "total_time_s" and res.ours == pytest.approx(4.0)


def test_accuracy_ratio_and_higher_is_better_metrics():
    runs = two_seeds([1, 1], [1, 1])
    runs["final_test_accuracy"] = [0.96, 0.97, 0.975, 0.975]
    res = verdict(claim("ratio", 0.9938, metrics=("final_test_accuracy",)), runs)
    assert res.ours == pytest.approx((0.96 / 0.975 + 0.97 / 0.975) / 2)
    assert res.verdict == "REPRODUCED"
    red = verdict(claim("reduction", 1.0, metrics=("final_test_accuracy",)), runs)
    assert red.ours < 0  # lower accuracy is a negative improvement, never a "reduction"


def test_qualitative_needs_every_metric_better_beyond_the_spread():
    runs = two_seeds([10, 11], [20, 21])
    c = claim("qualitative", metrics=("bytes_total", "final_test_accuracy"))
    runs["final_test_accuracy"] = [0.95, 0.96, 0.90, 0.91]
    assert verdict(c, runs).verdict == "REPRODUCED"
    runs["final_test_accuracy"] = [0.90, 0.96, 0.91, 0.92]  # better on average, not beyond
    assert verdict(c, runs).verdict == "PARTIAL"
    runs["bytes_total"] = [30, 30, 20, 21]
    runs["final_test_accuracy"] = [0.80, 0.80, 0.90, 0.91]
    assert verdict(c, runs).verdict == "NOT REPRODUCED"


def test_missing_runs_or_experiment_say_so():
    res = verdict(claim("reduction", 50.0), two_seeds([1], [2], scenario="zzz"))
    assert res.verdict == "NOT REPRODUCED" and "missing" in res.detail
    papers = {"p": {"claims": [claim("reduction", 50.0)]}}
    res = evaluate_claims(papers, two_seeds([1], [2]), {}, ["a"])[0]
    assert "no experiment 'e'" in res.detail


def test_derived_metrics():
    runs = runs_table([{"method": "m", "seed": 0, "scenario": "a", "compute_s": 1.0,
                        "comm_s": 3.0, "wait_s": 4.0, "remote_bytes_up": 5,
                        "remote_bytes_down": 7}])  # fmt: skip
    assert metric_values(runs, "utilisation").item() == 1 / 8
    assert metric_values(runs, "wait_fraction").item() == 4 / 8
    assert metric_values(runs, "comm_compute_ratio").item() == 3.0
    assert metric_values(runs, "remote_bytes_total").item() == 12


def test_the_shipped_papers_load_and_a_bad_one_is_named(repo, tmp_path):
    papers = load_papers(repo / "config" / "papers")
    assert set(papers) == {"dfs", "ratatouille", "dc2", "pcp", "jpdc"}
    assert sum(len(p["claims"]) for p in papers.values()) >= 10
    (tmp_path / "x.yaml").write_text("id: y\ntitle: t\nauthors: a\nvenue: v\nclaims: []\n")
    with pytest.raises(ConfigError, match="x.yaml"):
        load_papers(tmp_path)


def test_runs_pair_on_workload_and_seed_within_the_experiments_workloads():
    runs = pd.concat([two_seeds([25, 25], [100, 100]), two_seeds([90, 90], [100, 100])])
    runs["workload"] = ["w"] * 4 + ["other"] * 4
    c = claim("reduction", 75.0)
    papers = {"p": {"claims": [c]}}
    res = evaluate_claims(papers, runs, {"e": {"scenarios": ["a"], "workloads": ["w"]}}, ["a"])
    assert res[0].seeds == 2 and res[0].ours == pytest.approx(75.0)
    both = evaluate_claims(papers, runs, {"e": {"scenarios": ["a"]}}, ["a"])[0]
    assert both.seeds == 4 and (both.low, both.high) == pytest.approx((10.0, 75.0))  # per workload
