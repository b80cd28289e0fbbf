"""The report's text and layout as a newcomer reads them, checked on a built report.

A reader of the smoke report found: "INCONSISTENT" running out of its cell, headings and list
lead-ins alone at a page's foot, pages a third empty, claim texts cut with "…", a first page of
definitions instead of a summary, and abbreviations never spelled out. Each test below would
catch one of these again, from Typst's own layout (``typst query``) or the PDF's text.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import typst
from PIL import Image
from pypdf import PdfReader
from report_inputs import make_inputs

from psml_core.analysis.claim_result import VERDICTS
from psml_core.report import build_report
from psml_core.report.format import decoded, variant_meanings
from psml_core.report.glossary import ABBREVIATIONS, VERDICT_MEANINGS, unexplained
from psml_core.report.reported_vs_ours import fmt_robust, read_claims, verdict_table
from psml_core.report.typeset import typst_options

BOTTOM_MARGIN_PT = 1.9 / 2.54 * 72  # the template's page margins
TOP_MARGIN_PT = 1.7 / 2.54 * 72
ROOM_AFTER_HEADING_PT = 30.0  # a heading's own height, its gap and one line of text


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("layout")
    inputs = make_inputs(root / "results")
    work = root / "work"
    build_report(**inputs, out_pdf=root / "report.pdf", workdir=work)
    layout = json.loads(
        typst.query(
            str(work / "report.typ"),
            "<layout>",
            field="value",
            one=True,
            **typst_options(work),
        )  # fmt: skip
    )
    reader = PdfReader(root / "report.pdf")
    pages = [" ".join(p.extract_text().replace("\u00a0", " ").split()) for p in reader.pages]
    return {"inputs": inputs, "work": work, "layout": layout, "pages": pages}


def test_every_verdict_fits_its_cell(report: dict[str, Any]) -> None:
    """Typst's layout: each verdict cell had room for its widest word (in the tables' font)."""
    cells = report["layout"]["verdicts"]
    assert {c["verdict"] for c in cells} >= set(VERDICTS)  # the summary counts all of them
    for c in cells:
        assert c["widest"] <= c["room"] + 0.01, c


def test_no_heading_ends_a_page(report: dict[str, Any]) -> None:
    layout = report["layout"]
    foot = layout["page-height"] - BOTTOM_MARGIN_PT
    assert len(layout["headings"]) > 10
    for h in layout["headings"]:
        assert h["y"] + ROOM_AFTER_HEADING_PT <= foot, h


def _empty_share(png: bytes) -> float:
    """The share of a page's text area below its last ink (the footer left out)."""
    a = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    h = a.shape[0]
    top = round(h * TOP_MARGIN_PT / 841.89)
    bottom = round(h * (1 - BOTTOM_MARGIN_PT / 841.89))
    ink = np.flatnonzero((a[top:bottom] < 200).any(axis=1))
    return 1.0 - (ink.max() + 1 if ink.size else 0) / (bottom - top)


def test_the_layout_converges(report: dict[str, Any]) -> None:
    """Typst lays the document out again until positions settle (at most five passes); one that
    does not settle mixes pages from different passes (a figure's choice to float flipping)."""
    work = report["work"]
    _, warnings = typst.compile_with_warnings(str(work / "report.typ"), format="pdf",
                                              **typst_options(work))  # fmt: skip
    assert [str(w) for w in warnings] == []


def test_no_page_is_more_than_a_third_empty_but_a_parts_last(report: dict[str, Any]) -> None:
    work = report["work"]
    pngs = typst.compile(str(work / "report.typ"), format="png", ppi=24, **typst_options(work))
    # A part starts on a page of its own (the regime maps): the page before it may end early.
    starts = {h["page"] for h in report["layout"]["headings"] if h["text"].startswith("Regime")}
    exempt = {len(pngs)} | {p - 1 for p in starts}
    shares = {i: _empty_share(png) for i, png in enumerate(pngs, 1)}
    assert shares[len(pngs)] < 1  # the measure sees ink
    for page, share in shares.items():
        assert page in exempt or share <= 1 / 3, (page, round(share, 2))


