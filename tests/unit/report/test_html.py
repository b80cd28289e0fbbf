"""Snakemake's HTML report: categories in reading order, verdicts with why, readable SVGs."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt

from psml_core.analysis.claim_result import VERDICTS
from psml_core.report.html import (
    OTHER_SECTION,
    PDF_CATEGORY,
    SVG_SCALE,
    WHY,
    file_categories,
    html_index,
    readable_svg,
    table_page,
    verdict_colours,
)
from psml_core.report.style import report_style, save_svg


def _paper(pid: str, files: list[str], misses: dict[str, str] | None = None) -> dict:
    return {
        "id": pid,
        "heading": f"{pid}: the {pid} paper",
        "figures": [{"file": f} for f in files],
        "misses": [{"claim": c, "text": t} for c, t in (misses or {}).items()],
    }


def _report_data(head_to_head: list[str]) -> dict:
    """A report's data with every part of the PDF, and twelve papers (more than nine parts)."""
    return {
        "title": "psml",
        "summary": {"tables": [{"file": "table_verdicts.csv", "verdict": 5}]},
        "setup": {"blocks": [{"tables": [{"file": "table_general.csv"}]}]},
        "papers": [_paper(f"p{i:02d}", [f"fig_p{i:02d}_1.svg"]) for i in range(12)],
        "regime_map": {"figures": [], "tables": []},
        "head_to_head": {"figures": [{"file": f} for f in head_to_head]},
        "results": {"figures": [{"file": "fig_breakdown_1.svg"}]},
        "attachments": [{"file": "data_runs.csv"}],
        "methods": [{"file": "table_methods.csv"}],
        "operating_points": {"tables": [{"file": "table_operating_points.csv"}]},
        "provenance": [{"file": "table_overview.csv"}],
        "future_part": [{"file": "table_new.csv"}],
    }


def test_categories_sort_by_name_into_the_reading_order() -> None:
    """Snakemake lists categories sorted by name: the numbers must give the PDF's order."""
    data = _report_data(head_to_head=["fig_h2h_1.svg"])
    categories = file_categories(data)
    in_order = sorted({PDF_CATEGORY, *categories.values()})
    names = [c.split(" ", 1)[1] for c in in_order]
    papers = [f"p{i:02d}: the p{i:02d} paper" for i in range(12)]
    assert names == [
        "Summary: the PDF report",
        "Verdicts and their reasons",
        *papers,
        "Setup",
        "Head-to-head",
        "Results over all runs",
        "Tables attached to the PDF",
        "Appendix A: Methods",
        "Appendix B: Operating points",
        "Appendix C: Provenance",
        OTHER_SECTION,  # a part SECTIONS does not know yet is shown, last
    ]
    assert [c[:3] for c in in_order] == [f"{n:02d} " for n in range(1, len(in_order) + 1)]
    assert categories["table_verdicts.csv"] == "02 Verdicts and their reasons"


def test_a_part_without_files_has_no_category() -> None:
    """The smoke tier has no head-to-head: the HTML report showed an empty category for it."""
    categories = set(file_categories(_report_data(head_to_head=[])).values())
    names = {c.split(" ", 1)[1] for c in categories}
    assert "Head-to-head" not in names and "Regime maps: where each claim holds" not in names
    assert "Setup" in names and "Results over all runs" in names
    numbers = sorted(int(c[:2]) for c in categories)
    assert numbers == list(range(2, 2 + len(categories)))  # no gap where a part has no file


def test_a_file_a_paper_names_is_in_that_papers_category() -> None:
    data = _report_data(head_to_head=[])
    data["results"]["figures"].append({"file": "fig_p03_1.svg"})  # named again, later
    data["summary"]["tables"].append({"file": "fig_p05_1.svg"})  # and earlier in reading order
    categories = file_categories(data)
    assert categories["fig_p03_1.svg"] == "06 p03: the p03 paper"
    assert categories["fig_p05_1.svg"] == "08 p05: the p05 paper"


