"""The report's figures and tables exported by paper (psml_core.report.export)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from psml_core.errors import DataError
from psml_core.report.export import GENERAL, export_outputs, file_groups

SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20">'
    '<rect width="40" height="20" fill="#0072b2"/></svg>'
)


def _workdir(tmp_path: Path, papers: list[dict], rest: dict) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    data = {"papers": papers, **rest}
    (work / "report_data.json").write_text(json.dumps(data))
    for name in file_groups(data):
        (work / name).write_text(SVG if name.endswith(".svg") else "a,b\n1,2\n")
    return work


PAPERS = [
    {"id": "dfs", "figures": [{"file": "fig_dfs_bytes_1.svg"}], "tables": {"file": "t_dfs.csv"}},
    {"id": "pcp", "figures": [{"file": "fig_pcp_sync_1.svg"}, {"file": "t_dfs.csv"}]},
]
REST = {"results": {"figures": [{"file": "fig_breakdown_1.svg"}]}, "setup": [{"file": "t.csv"}]}


def test_each_file_belongs_to_the_first_paper_that_names_it() -> None:
    groups = file_groups({"papers": PAPERS, **REST})
    assert groups == {
        "fig_dfs_bytes_1.svg": "dfs",
        "t_dfs.csv": "dfs",  # pcp names it too, later
        "fig_pcp_sync_1.svg": "pcp",
        "fig_breakdown_1.svg": GENERAL,
        "t.csv": GENERAL,
    }


def test_export_writes_svg_png_and_csv_by_group(tmp_path: Path) -> None:
    work = _workdir(tmp_path, PAPERS, REST)
    figs, tabs = tmp_path / "figures", tmp_path / "tables"
    assert export_outputs(work, figs, tabs) == 3 * 2 + 2 * 2
    shown = [p for p in figs.rglob("*.*") if ".captions" not in p.parts]
    assert sorted(p.relative_to(figs).as_posix() for p in shown) == [
        "dfs/fig_dfs_bytes_1.png",
        "dfs/fig_dfs_bytes_1.svg",
        "general/fig_breakdown_1.png",
        "general/fig_breakdown_1.svg",
        "index.json",
        "pcp/fig_pcp_sync_1.png",
        "pcp/fig_pcp_sync_1.svg",
    ]
    shown = [p for p in tabs.rglob("*.*") if ".captions" not in p.parts]
    assert sorted(p.relative_to(tabs).as_posix() for p in shown) == [
        "dfs/t_dfs.csv",
        "dfs/t_dfs.html",
        "general/t.csv",
        "general/t.html",
        "index.json",
    ]
    png = (figs / "pcp" / "fig_pcp_sync_1.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(work.glob(".*.typ"))  # the PNG's page source is not left behind


def test_a_rebuild_replaces_the_folders(tmp_path: Path) -> None:
    work = _workdir(tmp_path, PAPERS, REST)
    figs, tabs = tmp_path / "figures", tmp_path / "tables"
    export_outputs(work, figs, tabs)
    data = json.loads((work / "report_data.json").read_text())
    data["papers"] = data["papers"][:1]  # pcp's section is gone from this build
    (work / "report_data.json").write_text(json.dumps(data))
    export_outputs(work, figs, tabs)
    assert not (figs / "pcp").exists()
    assert (figs / GENERAL / "fig_pcp_sync_1.svg").exists() is False


def test_a_named_file_that_is_missing_is_a_data_error(tmp_path: Path) -> None:
    work = _workdir(tmp_path, PAPERS, REST)
    (work / "t.csv").unlink()
    with pytest.raises(DataError, match=r"t\.csv is named in report_data\.json"):
        export_outputs(work, tmp_path / "f", tmp_path / "t")
    with pytest.raises(DataError, match="build the report first"):
        export_outputs(tmp_path, tmp_path / "f", tmp_path / "t")


def test_the_html_report_gets_the_pdfs_titles_captions_and_rendered_tables(tmp_path) -> None:
    """snakemake --report showed file stems, "The PDF gives its caption" and CSV downloads."""
    papers = [
        {
            "id": "dfs",
            "heading": "dfs: DFS, data formatting and sparsification",
            "figures": [
                {
                    "file": "fig_dfs_bytes_1.svg",
                    "caption": "Bytes up per iteration, DFS against OmniReduce. "
                    "At density $k/n$ = 1 % [ours]; *not* the paper's figure.",
                }
            ],
            "tables": {"file": "t_dfs.csv", "caption": "Reported against ours: time to target."},
        }
    ]
    work = _workdir(tmp_path, papers, REST)
    (work / "t_dfs.csv").write_text("Method,Time (s)\ndfs,1.25\n<b>,x\n")
    figs, tabs = tmp_path / "figures", tmp_path / "tables"
    export_outputs(work, figs, tabs)
    index = json.loads((figs / "index.json").read_text())
    assert index["categories"] == {
        "dfs/fig_dfs_bytes_1": f"02 {papers[0]['heading']}",
        "general/fig_breakdown_1": "04 Results over all runs",
    }
    assert index["files"]["dfs/fig_dfs_bytes_1"] == "Bytes up per iteration"
    assert index["files"]["general/fig_breakdown_1"] == "fig_breakdown_1"  # no caption given
    rst = (figs / ".captions" / "dfs" / "fig_dfs_bytes_1.rst").read_text()
    assert "``k/n``" in rst and "\\[ours\\]" in rst and "\\*not\\*" in rst
    from docutils.core import publish_parts  # as Snakemake renders a caption

    body = publish_parts(rst, writer="html")["body"]
    assert "[ours]" in body and "<em>" not in body and 'literal">k/n<' in body
    page = (tabs / "dfs" / "t_dfs.html").read_text()
    assert "<caption>Reported against ours: time to target.</caption>" in page
    assert "<th>Time (s)</th>" in page and '<td class="n">1.25</td>' in page
    assert "<td>&lt;b&gt;</td>" in page  # cells are escaped
    assert json.loads((tabs / "index.json").read_text())["files"]["dfs/t_dfs"] == (
        "Reported against ours"
    )
