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
    assert export_outputs(work, figs, tabs) == 3 * 2 + 2
    assert sorted(p.relative_to(figs).as_posix() for p in figs.rglob("*.*")) == [
        "dfs/fig_dfs_bytes_1.png",
        "dfs/fig_dfs_bytes_1.svg",
        "general/fig_breakdown_1.png",
        "general/fig_breakdown_1.svg",
        "pcp/fig_pcp_sync_1.png",
        "pcp/fig_pcp_sync_1.svg",
    ]
    assert sorted(p.relative_to(tabs).as_posix() for p in tabs.rglob("*.*")) == [
        "dfs/t_dfs.csv",
        "general/t.csv",
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
