"""The report's own words for Snakemake's HTML report (``snakemake --report``).

Snakemake shows each exported figure and table (:mod:`psml_core.report.export`) with a label
and a caption. They come from the same ``report_data.json`` the PDF is typeset from, so the HTML
report says what the PDF says:

* ``index.json`` in the figures (tables) folder: each file's category (:func:`file_categories`:
  the report's parts in reading order, numbered, since Snakemake lists its categories sorted by
  name) and title (:func:`caption_title`), unique in its category: Snakemake lists a category's
  files by their labels. The workflow's ``report()`` labels and categories read it
  (``workflow/rules/report.smk``).
* ``.captions/<group>/<stem>.rst``: the whole caption as reStructuredText, which the caption
  templates (``workflow/report/figures.rst``, ``tables.rst``) include.
* ``<stem>.html`` beside each table's CSV (:func:`table_page`): the table rendered, under its
  caption, with its verdicts in the PDF's colours and, in the verdict tables, why each verdict
  fell (the paper sections' notes), so that the HTML report shows the table rather than a CSV
  to download.
* The SVG figures at :data:`SVG_SCALE` times the PDF's size (:func:`readable_svg`): Snakemake
  shows an SVG at its own size.

Captions hold the template's inline maths between ``$`` signs; they are shown as code here.
"""

from __future__ import annotations

import csv
import functools
import html
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from psml_core.atomic import write_text

__all__ = [
    "CAPTIONS",
    "INDEX",
    "OTHER_SECTION",
    "PDF_CATEGORY",
    "SECTIONS",
    "SVG_SCALE",
    "WHY",
    "caption_rst",
    "caption_title",
    "category_name",
    "file_captions",
    "file_categories",
    "html_index",
    "readable_svg",
    "table_html",
    "table_page",
    "verdict_colours",
    "write_captions",
]

INDEX = "index.json"
"""The labels file in each exported folder."""
CAPTIONS = ".captions"
"""The folder of the caption files in each exported folder (hidden: not a figure or table)."""
SECTIONS: tuple[tuple[str, str], ...] = (
    ("summary", "Verdicts and their reasons"),
    ("papers", ""),  # one category per paper section, under the section's heading
    ("setup", "Setup"),
    ("regime_map", "Regime maps: where each claim holds"),
    ("head_to_head", "Head-to-head"),
    ("results", "Results over all runs"),
    ("attachments", "Tables attached to the PDF"),
    ("methods", "Appendix A: Methods"),
    ("operating_points", "Appendix B: Operating points"),
    ("provenance", "Appendix C: Provenance"),
)
"""The report data's parts in the HTML report's reading order, with their categories' names.

The verdicts first, then the papers, then the PDF's other sections in the PDF's order."""
OTHER_SECTION = "Other tables and figures of the PDF"
"""The category of a file in a part :data:`SECTIONS` does not name (after every other one)."""
PDF_CATEGORY = "01 Summary: the PDF report"
"""The PDF's own category, the first (``workflow/rules/report.smk`` names it)."""
SVG_SCALE = 1.5
"""The HTML report's figures against the PDF's size: a half-width figure (3.15 in) becomes 4.7 in
and the smallest text (5.5 pt) 8.25 pt, as the PDF reads at 150 % on a screen."""
TITLE_CHARS = 110
"""A title longer than this is cut at a word, with an ellipsis."""
TITLE_MIN = 6
"""A title's first clause ends at the first separator past this many characters."""


def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    """Every mapping in a JSON tree, in document order."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for item in node:
            yield from _nodes(item)


def file_captions(report_data: Mapping[str, Any]) -> dict[str, str]:
    """File name -> its caption, for every figure and table the report data names."""
    out: dict[str, str] = {}
    for node in _nodes(dict(report_data)):
        name, caption = node.get("file"), node.get("caption")
        if isinstance(name, str) and isinstance(caption, str):
            out.setdefault(name, " ".join(caption.split()))
    return out


def _plain(text: str) -> str:
    """The caption without its maths' ``$`` signs (``$k/n$`` -> ``k/n``)."""
    return text.replace("$", "") if text.count("$") % 2 == 0 else text


def caption_title(caption: str, fallback: str) -> str:
    """A short title from a caption: its first clause, and which part of a split figure.

    The first clause ends at the first ``:``, ``;``, ``,``, `` (`` or sentence end past
    :data:`TITLE_MIN` characters ("Test accuracy of the global model against simulated time");
    a caption's "Part 2 of 3: ..." is added in brackets. ``fallback`` where there is no caption.
    """
    text = _plain(caption).strip()
    if not text:
        return fallback
    cut = next(
        (m.start() for m in re.finditer(r"[:;,.](?=\s)|\s\(", text) if m.start() >= TITLE_MIN),
        len(text),
    )
    title = text[:cut].rstrip(" .;:,")
    if len(title) > TITLE_CHARS:
        title = title[: TITLE_CHARS - 1].rsplit(" ", 1)[0].rstrip(",;") + "…"
    part = re.search(r"\bPart (\d+) of (\d+)(?::\s*([^.]*))?", text)
    if part:
        title += f" (part {part[1]} of {part[2]}{': ' + part[3] if part[3] else ''})"
    return title


