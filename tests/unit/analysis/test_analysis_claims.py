"""Verdicts: reported vs reproduced on synthetic runs tables with known effects.

One test per verdict rule, including the ones that used to pass wrongly: an exceeded "up to"
bound, a best-of over scenarios and baselines, a censored run's fallback to another metric, a
transient crossing of the target, and an accuracy above the paper's called a miss.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from claim_helpers import claim, qual_runs, runs_table, seeds, verdict

from psml_core.analysis.claims import evaluate_claims, load_papers
from psml_core.analysis.gains import effect_to_gain, gain_to_effect, metric_values
from psml_core.errors import ConfigError

# --------------------------------------------------------------------------- gains


@pytest.mark.parametrize(
    ("kind", "metric", "effect"),
    [("speedup", "time_to_target_s", 41.0), ("reduction", "bytes_total", 74.12),
     ("ratio", "final_test_accuracy", 0.9938), ("ratio", "bytes_total", 0.5),
     ("value", "comm_compute_ratio", 5.7), ("reduction", "final_test_accuracy", 3.0)],
)  # fmt: skip
def test_effect_and_gain_are_inverse(kind, metric, effect):
    assert gain_to_effect(kind, metric, effect_to_gain(kind, metric, effect)) == pytest.approx(
        effect
    )


def test_a_positive_gain_always_means_better():
    assert effect_to_gain("speedup", "time_to_target_s", 2.0) > 0
    assert effect_to_gain("reduction", "bytes_total", 50.0) > 0
    assert effect_to_gain("ratio", "bytes_total", 0.5) > 0  # half the bytes
    assert effect_to_gain("ratio", "final_test_accuracy", 1.01) > 0  # higher accuracy


# --------------------------------------------------------------------------- quantitative


def test_reduction_whose_interval_lies_in_the_band_is_reproduced():
    res = verdict(claim("reduction", 75.0), seeds([24, 25, 26], [100, 100, 100]))
    assert res.verdict == "REPRODUCED", res.detail
    assert res.ours == pytest.approx(75.0, abs=0.1)
    assert (res.low, res.high) == pytest.approx((74.0, 76.0))
    assert res.ci_low < res.ours < res.ci_high and res.seeds == 3
    assert res.band_low < 75.0 < res.band_high and res.floor == pytest.approx(50.0)


def test_fewer_than_three_seeds_are_never_reproduced():
    res = verdict(claim("reduction", 75.0), seeds([25], [100]))
    assert res.verdict == "PARTIAL" and "n = 1 < 3" in res.detail
    res = verdict(claim("reduction", 75.0), seeds([25, 25], [100, 100]))
    assert res.verdict == "PARTIAL"


def test_a_wide_interval_over_seeds_is_not_reproduced():
    # Mean 75% but one seed far off: the 95% interval leaves the band.
    res = verdict(claim("reduction", 75.0), seeds([10, 25, 40], [100, 100, 100]))
    assert res.verdict != "REPRODUCED"


def test_the_partial_floor_defaults_to_half_the_claimed_effect_on_a_log_scale():
    # 41x claimed: the floor is sqrt(41) = 6.4x.
    c = claim("speedup", 41.0, metrics=("time_to_target_s",))
    just_above = seeds([1 / 7.0] * 3, [1.0] * 3, metric="time_to_target_s")
    just_below = seeds([1 / 6.0] * 3, [1.0] * 3, metric="time_to_target_s")
    assert verdict(c, just_above).verdict == "PARTIAL"
    assert verdict(c, just_below).verdict == "NOT REPRODUCED"
    assert verdict(c, just_above).floor == pytest.approx(math.sqrt(41.0))
    # A 1.01x speed-up against a claimed 41x is no partial reproduction any more.
    tiny = seeds([1 / 1.01] * 3, [1.0] * 3, metric="time_to_target_s")
    assert verdict(c, tiny).verdict == "NOT REPRODUCED"


def test_the_partial_floor_can_be_set_per_claim():
    c = claim("speedup", 41.0, metrics=("time_to_target_s",), tolerance={"partial": 0.1})
    runs = seeds([1 / 1.5] * 3, [1.0] * 3, metric="time_to_target_s")  # 41^0.1 = 1.45
    assert verdict(c, runs).verdict == "PARTIAL"


def test_an_exceeded_up_to_bound_is_not_a_reproduction():
    """Used to pass: exceeding an "up to" claim counted as REPRODUCED (13x over the paper)."""
    c = claim("speedup", 5.7, up_to=True, metrics=("time_to_target_s",))
    res = verdict(c, seeds([1 / 41.6] * 3, [1.0] * 3, metric="time_to_target_s"))
    assert res.verdict == "EXCEEDED"
    assert "above the tolerance band" in res.detail


def test_exceeding_a_plain_value_stays_partial_and_few_seeds_never_exceed():
    above = seeds([1 / 41.6] * 3, [1.0] * 3, metric="time_to_target_s")
    plain = claim("speedup", 5.7, metrics=("time_to_target_s",))
    assert verdict(plain, above).verdict == "PARTIAL"
    up_to = claim("speedup", 5.7, up_to=True, metrics=("time_to_target_s",))
    two = seeds([1 / 41.6] * 2, [1.0] * 2, metric="time_to_target_s")
    assert verdict(up_to, two).verdict == "PARTIAL"


def test_no_best_of_over_scenarios_every_fixed_scenario_must_pass():
    """Used to pass: an "up to" claim took the scenario most favourable to it."""
    runs = pd.concat(
        [seeds([60] * 3, [100] * 3, scenario="a"), seeds([25] * 3, [100] * 3, scenario="b")]
    )
    c = claim("reduction", 75.0, up_to=True, scenarios=("a", "b"))
    res = verdict(c, runs)
    assert res.verdict == "NOT REPRODUCED" and res.scenario == "a"
    assert "b: REPRODUCED" in res.detail
    assert verdict(claim("reduction", 75.0, scenarios=("b",)), runs).verdict == "REPRODUCED"


def test_the_verdict_is_against_the_strongest_of_the_fixed_baselines():
    """Used to pass: the weakest baseline (dense-equivalent OmniReduce) decided a byte claim."""
    runs = pd.concat([
        seeds([10] * 3, [100] * 3, base="weak"),
        runs_table([{"method": "strong", "seed": s, "scenario": "a", "bytes_total": 12}
                    for s in range(3)]),
    ])  # fmt: skip
    res = verdict(claim("reduction", 90.0, baseline=["weak", "strong"]), runs)
    assert res.baseline == "strong" and res.baselines == "weak, strong"
    assert res.ours == pytest.approx(100 * (1 - 10 / 12))
    assert res.verdict == "NOT REPRODUCED"


def test_a_missing_baseline_or_scenario_is_not_run():
    res = verdict(claim("reduction", 50.0, baseline=["base", "gone"]), seeds([1] * 3, [2] * 3))
    assert res.verdict == "NOT RUN" and "gone" in res.detail
    res = verdict(claim("reduction", 50.0, scenarios=("zzz",)), seeds([1] * 3, [2] * 3))
    assert res.verdict == "NOT RUN"
    res = evaluate_claims({"p": {"claims": [claim("reduction", 50.0)]}}, seeds([1], [2]), {})[0]
    assert res.verdict == "NOT RUN" and "no experiment 'e'" in res.detail


def test_other_metrics_are_shown_beside_the_headline_never_in_its_place():
    """Used to pass: an unreached target fell back silently to the total time."""
    runs = seeds([math.nan] * 3, [1.0] * 3, metric="time_to_target_s")
    runs["total_time_s"] = [0.5] * 3 + [2.0] * 3
    c = claim("speedup", 2.0, metrics=("time_to_target_s", "total_time_s"))
    res = verdict(c, runs)
    assert res.metric == "time_to_target_s" and res.verdict == "NOT REPRODUCED"


# --------------------------------------------------------------------------- censoring


def test_a_censored_method_run_is_not_reproduced_and_says_so():
    runs = seeds([0.1, math.nan, 0.1], [1.0] * 3, metric="time_to_target_s")
    runs.loc[1, "total_time_s"] = 0.1  # censored at 0.1: its speed-up is at most 10x
    c = claim("speedup", 10.0, metrics=("time_to_target_s",))
    res = verdict(c, runs)
    assert res.verdict == "NOT REPRODUCED"
    assert res.censored == 1 and res.bound == "at most"
    assert "did not hold the target" in res.detail and "seed 1" in res.detail


def test_a_censored_baseline_gives_a_lower_bound_at_most_partial():
    runs = seeds([0.1] * 3, [1.0, math.nan, 1.0], metric="time_to_target_s")
    runs.loc[4, "total_time_s"] = 2.0  # the baseline's censored run: >= 2.0 s
    c = claim("speedup", 10.0, metrics=("time_to_target_s",))
    res = verdict(c, runs)
    assert res.verdict == "PARTIAL" and res.bound == "at least"
    runs.loc[4, "total_time_s"] = 0.2  # a bound of 2x that does not clear the 3.2x floor
    assert verdict(c, runs).verdict == "NOT REPRODUCED"


def test_bytes_to_target_are_censored_at_the_runs_total_bytes():
    runs = seeds([math.nan] * 3, [100] * 3, metric="bytes_to_target")
    runs["bytes_total"] = [5] * 3 + [200] * 3
    res = verdict(claim("reduction", 80.0, metrics=("bytes_to_target",)), runs)
    assert res.verdict == "NOT REPRODUCED" and res.censored == 3


# --------------------------------------------------------------------------- one-sided, facts


def test_a_setup_fact_is_stated_not_judged():
    """Used to pass by construction: a comm/compute ratio set by the link we chose."""
    runs = runs_table([{"method": "m", "seed": s, "scenario": "a", "comm_s": 41.6}
                       for s in range(3)])  # fmt: skip
    c = claim("value", 5.7, baseline=None, metrics=("comm_compute_ratio",), setup_fact=True)
    res = verdict(c, runs)
    assert res.verdict == "SETUP FACT" and res.ours == pytest.approx(41.6)
    assert "not a finding" in res.detail


# --------------------------------------------------------------------------- qualitative


def test_qualitative_needs_the_worst_seed_to_beat_the_best_baseline_seed():
    c = claim("qualitative", baseline=["b1"], metrics=("bytes_total",))
    beyond = seeds([10, 11, 12], [20, 21, 22], base="b1")
    assert verdict(c, beyond).verdict == "REPRODUCED"
    overlapping = seeds([10, 11, 25], [20, 21, 22], base="b1")
    assert verdict(c, overlapping).verdict == "PARTIAL"
    worse = seeds([30, 31, 32], [20, 21, 22], base="b1")
    assert verdict(c, worse).verdict == "NOT REPRODUCED"
    one_seed = seeds([10], [20], base="b1")
    res = verdict(c, one_seed)
    assert res.verdict == "PARTIAL" and "needs 3 seeds" in res.detail


def test_qualitative_states_the_size_of_the_difference():
    """A small but consistent difference is REPRODUCED; its size is printed beside it."""
    c = claim("qualitative", baseline=["b1"], metrics=("bytes_total",))
    small = seeds([98.4, 98.5, 98.6], [100.0] * 3, base="b1")
    res = verdict(c, small)
    assert res.verdict == "REPRODUCED"
    assert res.per_metric[0]["outcome"] == "better beyond the seed spread (by 1.5% on average)"
    worse = verdict(c, seeds([110.0] * 3, [100.0] * 3, base="b1"))
    assert worse.per_metric[0]["outcome"] == "not better (worse by 10% on average)"


def test_qualitative_counts_a_censored_method_run_as_never_reaching_the_target():
    c = claim("qualitative", baseline=["b1"], metrics=("time_to_target_s",))
    runs = seeds([1.0, math.nan, 1.0], [2.0] * 3, metric="time_to_target_s", base="b1")
    res = verdict(c, runs)
    assert res.verdict == "NOT REPRODUCED" and res.censored == 1


# --------------------------------------------------------------------------- plumbing


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
    for paper in papers.values():  # every claim is fixed in advance
        for c in paper["claims"]:
            assert c["measure"]["scenarios"] and "partial" in c["tolerance"]
    (tmp_path / "x.yaml").write_text("id: y\ntitle: t\nauthors: a\nvenue: v\nclaims: []\n")
    with pytest.raises(ConfigError, match="x.yaml"):
        load_papers(tmp_path)


def test_runs_pair_on_workload_and_seed_within_the_experiments_workloads():
    runs = pd.concat([seeds([25] * 3, [100] * 3), seeds([90] * 3, [100] * 3)])
    runs["workload"] = ["w"] * 6 + ["other"] * 6
    papers = {"p": {"claims": [claim("reduction", 75.0)]}}
    res = evaluate_claims(papers, runs, {"e": {"workloads": ["w"]}})[0]
    assert res.seeds == 3 and res.ours == pytest.approx(75.0)
    both = evaluate_claims(papers, runs, {"e": {}})[0]
    assert both.seeds == 6 and (both.low, both.high) == pytest.approx((10.0, 75.0))


# --------------------------------------------------------------------------- explanations


EXPLAINED = {"not_reproduced": "why it missed", "partial": "why it fell short"}


@pytest.mark.parametrize(
    ("method_values", "verdict_word", "text"),
    [([20, 20, 20], "NOT REPRODUCED", "why it missed"),  # no effect at all
     ([2.2, 2.2, 2.2], "PARTIAL", "why it fell short"),  # 4.5x of the claimed 10x
     ([1, 1, 1], "REPRODUCED", "")],  # 10x of 10x: no explanation written for it
)  # fmt: skip
def test_an_explanation_is_printed_only_beside_the_verdict_it_explains(
    method_values, verdict_word, text
):
    c = claim("ratio", 0.1, explanation=EXPLAINED)
    res = verdict(c, seeds(method_values, [10, 10, 10]))
    assert res.verdict == verdict_word
    assert res.explanation == text


def test_a_paper_file_with_an_unkeyed_explanation_is_refused(tmp_path):
    import yaml

    paper = {"id": "p", "title": "t", "authors": "a", "venue": "v", "evidence": "e",
             "setup": "s", "claims": [claim("ratio", 0.1, explanation="because")]}  # fmt: skip
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(paper))
    with pytest.raises(ConfigError, match="explanation"):
        load_papers(tmp_path)


def test_a_partial_held_back_only_by_its_seeds_is_explained_as_such():
    c = claim("ratio", 0.1, explanation=EXPLAINED)
    res = verdict(c, seeds([1], [10]))  # exactly the claimed 10x, one seed
    assert res.verdict == "PARTIAL" and res.seed_limited
    assert "needs 3 seeds" in res.explanation and "fell short" not in res.explanation
    res = verdict(c, seeds([2.2], [10]))  # 4.5x of 10x: short of the band, one seed
    assert res.verdict == "PARTIAL" and not res.seed_limited
    assert res.explanation == "why it fell short"


def test_a_partial_above_the_band_is_explained_by_the_setup_not_by_a_shortfall():
    # A claimed 75% cut, not "up to": 95% in every seed clears the floor but lies above the band.
    c = claim("reduction", 75.0, explanation=EXPLAINED)
    res = verdict(c, seeds([5.0, 5.1, 4.9, 5.0, 5.2], [100.0] * 5))
    assert res.verdict == "PARTIAL" and res.above_band and not res.seed_limited
    assert "fell short" not in res.explanation and "above" in res.explanation
    assert res.cause.startswith("regime: a setup more favourable")
    with_text = claim("reduction", 75.0, explanation={**EXPLAINED, "exceeded": "why it beat it"})
    assert verdict(with_text, seeds([5.0, 5.1, 4.9, 5.0, 5.2], [100.0] * 5)).explanation == (
        "why it beat it"
    )
    short = verdict(c, seeds([40.0, 41.0, 39.0, 40.0, 42.0], [100.0] * 5))  # 60%: below the band
    assert short.verdict == "PARTIAL" and not short.above_band
    assert short.explanation == "why it fell short"


# --------------------------------------------------------------------------- the rules of issue 26


def with_status(runs, method, seeds_bad, reason="final test loss 2.3 is back at chance"):
    runs = runs.copy()
    if "status" not in runs:
        runs["status"], runs["status_reason"] = "ok", ""
    bad = (runs["method"] == method) & runs["seed"].isin(seeds_bad)
    runs.loc[bad, "status"] = "diverged"
    runs.loc[bad, "status_reason"] = reason
    return runs


def test_the_verdict_is_against_the_named_comparator_and_robustness_is_a_second_row():
    """Used to deflate: "DFS beats OmniReduce" was decided by whichever baseline was strongest."""
    runs = pd.concat([
        seeds([10] * 3, [100] * 3, base="omni"),
        runs_table([{"method": "topk", "seed": s, "scenario": "a", "bytes_total": 12}
                    for s in range(3)]),
    ])  # fmt: skip
    c = claim("reduction", 90.0, baseline="omni", robustness=["topk"])
    c["measure"]["robustness"] = c.pop("robustness")
    res = verdict(c, runs)
    assert res.baseline == "omni" and res.verdict == "REPRODUCED", res.detail
    assert res.robust_baseline == "topk" and res.robust_verdict == "NOT REPRODUCED"
    assert res.robust_ours == pytest.approx(100 * (1 - 10 / 12))
    assert "omni, topk" in res.robust_detail


def test_a_time_claim_prints_its_codec_free_result_beside_the_verdict():
    """The same rule on the <scenario>__nocodec runs: how much the codec cost model decides."""
    t = "time_to_target_s"
    runs = pd.concat([
        seeds([50] * 3, [100] * 3, metric=t),  # 2x with codec costs
        seeds([25, 25], [100, 100], metric=t, scenario="a__nocodec"),  # 4x without
    ])  # fmt: skip
    res = verdict(claim("speedup", 8.0, metrics=(t,)), runs)
    assert res.verdict == "NOT REPRODUCED" and res.ours == pytest.approx(2.0)
    assert res.nocodec_ours == pytest.approx(4.0) and res.nocodec_verdict == "PARTIAL"
    assert "a__nocodec" in res.nocodec_detail and "n = 2 < 3 seeds" in res.nocodec_detail
    # Two seeds have no interval (a t interval on one degree of freedom would print as one).
    assert math.isnan(res.nocodec_ci_low) and math.isnan(res.nocodec_ci_high)
    # Bytes do not depend on the price of codec work, and a tier without such runs has no row.
    assert verdict(claim("reduction", 50.0), runs).nocodec_verdict == ""
    plain = verdict(claim("speedup", 4.0, metrics=(t,)), seeds([50] * 3, [100] * 3, metric=t))
    assert plain.nocodec_verdict == "" and math.isnan(plain.nocodec_ours)
    # Codec-free runs of the baseline alone: the row says which are missing.
    half = pd.concat([runs[runs["scenario"] == "a"],
                      seeds([], [100, 100], metric=t, scenario="a__nocodec")])  # fmt: skip
    gone = verdict(claim("speedup", 4.0, metrics=(t,)), half)
    assert gone.nocodec_verdict == "NOT RUN" and "m under a__nocodec" in gone.nocodec_detail


def test_a_diverged_baseline_is_never_the_strongest_and_never_the_comparator():
    """Used to deflate: a baseline that ended at chance could decide a claim."""
    runs = pd.concat([
        seeds([10] * 3, [100] * 3, base="ok_base"),
        runs_table([{"method": "broken", "seed": s, "scenario": "a", "bytes_total": 5}
                    for s in range(3)]),
    ])  # fmt: skip
    runs = with_status(runs, "broken", [1])
    family = verdict(claim("reduction", 90.0, baseline=["ok_base", "broken"]), runs)
    assert family.baseline == "ok_base" and family.verdict == "REPRODUCED"
    assert "baseline broken diverged in seed 1" in family.detail
    alone = verdict(claim("reduction", 90.0, baseline="broken"), runs)
    assert alone.verdict == "NOT RUN" and alone.detail.startswith("baseline diverged")
    assert alone.cause == "run: the named comparator diverged"


def test_a_diverged_method_is_not_reproduced_and_says_why():
    runs = with_status(seeds([10] * 3, [100] * 3), "m", [0, 2])
    res = verdict(claim("reduction", 90.0), runs)
    assert res.verdict == "NOT REPRODUCED" and "diverged in seeds 0, 2" in res.detail
    assert "back at chance" in res.detail and res.cause == "run: the method diverged"


def test_a_qualitative_claim_is_judged_against_one_configuration_not_a_composite():
    """Used to deflate: PCP had to beat the best SSP per metric, which no SSP is."""
    c = claim("qualitative", baseline=["fast", "accurate"],
              metrics=("time_to_target_s", "final_test_accuracy"))  # fmt: skip
    runs = qual_runs(
        {"time_to_target_s": [1.0, 1.1, 1.2], "final_test_accuracy": [0.93, 0.93, 0.93]},
        {"fast": {"time_to_target_s": [2.0, 2.1, 2.2], "final_test_accuracy": [0.93] * 3},
         "accurate": {"time_to_target_s": [5.0] * 3, "final_test_accuracy": [0.96] * 3}},
    )  # fmt: skip
    res = verdict(c, runs)
    assert res.baseline == "fast" and res.verdict == "REPRODUCED", res.detail
    assert "non-inferior" in res.detail


def test_a_one_sample_accuracy_difference_decides_nothing():
    """Used to decide PCP's accuracy pair: 1 test sample of 360."""
    one = 1 / 360
    c = claim("qualitative", baseline=["b"], metrics=("final_test_accuracy",))
    win = qual_runs({"final_test_accuracy": [0.9 + one] * 3},
                    {"b": {"final_test_accuracy": [0.9] * 3}})  # fmt: skip
    assert verdict(c, win).verdict == "NOT REPRODUCED"  # a win of one sample is no win
    two = qual_runs({"final_test_accuracy": [0.9 + 3 * one] * 3},
                    {"b": {"final_test_accuracy": [0.9] * 3}})  # fmt: skip
    assert verdict(c, two).verdict == "REPRODUCED"
    # As a secondary metric, a loss of one sample is within the margin (never below it).
    c2 = claim("qualitative", baseline=["b"], metrics=("time_to_target_s", "final_test_accuracy"),
               margins=None)  # fmt: skip
    c2.pop("margins")
    c2["measure"]["margins"] = {"final_test_accuracy": 0.0}
    loss = qual_runs(
        {"time_to_target_s": [1.0] * 3, "final_test_accuracy": [0.9 - one] * 3},
        {"b": {"time_to_target_s": [2.0] * 3, "final_test_accuracy": [0.9] * 3}},
    )  # fmt: skip
    assert verdict(c2, loss).verdict == "REPRODUCED"
    worse = qual_runs(
        {"time_to_target_s": [1.0] * 3, "final_test_accuracy": [0.9 - 3 * one] * 3},
        {"b": {"time_to_target_s": [2.0] * 3, "final_test_accuracy": [0.9] * 3}},
    )  # fmt: skip
    assert verdict(c2, worse).verdict == "NOT REPRODUCED"


