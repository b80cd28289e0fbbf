"""The report's own words for Snakemake's HTML report (``snakemake --report``).

Snakemake shows each exported figure and table (:mod:`psml_core.report.export`) with a label
and a caption. They come from the same ``report_data.json`` the PDF is typeset from, so the HTML
report says what the PDF says:

* ``index.json`` in the figures (tables) folder: each group's heading (a paper section's
  heading, or the general part's) and each file's title (:func:`caption_title`), unique in its
  group: Snakemake lists a group's files by their labels.
  The workflow's ``report()`` labels and categories read it (``workflow/rules/report.smk``).
* ``.captions/<group>/<stem>.rst``: the whole caption as reStructuredText, which the caption
  templates (``workflow/report/figures.rst``, ``tables.rst``) include.
* ``<stem>.html`` beside each table's CSV: the table rendered, under its caption, so that the
  HTML report shows the table rather than a CSV to download.

Captions hold the template's inline maths between ``$`` signs; they are shown as code here.
"""

from __future__ import annotations

import csv
import html
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from psml_core.atomic import write_text

__all__ = [
    "CAPTIONS",
    "GENERAL_HEADING",
    "INDEX",
    "caption_rst",
    "caption_title",
    "file_captions",
    "html_index",
    "table_html",
    "write_captions",
]

INDEX = "index.json"
"""The labels file in each exported folder."""
CAPTIONS = ".captions"
"""The folder of the caption files in each exported folder (hidden: not a figure or table)."""
GENERAL_HEADING = "Setup, head-to-head, results over all runs and appendices"
"""The heading of the files no paper section uses."""
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


def html_index(
    report_data: Mapping[str, Any], groups: Mapping[str, str], suffix: str
) -> dict[str, Any]:
    """``{"groups": {group: heading}, "files": {"<group>/<stem>": title}}`` of one folder.

    Args:
        report_data: The report's data.
        groups: File name -> group (:func:`psml_core.report.export.file_groups`).
        suffix: The folder's kind of file (``.svg`` figures, ``.csv`` tables).
    """
    headings = {
        str(p["id"]): str(p.get("heading") or p["id"]) for p in report_data.get("papers", [])
    }
    captions = file_captions(report_data)
    files = {
        f"{group}/{Path(name).stem}": caption_title(captions.get(name, ""), Path(name).stem)
        for name, group in sorted(groups.items())
        if name.endswith(suffix)
    }
    # Snakemake lists a group's files by title: two equal titles would show one file only.
    seen: dict[tuple[str, str], int] = {}
    for key, title in files.items():
        seen[(key.split("/", 1)[0], title)] = seen.get((key.split("/", 1)[0], title), 0) + 1
    for key, title in files.items():
        group, stem = key.split("/", 1)
        if seen[(group, title)] > 1:
            files[key] = f"{title} ({stem})"
    used = sorted({key.split("/", 1)[0] for key in files})
    return {"groups": {g: headings.get(g, GENERAL_HEADING) for g in used}, "files": files}


_STYLE = (
    "body{font-family:sans-serif;margin:1em}caption{caption-side:top;text-align:left;"
    "padding:0 0 .6em;max-width:60em}table{border-collapse:collapse;font-size:.9em}"
    "th,td{border:1px solid #bbb;padding:.25em .5em;vertical-align:top}th{background:#eee}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}"
)
_NUMBER = re.compile(r"^[-+−]?[\d.,]+(e[-+]?\d+)?\s*(%|x|×|s|ms|B|KB|MB|GB)?$")


def table_html(csv_path: Path, caption: str) -> str:
    """A standalone HTML page: the CSV's table (its first row the header) under its caption."""
    with open(csv_path, encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = (rows[0], rows[1:]) if rows else ([], [])
    title = caption_title(caption, csv_path.stem)

    def cell(text: str, tag: str) -> str:
        cls = ' class="n"' if tag == "td" and _NUMBER.match(text.strip()) else ""
        return f"<{tag}{cls}>{html.escape(text)}</{tag}>"

    lines = [
        "<!DOCTYPE html>",
        f'<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>',
        f"<style>{_STYLE}</style></head><body><table>",
        f"<caption>{html.escape(_plain(caption))}</caption>" if caption else "",
        "<thead><tr>" + "".join(cell(h, "th") for h in header) + "</tr></thead><tbody>",
        *("<tr>" + "".join(cell(c, "td") for c in row) + "</tr>" for row in body),
        "</tbody></table></body></html>",
    ]
    return "\n".join(line for line in lines if line) + "\n"