def caption_rst(caption: str) -> str:
    """The caption as reStructuredText: literal text, its maths as inline code."""
    parts = caption.split("$") if caption.count("$") % 2 == 0 else [caption]
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(f"``{part}``" if part.strip() else "")
        else:
            out.append(re.sub(r"([\\`*_|<>\[\]])", r"\\\1", part))
    return "".join(out) + "\n"


def write_captions(folder: Path, groups: Mapping[str, str], captions: Mapping[str, str]) -> None:
    """``.captions/<group>/<stem>.rst`` for every file of ``groups`` (file -> group)."""
    for name, group in groups.items():
        text = captions.get(name) or "The PDF report gives no caption for this file."
        write_text(folder / CAPTIONS / group / f"{Path(name).stem}.rst", caption_rst(text))


def _named(node: Any) -> list[str]:
    """The figures and tables a part of the report data names, in document order."""
    names = (n.get("file") for n in _nodes(node))
    return [n for n in names if isinstance(n, str) and n.endswith((".svg", ".csv"))]


def _parts(report_data: Mapping[str, Any]) -> list[tuple[str, bool, list[str]]]:
    """(category name, a paper's?, its files) for every part, in :data:`SECTIONS` order."""
    parts: list[tuple[str, bool, list[str]]] = []
    for key, name in SECTIONS:
        if key == "papers":
            parts += [
                (str(p.get("heading") or p.get("id")), True, _named(p))
                for p in report_data.get("papers") or []
            ]
        else:
            parts.append((name, False, _named(report_data.get(key))))
    known = {key for key, _ in SECTIONS} | {"papers"}
    parts.append(
        (OTHER_SECTION, False, _named([v for k, v in report_data.items() if k not in known]))
    )
    return parts


def category_name(number: int, name: str) -> str:
    """``"03 dc2: ..."``: Snakemake sorts categories by name, so the number sets the order."""
    return f"{number:02d} {name}"


def file_categories(report_data: Mapping[str, Any]) -> dict[str, str]:
    """File name -> its category in the HTML report, numbered in reading order from 02.

    A file belongs to the first paper section that names it (as its folder does,
    :func:`psml_core.report.export.file_groups`), else to the first part that does; a part
    that names no file gets no category, so a tier without a head-to-head shows none.
    """
    parts = _parts(report_data)
    owner: dict[str, int] = {}
    for first_papers in (True, False):
        for i, (_, is_paper, names) in enumerate(parts):
            if is_paper or not first_papers:
                for name in names:
                    owner.setdefault(name, i)
    used = sorted(set(owner.values()))
    number = {i: category_name(n, parts[i][0]) for n, i in enumerate(used, start=2)}
    return {name: number[i] for name, i in owner.items()}


def html_index(
    report_data: Mapping[str, Any], groups: Mapping[str, str], suffix: str
) -> dict[str, Any]:
    """``{"categories": {"<group>/<stem>": category}, "files": {"<group>/<stem>": title}}``.

    Args:
        report_data: The report's data.
        groups: File name -> group, its folder (:func:`psml_core.report.export.file_groups`).
        suffix: The folder's kind of file (``.svg`` figures, ``.csv`` tables).
    """
    captions = file_captions(report_data)
    categories = file_categories(report_data)
    names = {f"{group}/{Path(name).stem}": name for name, group in sorted(groups.items())}
    names = {key: name for key, name in names.items() if name.endswith(suffix)}
    files = {key: caption_title(captions.get(n, ""), Path(n).stem) for key, n in names.items()}
    # Snakemake lists a category's files by title: two equal titles would show one file only.
    seen: dict[tuple[str, str], int] = {}
    for key, title in files.items():
        seen[(categories[names[key]], title)] = seen.get((categories[names[key]], title), 0) + 1
    for key, title in files.items():
        if seen[(categories[names[key]], title)] > 1:
            files[key] = f"{title} ({key.split('/', 1)[1]})"
    return {"categories": {key: categories[n] for key, n in names.items()}, "files": files}


WHY = "Why"
"""The verdict tables' last column in the HTML report: why each verdict fell."""
_WHY_CAPTION = f" {WHY}: why the verdict fell, from the paper's section (none if REPRODUCED)."
_STYLE = (
    "body{font-family:sans-serif;margin:1em}caption{caption-side:top;text-align:left;"
    "padding:0 0 .6em;max-width:60em}table{border-collapse:collapse;font-size:.9em}"
    "th,td{border:1px solid #bbb;padding:.25em .5em;vertical-align:top;max-width:40em}"
    "th{background:#eee}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}.v{font-weight:bold}"
)
_NUMBER = re.compile(r"^[-+−]?[\d.,]+(e[-+]?\d+)?\s*(%|x|×|s|ms|B|KB|MB|GB)?$")


