"""Typesetting the report's Typst sources: the fonts, where figures go, the PDF.

Every compile (the PDF, the exported PNG figures, the tests' renders) uses the wheel's fonts
and matplotlib's DejaVu Sans only (:func:`figure_fonts`), so the layout is the same on every
machine; the PDF's figures are placed as a first layout chose (:func:`choose_floats`).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import matplotlib
import typst

from psml_core.atomic import atomic_path, write_text

__all__ = ["FLOATS_FILE", "compile_pdf", "figure_fonts", "typst_options"]

FLOATS_FILE = "floats.txt"
"""In the work directory: the figures that float, chosen by :func:`choose_floats`."""


def figure_fonts(workdir: Path) -> Path:
    """Copy DejaVu Sans (matplotlib's) into ``workdir/fonts``, for Typst to draw figure text.

    The figures keep their text as SVG text (searchable in the PDF and the HTML report); Typst
    draws it in the font matplotlib measured it in, not a wheel font of other widths.
    """
    fonts = workdir / "fonts"
    fonts.mkdir(exist_ok=True)
    for src in sorted((Path(matplotlib.get_data_path()) / "fonts" / "ttf").glob("DejaVuSans*.ttf")):
        if not (fonts / src.name).exists():
            shutil.copyfile(src, fonts / src.name)
    return fonts


def typst_options(workdir: Path) -> dict[str, Any]:
    """The options every compile of the report's sources uses (the PDF, and tests' renders).

    Only the wheel's fonts and DejaVu Sans (:func:`figure_fonts`); and the figures' placement
    as chosen (:data:`FLOATS_FILE`), once it is.
    """
    options: dict[str, Any] = {
        "root": str(workdir),
        "ignore_system_fonts": True,
        "font_paths": [str(figure_fonts(workdir))],
    }
    floats = workdir / FLOATS_FILE
    if floats.is_file():
        options["sys_inputs"] = {"floats": floats.read_text(encoding="utf-8").strip()}
    return options


def choose_floats(workdir: Path) -> None:
    """Choose once which figures float, from a first layout, and fix it for the PDF.

    The template places a figure in the text where it fits the page, or where the page's rest
    is under a quarter of it, and floats it otherwise; chosen inside one layout, each choice
    moves the text that later ones read and Typst's passes need not settle. Fixed, the
    document has no such loop and settles.
    """
    (workdir / FLOATS_FILE).unlink(missing_ok=True)
    choices = json.loads(
        typst.query(
            str(workdir / "report.typ"), "<figure-choice>", field="value", **typst_options(workdir)
        )
    )
    floats = sorted({int(k) for k, float_ in choices if float_})
    write_text(workdir / FLOATS_FILE, ",".join(map(str, floats)) + "\n")


def compile_pdf(workdir: Path, out_pdf: Path) -> None:
    """Compile ``workdir/report.typ`` to ``out_pdf`` (atomically); Typst's warnings to stderr."""
    with atomic_path(out_pdf) as tmp:
        try:
            choose_floats(workdir)
            _, warnings = typst.compile_with_warnings(
                str(workdir / "report.typ"),
                output=str(tmp),
                format="pdf",
                # No PDF tags: the tag tree fails on some float placements, depending only on
                # where pages break ("this element's PDF tag would be split up"; typst issues
                # 7789, 8776), so a report would fail to build for one more run in its table.
                pdf_tags=False,
                **typst_options(workdir),
            )
        except typst.TypstError as exc:  # a template or data bug, not a user error
            raise RuntimeError(f"typst could not compile {workdir / 'report.typ'}: {exc}") from exc
    for warning in warnings:  # e.g. a layout that did not converge: pages from different passes
        print(f"report: typst warning: {' '.join(str(warning).split())}", file=sys.stderr)
