"""A qualitative claim's minimum effect, fixed in advance, and its workload's target accuracy.

Used to pass: any effect beyond the seed spread was REPRODUCED, however small (the small
tier's joint method beat hashing only by 1.4% where the oracle placement could cut 14%), and a
method below its own workload's target accuracy (0.643 against 0.71) could still be REPRODUCED
against a baseline that fell short too.
"""

from __future__ import annotations

import json

import pytest
import yaml
from claim_helpers import claim, qual_runs, verdict

from psml_core.analysis.claims import load_papers
from psml_core.analysis.partition_files import oracle_bounds, partition_files
from psml_core.errors import ConfigError

REMOTE = "remote_bytes_total"


def traffic_claim(floor):
    c = claim("qualitative", baseline=["b"], metrics=(REMOTE, "final_test_accuracy"))
    c["measure"]["min_effect"] = {REMOTE: floor}
    return c


def traffic_runs(cut):
    """The method's remote bytes ``cut`` below the baseline's 1000, seeds 1 apart."""
    ours = [1000 * (1 - cut) + d for d in (-1, 0, 1)]
    return qual_runs(
        {"remote_bytes_up": ours, "remote_bytes_down": [0] * 3,
         "final_test_accuracy": [0.9] * 3},
        {"b": {"remote_bytes_up": [999, 1000, 1001], "remote_bytes_down": [0] * 3,
               "final_test_accuracy": [0.9] * 3}},
    )  # fmt: skip


def test_an_effect_beyond_the_spread_but_below_its_minimum_is_partial():
    c = claim("qualitative", baseline=["b"], metrics=("time_to_target_s",))
    c["measure"]["min_effect"] = {"time_to_target_s": {"relative": 0.10, "why": "a practitioner"}}
    small = qual_runs({"time_to_target_s": [0.95, 0.951, 0.952]},
                      {"b": {"time_to_target_s": [1.0, 1.001, 1.002]}})  # fmt: skip
    res = verdict(c, small)  # 5% faster in every seed: beyond the spread, below 10%
    assert res.verdict == "PARTIAL", res.detail
    assert res.min_effect == pytest.approx(0.10) and res.min_effect_text == "10% (stated)"
    assert "below the minimum effect 10%" in res.per_metric[0]["outcome"]
    large = qual_runs({"time_to_target_s": [0.85, 0.851, 0.852]},
                      {"b": {"time_to_target_s": [1.0, 1.001, 1.002]}})  # fmt: skip
    assert verdict(c, large).verdict == "REPRODUCED"
    c["measure"]["min_effect"] = {"time_to_target_s": 0.04}  # the plain number form
    assert verdict(c, small).verdict == "REPRODUCED"


def test_the_oracle_share_sets_the_floor_from_the_methods_data():
    c = traffic_claim({"oracle_share": 0.25, "relative": 0.05})
    bound = {"bound": 0.14, "random_remote_bytes": 100.0, "oracle_remote_bytes": 86.0}
    oracles = {("w", "m"): bound}
    res = verdict(c, traffic_runs(0.03), oracles=oracles)  # 3% < 25% of 14% = 3.5%
    assert res.verdict == "PARTIAL", res.detail
    assert res.min_effect == pytest.approx(0.035)
    assert res.min_effect_text.startswith("25% of the oracle's 14% cut = 3.5%")
    assert verdict(c, traffic_runs(0.04), oracles=oracles).verdict == "REPRODUCED"
    # No oracle bound for the method's data: the stated relative fallback, said so.
    res = verdict(c, traffic_runs(0.04))
    assert res.verdict == "PARTIAL" and res.min_effect == pytest.approx(0.05)
    assert "fallback" in res.min_effect_text
    other = {("w", "someone_else"): bound}  # another method's data set no floor for this one
    assert verdict(c, traffic_runs(0.04), oracles=other).min_effect == pytest.approx(0.05)


