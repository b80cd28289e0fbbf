"""Beside each verdict: its band and noise, minimum effect, bound, cause class and accuracies.

Used to print a verdict alone: an accuracy REPRODUCED or missed with no word on the noise that
decided it, a qualitative claim with no minimum effect, a speed-up with no accuracy cost, and a
defect of ours that read like any other cause.
"""

from __future__ import annotations

import math

import pandas as pd

from psml_core.analysis.claim_result import ClaimResult
from psml_core.report.claim_notes import measurement_notes
from psml_core.report.claim_regimes import paper_regime_table
from psml_core.report.reported_vs_ours import (
    fmt_ours_short,
    paper_claims_table,
    read_claims,
    summary_intro,
)

BASE = {"paper": "p", "statement": "s", "source": "abs", "unit": "x", "up_to": False,
        "seeds": 3}  # fmt: skip


def claims_csv(tmp_path, *results: ClaimResult) -> pd.DataFrame:
    path = tmp_path / "claims.csv"
    pd.DataFrame([r.row() for r in results]).to_csv(path, index=False)
    return read_claims(path)


def accuracy() -> ClaimResult:
    w = 0.0131  # the test set's error, in log space
    return ClaimResult(**BASE, claim="acc", kind="ratio", reported=0.9938, ours=0.987,
                       ci_low=0.984, ci_high=0.991, low=0.984, high=0.99,
                       metric="final_test_accuracy", verdict="REPRODUCED",
                       band_low=0.9938 * math.exp(-w), band_high=0.9938 * math.exp(w),
                       floor=0.9938 * math.exp(-w), noise_test_se=w, noise_seed_sd=0.003,
                       band_set_by="test set", scenario="a", baseline="b")  # fmt: skip


def joint() -> ClaimResult:
    return ClaimResult(**BASE, claim="joint", kind="qualitative", reported=None, ours=1,
                       low=1, high=1, metric="remote_bytes_total", verdict="PARTIAL",
                       min_effect=0.035, cause="method: hashing merges features",
                       cause_class="method",
                       min_effect_text="25% of the oracle's 14% cut = 3.5% (the oracle bound "
                       "of jpdc's data, rcv1)")  # fmt: skip


def speed() -> ClaimResult:
    return ClaimResult(**BASE, claim="speed", kind="speedup", reported=4.3, ours=1.3,
                       ci_low=1.2, ci_high=1.4, low=1.2, high=1.4, metric="time_to_target_s",
                       verdict="NOT REPRODUCED", cause="ours: our grid is too coarse",
                       cause_class="ours", method_accuracy=0.912, baseline_accuracy=0.934,
                       bound_low=2.79, bound_value=6.01, bound_text="Amdahl ...",
                       scenario="a", baseline="b")  # fmt: skip


def test_the_claims_table_prints_how_strict_each_verdict_was(tmp_path) -> None:
    claims = claims_csv(tmp_path, accuracy(), joint(), speed())
    table = paper_claims_table(claims, "p")
    assert table.header[-1] == "Basis" and table.verdict == 4
    cells = {row[0]: row for row in table.rows}
    acc = cells["acc"][-1]
    assert "band ±1.3%, set by the test set's binomial error" in acc
    assert "test-set SE 1.3%, seed SD 0.3%" in acc
    assert "partial floor" not in cells["acc"][3]  # an accuracy band is no partial floor
    assert "minimum effect 25% of the oracle's 14% cut = 3.5%" in cells["joint"][-1]
    assert "cause: method" in cells["joint"][-1]
    basis = cells["speed"][-1]
    assert "Amdahl bound 2.79× to 6.01×" in basis and "cause: ours, a defect of ours" in basis
    # The accuracy cost beside the speed-up, in the claims table and the summary.
    ours = cells["speed"][2].replace("\u00a0", " ")
    assert ours.endswith("; final accuracy: ours 91.2 %, comparator's 93.4 %")
    rows = {r.claim: r for r in claims.itertuples(index=False)}
    short = fmt_ours_short(rows["speed"]).replace("\u00a0", " ")
    assert short.endswith("; acc. 91.2 % vs 93.4 %")
    assert "acc." not in fmt_ours_short(rows["acc"])  # not a to-target claim


def test_the_summary_names_the_claims_decided_by_a_defect_of_ours(tmp_path) -> None:
    claims = claims_csv(tmp_path, accuracy(), speed())
    text = summary_intro(claims, {"p": {}}, "smoke")
    assert "Decided by a defect of ours, to fix (a cause of class ours): p/speed." in text
    assert "p/acc" not in text.split("Decided by")[1].split(".")[0]


def test_the_notes_give_the_band_and_the_reason_for_a_minimum_effect(tmp_path) -> None:
    paper = {"claims": [
        {"id": "acc", "tolerance": {"reproduced": 0.01}, "measure": {"metrics": ["x"]}},
        {"id": "joint", "measure": {"metrics": ["remote_bytes_total"], "min_effect": {
            "remote_bytes_total": {"relative": 0.05, "oracle_share": 0.25,
                                   "why": "a quarter of what any placement could save"}}}},
    ]}  # fmt: skip
    notes = {n["claim"]: n["text"] for n in measurement_notes(
        claims_csv(tmp_path, accuracy(), joint()), paper)}  # fmt: skip
    assert "Accuracy band: the paper's ratio ±1.3%" in notes["acc"]
    assert "tolerance (1%)" in notes["acc"] and "per-seed log ratios (0.3%)" in notes["acc"]
    assert "(a quarter of what any placement could save)" in notes["joint"]


def test_an_older_claims_file_without_the_new_columns_still_reads(tmp_path) -> None:
    row = speed().row()
    for col in ("cause_class", "band_set_by", "min_effect_text", "noise_test_se",
                "noise_seed_sd", "min_effect", "method_accuracy", "baseline_accuracy",
                "bound_low"):  # fmt: skip
        row.pop(col)
    path = tmp_path / "claims.csv"
    pd.DataFrame([row]).to_csv(path, index=False)
    claims = read_claims(path)
    assert math.isnan(claims["method_accuracy"].iloc[0]) and claims["cause_class"].iloc[0] == ""
    cell = paper_claims_table(claims, "p").rows[0][-1]
    assert cell == "Amdahl bound 6.01×"


def test_a_regime_field_with_several_values_prints_them_all(tmp_path) -> None:
    res = speed()
    res.regime = [{"field": "density", "label": "density", "unit": "", "status": "derived",
                   "theirs": [0.02, 0.2455], "note": "README", "ours": 0.3,
                   "ratio": None}]  # fmt: skip
    table = paper_regime_table(claims_csv(tmp_path, res), "p")
    assert "0.02 or 0.2455 (derived)" in table.rows[0]
