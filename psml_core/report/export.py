"""The report's figures and tables as files of their own, grouped by paper.

:func:`export_outputs` copies what a report build wrote into its work directory (the SVG
figures, the CSV tables behind the PDF's tables) into ``figures/<group>/`` and
``tables/<group>/``, where ``<group>`` is the paper whose section uses the file, or ``general``
for the setup, head-to-head, results and appendices. Each figure also gets a PNG copy, rendered
from the same SVG by Typst (the report's own typesetter), for a quick look and for Snakemake's
HTML report (``snakemake --report``), which groups them by paper.

The groups come from ``report_data.json``, the same data the PDF is built from: a file belongs
to the first paper section that names it.

For the HTML report each folder also gets the PDF's own words (:mod:`psml_core.report.html`):
``index.json`` (each group's heading, each file's title: its caption's first sentence) and
``.captions/<group>/<stem>.rst`` (the whole caption), which the workflow's ``report()`` labels,
categories and caption templates read; each table gets ``<stem>.html``, the table rendered under
its caption (with its verdicts in colour and why each fell); each SVG is enlarged for the screen.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typst

from psml_core.atomic import write_text
from psml_core.errors import DataError
from psml_core.report.html import (
    INDEX,
    file_captions,
    html_index,
    readable_svg,
    table_page,
    write_captions,
)
from psml_core.report.typeset import figure_fonts

__all__ = ["GENERAL", "INDEX", "PNG_PPI", "export_outputs", "file_groups"]

GENERAL = "general"
"""The group of files no paper section uses."""

PNG_PPI = 144
"""Resolution of the PNG copies (a 16 cm figure is about 900 pixels wide)."""

_FIGURE_WIDTH_CM = 16


def _files(node: Any) -> Iterator[str]:
    """Every ``"file"`` value in a JSON tree, in document order."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "file" and isinstance(value, str):
                yield value
            else:
                yield from _files(value)
    elif isinstance(node, list):
        for item in node:
            yield from _files(item)


def file_groups(report_data: dict[str, Any]) -> dict[str, str]:
    """File name -> group (a paper id, or :data:`GENERAL`) for every figure and table."""
    groups: dict[str, str] = {}
    for paper in report_data.get("papers", []):
        for name in _files(paper):
            groups.setdefault(name, str(paper["id"]))
    for name in _files(report_data):
        groups.setdefault(name, GENERAL)
    return {n: g for n, g in groups.items() if n.endswith((".svg", ".csv"))}


def _png(svg: Path, png: Path, fonts: Path) -> None:
    """Render ``svg`` to ``png`` with Typst, on a page the figure's size, its text in ``fonts``."""
    page = svg.with_name(f".{svg.stem}.png.typ")
    write_text(
        page,
        "#set page(width: auto, height: auto, margin: 4pt, fill: white)\n"
        f'#image("{svg.name}", width: {_FIGURE_WIDTH_CM}cm)\n',
    )
    try:
        typst.compile(
            str(page),
            output=str(png),
            root=str(svg.parent),
            format="png",
            ppi=PNG_PPI,
            ignore_system_fonts=True,
            font_paths=[str(fonts)],
        )
    except typst.TypstError as exc:
        raise RuntimeError(f"typst could not render {svg} to PNG: {exc}") from exc
    finally:
        page.unlink(missing_ok=True)


def export_outputs(workdir: str | Path, figures: str | Path, tables: str | Path) -> int:
    """Copy a built report's figures (SVG + PNG) and tables (CSV) into per-group folders.

    Args:
        workdir: The report's work directory (with ``report_data.json``).
        figures: Output folder of the figures; replaced as a whole.
        tables: Output folder of the tables; replaced as a whole.

    Returns:
        The number of files written.

    Raises:
        DataError: The work directory holds no report data, or lacks a file it names.
    """
    workdir = Path(workdir)
    data_file = workdir / "report_data.json"
    if not data_file.is_file():
        raise DataError(f"{data_file} does not exist: build the report first (psml report)")
    data = json.loads(data_file.read_text(encoding="utf-8"))
    groups = file_groups(data)
    captions = file_captions(data)
    fonts = figure_fonts(workdir)
    written = 0
    for dest, suffix in ((Path(figures), ".svg"), (Path(tables), ".csv")):
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        for name, group in sorted(groups.items()):
            if not name.endswith(suffix):
                continue
            src = workdir / name
            if not src.is_file():
                raise DataError(f"{src} is named in report_data.json but does not exist")
            (tmp / group).mkdir(parents=True, exist_ok=True)
            if suffix == ".svg":  # larger for the HTML report; the PNG's width is fixed
                write_text(tmp / group / name, readable_svg(src.read_text(encoding="utf-8")))
                _png(tmp / group / name, tmp / group / f"{src.stem}.png", fonts)
            else:
                shutil.copy2(src, tmp / group / name)
                write_text(tmp / group / f"{src.stem}.html", table_page(src, data))
            written += 2
        tmp.mkdir(parents=True, exist_ok=True)  # an empty group set is still an output
        write_captions(tmp, {n: g for n, g in groups.items() if n.endswith(suffix)}, captions)
        write_text(tmp / INDEX, json.dumps(html_index(data, groups, suffix), indent=1))
        # Replace the folder as a whole, so a group an earlier build wrote cannot linger.
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    return written