def test_a_claim_beyond_the_papers_own_bound_is_inconsistent():
    """Ratatouille's 4.3x at comm/compute 5.7 and density 0.2455: Amdahl allows 2.8x."""
    c = claim("speedup", 4.3, up_to=True, metrics=("time_to_target_s",))
    c["regime"] = {
        "comm_compute": {"status": "derived", "value": 5.7, "how": "abstract"},
        "density": {"status": "derived", "value": 0.2455, "how": "README table"},
    }
    res = verdict(c, seeds([1 / 1.4] * 3, [1.0] * 3, metric="time_to_target_s"))
    assert res.verdict == "INCONSISTENT (paper)"
    assert res.bound_value == pytest.approx(6.7 / (1 + 5.7 * 0.2455))
    assert "(1 + 5.7) / (1 + 5.7 x 0.2455) = 2.79x" in res.bound_text
    assert res.ours == pytest.approx(1.4) and res.cause.startswith("bound:")
    # A claim within its bound keeps its measured verdict, with the bound printed beside it.
    c["reported"]["value"] = 2.0
    res = verdict(c, seeds([1 / 2.0] * 3, [1.0] * 3, metric="time_to_target_s"))
    assert res.verdict == "REPRODUCED" and res.bound_text


def test_every_verdict_but_reproduced_names_its_cause():
    why = {"not_reproduced": "method: The law compresses too hard. More words."}
    c = claim("speedup", 41.0, metrics=("time_to_target_s",), explanation=why)
    res = verdict(c, seeds([1.0] * 3, [1.0] * 3, metric="time_to_target_s"))
    assert res.verdict == "NOT REPRODUCED" and res.cause == "method: The law compresses too hard"
    assert res.cause_class == "method"
    runs = seeds([0.1, math.nan, 0.1], [1.0] * 3, metric="time_to_target_s")
    assert "censored" in verdict(c, runs).cause
    assert verdict(claim("reduction", 75.0), seeds([25], [100])).cause.startswith("seeds:")