def test_titles_are_unique_within_a_category() -> None:
    data = {
        "papers": [
            {
                "id": "dfs",
                "heading": "dfs",
                "tables": [
                    {"file": "t_a.csv", "caption": "Regimes, one row per claim."},
                    {"file": "t_b.csv", "caption": "Regimes, one row per field."},
                ],
            }
        ]
    }
    index = html_index(data, {"t_a.csv": "dfs", "t_b.csv": "dfs"}, ".csv")
    assert index["files"] == {"dfs/t_a": "Regimes (t_a)", "dfs/t_b": "Regimes (t_b)"}
    assert set(index["categories"].values()) == {"02 dfs"}


def _verdicts(tmp_path: Path) -> tuple[Path, dict]:
    csv = tmp_path / "table_verdicts.csv"
    csv.write_text(
        "Paper,Claim,Reported,Ours,Judged as,Verdict\n"
        "dfs,dfs_time: DFS cuts time by 74%.,74 %,-116 %,time · vs dense,NOT REPRODUCED\n"
        "dfs,↳ robustness,–,–,vs the strongest,NOT REPRODUCED\n"
        "pcp,pcp_sync: PCP is faster.,2×,2.1×,time · vs ssp,REPRODUCED\n",
        encoding="utf-8",
    )
    data = {
        "summary": {
            "tables": [{"file": csv.name, "caption": "Reported versus reproduced.", "verdict": 5}]
        },
        "papers": [_paper("dfs", [], {"dfs_time": "NOT REPRODUCED: the <seed> fell short."})],
    }
    return csv, data


def test_the_verdict_table_shows_each_verdict_in_colour_with_why_it_fell(tmp_path) -> None:
    csv, data = _verdicts(tmp_path)
    page = table_page(csv, data)
    rows = re.findall(r"<tr>(.*?)</tr>", page)
    assert rows[0].endswith(f"<th>{WHY}</th>")
    assert rows[1].endswith("<td>NOT REPRODUCED: the &lt;seed&gt; fell short.</td>")
    assert rows[2].endswith("<td></td>")  # a robustness row is no claim of its own
    assert rows[3].endswith("<td></td>")  # REPRODUCED: nothing to explain
    ink, fill = verdict_colours()["REPRODUCED"]
    assert f'<td class="v" style="color:{ink};background:{fill}">REPRODUCED</td>' in rows[3]
    assert page.count('class="v"') == 3
    assert f"{WHY}: why the verdict fell" in page


def test_a_table_without_claims_or_verdicts_is_shown_as_it_is(tmp_path) -> None:
    csv = tmp_path / "table_general.csv"
    csv.write_text("Setting,Value\nVerdict,REPRODUCED\n", encoding="utf-8")
    page = table_page(csv, {"setup": [{"file": csv.name, "caption": "Settings."}]})
    assert WHY not in page and 'class="v"' not in page
    assert "<caption>Settings.</caption>" in page


def test_every_verdict_has_the_pdfs_colours() -> None:
    """The colours are read from the PDF's template: a verdict it lacks would show plain."""
    colours = verdict_colours()
    assert set(VERDICTS) <= set(colours)
    assert all(re.fullmatch(r"#[0-9a-f]{6}", c) for pair in colours.values() for c in pair)


def test_report_figures_keep_their_text_as_text(tmp_path) -> None:
    """Text drawn as glyph paths could not be searched or selected in the HTML report."""
    with report_style():
        fig, ax = plt.subplots(figsize=(3.15, 2))
        ax.plot([0, 1], [1, 0], label="topk_ef")
        ax.set_xlabel("simulated time (s)")
        ax.legend()
        save_svg(fig, tmp_path / "f.svg")
    svg = (tmp_path / "f.svg").read_text(encoding="utf-8")
    texts = re.findall(r"<text\b[^>]*>([^<]*)</text>", svg)
    assert "simulated time (s)" in texts and "topk_ef" in texts


def test_readable_svg_scales_the_size_not_the_drawing() -> None:
    svg = (
        '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="225.5pt" '
        'height="100pt" viewBox="0 0 225.5 100" version="1.1">'
        '<path style="stroke-width: 0.8" width="3"/></svg>'
    )
    out = readable_svg(svg)
    assert f'width="{225.5 * SVG_SCALE:g}pt"' in out and f'height="{100 * SVG_SCALE:g}pt"' in out
    assert 'viewBox="0 0 225.5 100"' in out and '<path style="stroke-width: 0.8" width="3"/>' in out
    no_view_box = '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"></svg>'
    assert readable_svg(no_view_box) == no_view_box  # its drawing would not scale