def test_the_first_page_is_a_summary_with_the_verdict_counts(report: dict[str, Any]) -> None:
    first = report["pages"][0]
    claims = read_claims(report["inputs"]["claims_csv"])
    counts = claims["verdict"].value_counts()
    assert "Where to read on" in first and "Glossary" in first
    for v in VERDICTS:  # every verdict with its count, 0 included
        assert f"{v} {int(counts.get(v, 0))} " in first, v
    assert "REPRODUCED needs" not in first  # the rules are in the glossary, not here


def test_every_all_caps_word_is_in_the_glossary(report: dict[str, Any]) -> None:
    text = " ".join(report["pages"])
    glossary = text.split("Glossary Verdicts", 1)[1].split("1 Setup", 1)[0]
    assert unexplained(text) == set()
    for v in VERDICT_MEANINGS:
        assert f"{v}:" in glossary, v
    used = {w for w in ABBREVIATIONS if f" {w} " in f" {text} "}
    assert used and all(f"{w}:" in glossary for w in used)


def test_claim_texts_are_printed_in_full(report: dict[str, Any]) -> None:
    claims = read_claims(report["inputs"]["claims_csv"])
    text = " ".join(report["pages"])
    for r in claims.itertuples(index=False):
        assert " ".join(r.statement.split()) in text, r.claim
    summary = verdict_table(claims)
    assert not any("…" in str(cell) for row in summary.rows for cell in row)


def test_a_comparison_that_ran_and_missed_its_target_is_not_called_not_run() -> None:
    """dfs's robustness rows said "not run" for runs that ran and never held their target."""
    detail = "neither run held the target in some seed: censored"
    row = pd.Series({"robust_verdict": "NOT REPRODUCED", "robust_ours": math.nan,
                     "kind": "speedup", "unit": "x", "robust_detail": detail})  # fmt: skip
    assert "not run" not in fmt_robust(row) and "missed the target" in fmt_robust(row)
    assert fmt_robust(row.copy().replace({"NOT REPRODUCED": "NOT RUN"})) == "not run"


def test_no_row_of_a_claim_with_runs_says_not_run(report: dict[str, Any], tmp_path: Path) -> None:
    claims = read_claims(report["inputs"]["claims_csv"])
    ran = claims[claims["verdict"] != "NOT RUN"].copy()
    ran["robust_verdict"], ran["robust_ours"] = "NOT REPRODUCED", math.nan
    ran["robust_detail"] = "neither run held the target in some seed"
    ran["robust_baseline"] = "dense_bsp"
    for row in verdict_table(ran).rows:
        if row[5] != "NOT RUN":
            assert "not run" not in " ".join(map(str, row)).lower(), row


def test_swept_names_are_decoded_where_they_are_used() -> None:
    """A reader met ``dc2_topk__r0p001`` and ``__t0p6`` with their meaning only in an appendix."""
    experiment = {"experiments": {
        "dc2": {"sweep": {"method": "dc2_topk", "params": ["codec.params.ratio"],
                          "values": [0.001, 0.01], "labels": ["r0p001", "r0p01"]}},
        "codec_free": {"scenario_sweep": {"base": "slow_100m", "params": ["codec_costs"],
                                          "values": [False], "labels": ["nocodec"]}},
    }}  # fmt: skip
    said = variant_meanings(experiment)
    assert decoded("dc2_topk__r0p001", said) == "dc2_topk__r0p001 (dc2_topk, ratio = 0.001)"
    assert decoded("slow_100m__nocodec", said) == "slow_100m__nocodec (slow_100m, codec_costs = no)"
    assert decoded("dense_bsp", said) == "dense_bsp"