def test_the_resolution_of_a_time_to_target_claim_is_stated():
    c = claim("speedup", 2.0, baseline="dense_bsp", metrics=("time_to_target_s",))
    runs = seeds([0.5] * 3, [1.0] * 3, metric="time_to_target_s", base="dense_bsp")
    runs["eval_every"], runs["iteration_to_target"], runs["test_samples"] = 20, 99, 360
    text = verdict(c, runs).resolution
    assert "grid of 20 iteration(s), 20% of dense_bsp's 100 iterations" in text
    assert "coarser than the 2%" in text
    runs["eval_every"] = 2
    assert "coarser" not in verdict(c, runs).resolution


def test_the_cause_takes_its_class_from_the_explanation():
    """Used to blame the method: any unclassified explanation was prefixed "method:"."""
    c = claim("ratio", 0.1, explanation={"not_reproduced": "regime: the data cap it. More."})
    res = verdict(c, seeds([20, 20, 20], [10, 10, 10]))
    assert res.verdict == "NOT REPRODUCED" and res.cause == "regime: the data cap it"
    assert res.cause_class == "regime"
    ours = claim("ratio", 0.1, explanation={"not_reproduced": "ours: our constant is off. More."})
    assert verdict(ours, seeds([20, 20, 20], [10, 10, 10])).cause_class == "ours"
    # A text that bypassed load_papers names no class: our defect, never the method's fault.
    plain = claim("ratio", 0.1, explanation={"not_reproduced": "The law lags. More."})
    res = verdict(plain, seeds([20, 20, 20], [10, 10, 10]))
    assert res.cause_class == "ours" and res.cause.endswith("The law lags")
    # No explanation recorded for the verdict: also a defect of ours (the paper file lacks it).
    bare = verdict(claim("ratio", 0.1), seeds([20, 20, 20], [10, 10, 10]))
    assert bare.cause.startswith("ours: no explanation") and bare.cause_class == "ours"