def test_a_method_below_its_workloads_target_is_not_reproduced():
    c = traffic_claim(0.05)
    runs = traffic_runs(0.5)
    runs.loc[runs["method"] == "m", "final_test_accuracy"] = 0.643
    runs.loc[runs["method"] == "b", "final_test_accuracy"] = 0.640  # the baseline no better
    # The config also makes the claim's regime measured, from these columns.
    runs["workers"], runs["shards"], runs["target_accuracy"] = 2, 2, 0.71
    config = {"workloads": {"w": {"target_accuracy": 0.71}}}
    res = verdict(c, runs, config=config)
    assert res.verdict == "NOT REPRODUCED"
    assert "0.643" in res.detail and "below the target 0.71 of its workload w" in res.detail
    assert res.cause.startswith("run: ") and res.cause_class == "run"
    assert verdict(c, runs).verdict == "REPRODUCED"  # without a target, the baseline decides
    config["workloads"]["w"]["target_accuracy"] = 0.6
    assert verdict(c, runs, config=config).verdict == "REPRODUCED"


def test_partition_files_give_their_oracle_bounds(tmp_path):
    bound = {"bound": 0.14, "random_remote_bytes": 100.0, "oracle_remote_bytes": 86.0}
    (tmp_path / "a.json").write_text(json.dumps({"placement": "parsa", "oracle": bound}))
    (tmp_path / "b.json").write_text(json.dumps({"placement": "random"}))
    (tmp_path / "c.json").write_text(json.dumps({"oracle": {"unavailable": "dense model"}}))
    entries = [f"rcv1/jpdc={tmp_path / 'a.json'}", f"rcv1/random_partition={tmp_path / 'b.json'}",
               f"dnn/dyn={tmp_path / 'c.json'}"]  # fmt: skip
    assert oracle_bounds(partition_files(entries)) == {("rcv1", "jpdc"): bound}


PAPER = {"id": "p", "title": "t", "authors": "a", "venue": "v", "claims": []}


def refused(tmp_path, c) -> str:
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({**PAPER, "claims": [c]}))
    with pytest.raises(ConfigError) as err:
        load_papers(tmp_path)
    text = str(err.value)
    assert "\n" not in text and "p.yaml" in text and "'c'" in text
    return text


def test_the_loader_holds_a_minimum_effect_to_the_primary_metric_of_a_qualitative_claim(
    tmp_path,
):
    bare = claim("qualitative", baseline=["b"], metrics=(REMOTE, "final_test_accuracy"))
    assert "min_effect" in refused(tmp_path, bare)
    other = traffic_claim(0.05)
    other["measure"]["min_effect"]["final_test_accuracy"] = 0.01
    assert "min_effect.final_test_accuracy" in refused(tmp_path, other)
    time = claim("qualitative", baseline=["b"], metrics=("time_to_target_s",
                                                          "final_test_accuracy"))  # fmt: skip
    time["measure"]["min_effect"] = {"time_to_target_s": {"oracle_share": 0.25, "relative": 0.1}}
    assert "oracle_share" in refused(tmp_path, time)
    number = claim("reduction", 50.0, metrics=(REMOTE,))
    number["measure"]["min_effect"] = {REMOTE: 0.05}
    assert "min_effect" in refused(tmp_path, number)
    no_fallback = traffic_claim({"oracle_share": 0.25})  # the schema needs a relative floor
    with pytest.raises(ConfigError, match="p.yaml"):
        (tmp_path / "p.yaml").write_text(yaml.safe_dump({**PAPER, "claims": [no_fallback]}))
        load_papers(tmp_path)
    good = traffic_claim({"oracle_share": 0.25, "relative": 0.05, "why": "a quarter"})
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({**PAPER, "claims": [good]}))
    assert load_papers(tmp_path)["p"]["claims"][0]["measure"]["min_effect"][REMOTE]["why"]


def test_the_shipped_qualitative_claims_preregister_their_minimum_effects(repo, tmp_path):
    for pid in ("pcp", "jpdc"):
        (tmp_path / f"{pid}.yaml").write_text((repo / "config/papers" / f"{pid}.yaml").read_text())
    papers = load_papers(tmp_path)
    by_id = {c["id"]: c for p in papers.values() for c in p["claims"]}
    assert by_id["pcp_vs_ssp"]["measure"]["min_effect"]["time_to_target_s"]["relative"] == 0.10
    for cid in ("joint_reduces_traffic", "dynamic_partition_dnn"):
        floor = by_id[cid]["measure"]["min_effect"][REMOTE]
        assert floor["oracle_share"] == 0.25 and floor["relative"] == 0.05 and floor["why"]