@functools.cache
def verdict_colours() -> dict[str, tuple[str, str]]:
    """Verdict -> (text colour, fill), read from the PDF's template so both show the same."""
    text = (Path(__file__).with_name("templates") / "report.typ").read_text(encoding="utf-8")
    block = text[text.index("#let verdict-colours") :].split("\n)", 1)[0]
    pairs = re.findall(
        r'"([^"]+)": \(rgb\("(#[0-9a-fA-F]{6})"\), rgb\("(#[0-9a-fA-F]{6})"\)\)', block
    )
    return {verdict: (ink, fill) for verdict, ink, fill in pairs}


def _reasons(report_data: Mapping[str, Any]) -> dict[str, str]:
    """Claim id -> why its verdict fell: the paper section's note (none for REPRODUCED)."""
    return {
        str(m["claim"]): " ".join(str(m.get("text") or "").split())
        for p in report_data.get("papers") or []
        for m in p.get("misses") or []
        if isinstance(m, Mapping) and "claim" in m
    }


def table_page(csv_path: Path, report_data: Mapping[str, Any]) -> str:
    """:func:`table_html` of one of the report's tables, with what the report data says of it.

    Its caption; its verdict column (the table's ``verdict`` index) in colour; and in a table
    of claims with verdicts, a last column "Why": the note on each claim's verdict that its
    paper's section gives under its tables.
    """
    spec = next((n for n in _nodes(dict(report_data)) if n.get("file") == csv_path.name), {})
    verdict = spec.get("verdict")
    return table_html(
        csv_path,
        " ".join(str(spec.get("caption") or "").split()),
        verdict_column=verdict if isinstance(verdict, int) else None,
        reasons=_reasons(report_data),
    )


def _with_reasons(
    header: list[str], body: list[list[str]], reasons: Mapping[str, str]
) -> tuple[list[str], list[list[str]]]:
    """The table with a "Why" column, where it has a Claim column (``"id"`` or ``"id: ..."``)."""
    if "Claim" not in header or not reasons:
        return header, body
    at = header.index("Claim")
    why = [
        reasons.get(row[at].split(":", 1)[0].strip(), "") if len(row) > at else "" for row in body
    ]
    if not any(why):
        return header, body
    return [*header, WHY], [[*row, w] for row, w in zip(body, why, strict=True)]


def table_html(
    csv_path: Path,
    caption: str,
    verdict_column: int | None = None,
    reasons: Mapping[str, str] | None = None,
) -> str:
    """A standalone HTML page: the CSV's table (its first row the header) under its caption.

    Args:
        csv_path: The table's CSV.
        caption: Its caption (the PDF's).
        verdict_column: The column holding verdicts, shown in the PDF's colours.
        reasons: Claim id -> why its verdict fell, a last column where the table has a Claim
            column.
    """
    with open(csv_path, encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = (rows[0], rows[1:]) if rows else ([], [])
    if verdict_column is not None:
        header, body = _with_reasons(header, body, reasons or {})
        added = len(header) > len(rows[0])
        caption += _WHY_CAPTION if added and caption else ""
    title = caption_title(caption, csv_path.stem)
    colours = verdict_colours() if verdict_column is not None else {}

    def cell(text: str, tag: str, column: int = -1) -> str:
        if column == verdict_column and text in colours:
            ink, fill = colours[text]
            style = f"color:{ink};background:{fill}"
            return f'<{tag} class="v" style="{style}">{html.escape(text)}</{tag}>'
        cls = ' class="n"' if tag == "td" and _NUMBER.match(text.strip()) else ""
        return f"<{tag}{cls}>{html.escape(text)}</{tag}>"

    lines = [
        "<!DOCTYPE html>",
        f'<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>',
        f"<style>{_STYLE}</style></head><body><table>",
        f"<caption>{html.escape(_plain(caption))}</caption>" if caption else "",
        "<thead><tr>" + "".join(cell(h, "th") for h in header) + "</tr></thead><tbody>",
        *("<tr>" + "".join(cell(c, "td", i) for i, c in enumerate(row)) + "</tr>" for row in body),
        "</tbody></table></body></html>",
    ]
    return "\n".join(line for line in lines if line) + "\n"


_SVG_ROOT = re.compile(r"<svg\b[^>]*>")
_SVG_SIZE = re.compile(r'(?<=\s)(width|height)="([0-9.]+)([a-z%]*)"')


def readable_svg(text: str, scale: float = SVG_SCALE) -> str:
    """The SVG with its root's width and height times ``scale`` (its drawing scales with them).

    An SVG without a ``viewBox`` is returned as it is: its drawing would not scale.
    """
    root = _SVG_ROOT.search(text)
    if root is None or "viewBox=" not in root.group(0):
        return text

    def scaled(m: re.Match[str]) -> str:
        if m[3] == "%":
            return m[0]
        value = f"{float(m[2]) * scale:.6f}".rstrip("0").rstrip(".")
        return f'{m[1]}="{value}{m[3]}"'

    tag = _SVG_SIZE.sub(scaled, root.group(0))
    return text[: root.start()] + tag + text[root.end() :]
