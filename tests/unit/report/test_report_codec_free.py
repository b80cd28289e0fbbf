"""The codec-free sensitivity row: printed beside a verdict, read back from claims.csv."""

from __future__ import annotations

import math

import pandas as pd

from psml_core.analysis.claim_result import ClaimResult
from psml_core.report.claim_notes import measurement_notes
from psml_core.report.reported_vs_ours import paper_claims_table, read_claims, verdict_table


def _row(**kw) -> dict:
    res = ClaimResult(paper="dfs", claim="speed", statement="s", source="abs", kind="speedup",
                      reported=4.0, unit="x", up_to=False, metric="time_to_target_s", ours=2.0,
                      verdict="NOT REPRODUCED", **kw)  # fmt: skip
    return res.row()


def test_the_row_is_printed_where_the_tier_ran_it_and_nowhere_else(tmp_path) -> None:
    detail = "codec work at 0 s (slow__nocodec)"
    with_free = _row(nocodec_verdict="PARTIAL", nocodec_ours=3.1, nocodec_ci_low=2.5,
                     nocodec_ci_high=3.9, nocodec_detail=detail)  # fmt: skip
    path = tmp_path / "claims.csv"
    pd.DataFrame([with_free, {**_row(), "claim": "other"}]).to_csv(path, index=False)
    claims = read_claims(path)
    rows = verdict_table(claims).rows
    free = [r for r in rows if r[1] == "↳ codec-free"]
    assert len(free) == 1 and free[0][5] == "PARTIAL" and "3.1" in free[0][3]
    assert "[2.50, 3.90]" in free[0][3]
    assert [r[0] for r in paper_claims_table(claims, "dfs").rows].count("↳ codec-free") == 1
    notes = {n["claim"]: n["text"] for n in measurement_notes(claims)}
    assert "Codec-free sensitivity (PARTIAL): codec work at 0 s (slow__nocodec)" in notes["speed"]
    assert "other" not in notes or "Codec-free" not in notes["other"]


def test_an_older_claims_file_without_the_columns_reads_as_no_row(tmp_path) -> None:
    old = {k: v for k, v in _row().items() if not k.startswith("nocodec_")}
    path = tmp_path / "claims.csv"
    pd.DataFrame([old]).to_csv(path, index=False)
    claims = read_claims(path)
    assert claims.loc[0, "nocodec_verdict"] == "" and math.isnan(claims.loc[0, "nocodec_ours"])
    assert not any(r[1] == "↳ codec-free" for r in verdict_table(claims).rows)
