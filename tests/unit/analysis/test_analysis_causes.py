"""Causes named by their class, and the final accuracy beside every to-target claim.

Used to blame the method: any explanation that named no class was printed as "method: ...",
so a sentence about our own constants read as the method's fault; and a speed-up to a target
was printed without the accuracy it cost.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from claim_helpers import claim, qual_runs, seeds, verdict

from psml_core.analysis.causes import (
    MECHANICAL_EXPLANATIONS,
    cause_of,
    defect_warnings,
    explanation_for,
)
from psml_core.analysis.claim_result import INCONSISTENT, NOT_COMPARABLE, ClaimResult
from psml_core.analysis.claims import load_papers
from psml_core.analysis.consistency import consistency_bound
from psml_core.analysis.regime import paper_regime
from psml_core.errors import ConfigError

PAPER = {"id": "p", "title": "t", "authors": "a", "venue": "v", "claims": []}
OURS = {"not_reproduced": "ours: the grid step of our tier is too coarse. More words."}


def write(tmp_path, c):
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({**PAPER, "claims": [c]}))
    return tmp_path


def test_the_loader_refuses_an_explanation_without_its_class(tmp_path):
    c = claim("ratio", 0.1, explanation={"partial": "Our constant is off. More."})
    with pytest.raises(ConfigError) as err:
        load_papers(write(tmp_path, c))
    text = str(err.value)
    assert "\n" not in text and "p.yaml" in text and "'c'" in text
    assert "explanation.partial" in text and "method:, regime:, bound:, ours:" in text
    for cls in ("method", "regime", "bound", "ours"):
        c["explanation"] = {"partial": f"{cls}: a reason. More."}
        assert load_papers(write(tmp_path, c))["p"]
    c["explanation"] = {"partial": "run: a reason"}  # a mechanical class is the analysis's own
    with pytest.raises(ConfigError, match="explanation.partial"):
        load_papers(write(tmp_path, c))
    c["explanation"] = {"reproduced": "It holds."}  # REPRODUCED names no cause
    assert load_papers(write(tmp_path, c))["p"]


def test_a_cause_of_ours_is_a_defect_that_compare_warns_about():
    c = claim("ratio", 0.1, explanation=OURS)
    res = verdict(c, seeds([20, 20, 20], [10, 10, 10]))
    assert res.cause == "ours: the grid step of our tier is too coarse"
    assert res.cause_class == "ours" and res.row()["cause_class"] == "ours"
    (line,) = defect_warnings([res])
    assert line.startswith("warning: claim p/c (NOT REPRODUCED)") and "defect of ours" in line
    fine = verdict(claim("ratio", 0.1), seeds([1, 1, 1], [10, 10, 10]))  # REPRODUCED
    assert fine.cause_class == "" and defect_warnings([fine]) == []
    assert verdict(claim("reduction", 75.0), seeds([25], [100])).cause_class == "seeds"


def test_every_shipped_explanation_names_its_class(repo, tmp_path):
    for pid in ("dfs", "jpdc", "pcp", "ratatouille"):
        (tmp_path / f"{pid}.yaml").write_text((repo / "config/papers" / f"{pid}.yaml").read_text())
    papers = load_papers(tmp_path)  # the loader's check: every text starts with its class
    texts = [t for p in papers.values() for c in p["claims"]
             for k, t in (c.get("explanation") or {}).items() if k != "reproduced"]  # fmt: skip
    assert len(texts) >= 20


def test_a_to_target_claim_prints_both_sides_final_accuracy():
    t = "time_to_target_s"
    c = claim("speedup", 2.0, metrics=(t, "final_test_accuracy"))
    runs = seeds([0.5] * 3, [1.0] * 3, metric=t)
    runs["final_test_accuracy"] = [0.90, 0.91, 0.92, 0.95, 0.95, 0.95]
    res = verdict(c, runs)
    assert (res.method_accuracy, res.baseline_accuracy) == pytest.approx((0.91, 0.95))
    assert {"method_accuracy", "baseline_accuracy"} <= set(res.row())
    plain = verdict(claim("reduction", 50.0), seeds([50] * 3, [100] * 3))  # not to a target
    assert math.isnan(plain.method_accuracy) and math.isnan(plain.baseline_accuracy)
    q = claim("qualitative", baseline=["b"], metrics=(t, "final_test_accuracy"))
    qr = qual_runs({t: [1.0] * 3, "final_test_accuracy": [0.8] * 3},
                   {"b": {t: [2.0] * 3, "final_test_accuracy": [0.85] * 3}})  # fmt: skip
    res = verdict(q, qr)
    assert (res.method_accuracy, res.baseline_accuracy) == pytest.approx((0.8, 0.85))


def test_the_loader_refuses_a_to_target_claim_without_final_accuracy(tmp_path):
    c = claim("speedup", 2.0, metrics=("time_to_target_s", "total_time_s"))
    with pytest.raises(ConfigError) as err:
        load_papers(write(tmp_path, c))
    assert "\n" not in str(err.value) and "final_test_accuracy" in str(err.value)
    assert "'c'" in str(err.value) and "measure.metrics" in str(err.value)
    c["measure"]["metrics"] = ["bytes_to_target", "final_test_accuracy"]
    assert load_papers(write(tmp_path, c))["p"]


def _reachable(paper: dict, c: dict) -> list[str]:
    """The verdicts a claim of a paper file can get (besides NOT RUN and REPRODUCED)."""
    if c.get("setup_fact"):
        return []  # SETUP FACT prints its own detail, no explanation
    regime = paper_regime(paper, c)
    out = ["NOT REPRODUCED", "PARTIAL"]
    if c["reported"]["kind"] != "qualitative":
        out.append("EXCEEDED")
    if any(f.get("status") not in (None, "unknown") for f in regime.values()):
        out.append(NOT_COMPARABLE)
    if consistency_bound(c, regime) is not None:
        out.append(INCONSISTENT)
    return out


def test_every_verdict_a_claim_of_the_paper_files_can_get_is_explained():
    """A NOT COMPARABLE claim printed "no explanation of this outcome is recorded"."""
    papers = load_papers(Path(__file__).resolve().parents[3] / "config/papers")
    checked = set()
    for pid, paper in papers.items():
        for c in paper["claims"]:
            for v in _reachable(paper, c):
                why = explanation_for(c, v)
                assert why.strip(), f"{pid}/{c['id']} has no explanation for {v}"
                res = ClaimResult(pid, c["id"], "", "", "ratio", 1.0, "x", False, verdict=v,
                                  explanation=why)  # fmt: skip
                assert not cause_of(res).startswith("ours: no explanation"), (pid, c["id"], v)
                checked.add(v)
    assert NOT_COMPARABLE in checked and "EXCEEDED" in checked


def test_a_paper_files_own_text_comes_before_the_mechanical_one():
    own = {"explanation": {"not_comparable": "regime: our link is not the paper's."}}
    assert explanation_for(own, NOT_COMPARABLE) == "regime: our link is not the paper's."
    assert explanation_for({}, NOT_COMPARABLE) == MECHANICAL_EXPLANATIONS[NOT_COMPARABLE]
    assert explanation_for({}, "NOT REPRODUCED") == ""  # a judged miss needs the paper file's


def test_the_means_lead_with_the_judged_metric_then_accuracy():
    """DC2's time claims listed bytes and accuracy, never the time they were judged on."""
    t = "time_to_target_s"
    c = claim("speedup", 2.0, metrics=(t, "bytes_to_target", "final_test_accuracy"))
    runs = seeds([0.5] * 3, [1.0] * 3, metric=t)
    runs["bytes_to_target"] = [10.0, 11.0, 12.0, 20.0, 21.0, 22.0]
    runs["final_test_accuracy"] = [0.90, 0.91, 0.92, 0.95, 0.95, 0.95]
    means = verdict(c, runs).row()["per_metric"].split("; ")
    assert [m.split(" (")[0] for m in means] == [t, "final_test_accuracy", "bytes_to_target"]
    assert means[0] == f"{t} (a): 0.5 vs 1 (base)"
    for kind, metric in (("reduction", "bytes_total"), ("ratio", "final_test_accuracy")):
        row = verdict(claim(kind, 50.0, metrics=(metric,)), seeds([50] * 3, [100] * 3, metric))
        assert row.row()["per_metric"].startswith(f"{metric} (a): 50 vs 100"), kind


def test_a_censored_side_of_the_judged_metric_is_a_lower_bound():
    t = "time_to_target_s"
    runs = seeds([0.5, math.nan, 0.5], [1.0] * 3, metric=t)
    runs["total_time_s"] = 3.0
    res = verdict(claim("speedup", 2.0, metrics=(t, "final_test_accuracy")), runs)
    first = res.row()["per_metric"].split("; ")[0]
    assert first.startswith(f"{t} (a): 1.333 vs 1 (base, the method censored in 1 of 3 seed(s)")
    assert "at least" in first
