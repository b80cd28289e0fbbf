"""The README's counts against the code: recipes, attachments, CLI commands, page statements.

The smoke report's page count and its number of attachments are checked against a real build
by the smoke workflow test (tests/workflow/test_workflow_smoke.py).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from psml_core.cli import _parser
from psml_core.recipes import load_methods
from psml_core.report.attachments import NAMES

README = Path(__file__).resolve().parents[2] / "README.md"
TEXT = README.read_text(encoding="utf-8")


def _commands() -> list[str]:
    """The sub-commands of ``psml``, as its argument parser defines them."""
    (sub,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return list(sub.choices)


def test_the_recipe_count_is_the_recipes_file():
    (stated,) = re.findall(r"`config/methods\.yaml`, (\d+) of them", TEXT)
    assert int(stated) == len(load_methods()), "README.md: the number of recipes"


def test_the_attachments_listed_are_every_attachment():
    (paragraph,) = [p for p in TEXT.split("\n\n") if "pdfdetach -saveall" in p]
    (stated,) = re.findall(r"(\d+) CSV attachments", paragraph)
    assert int(stated) == len(NAMES), "README.md: the number of CSV attachments"
    listed = re.findall(r"`data_(\w+)\.csv`", paragraph)
    assert sorted(listed) == sorted(NAMES), "README.md: the attachments' file names"


def test_the_cli_list_is_every_command():
    (entry,) = re.findall(r"cli\.py\s+psml ([\w|\s-]+?) \(", TEXT)
    listed = re.sub(r"\s+", "", entry).split("|")
    assert sorted(listed) == sorted(_commands()), "README.md: psml's commands in the layout"


def test_page_counts_are_stated_in_the_tier_table_only():
    """A page count elsewhere would go stale (the README said 15 and 20 for one report)."""
    stated = [line.split("|")[:2] for line in TEXT.splitlines() if re.search(r"\b\d+ pages", line)]
    assert stated == [["", " `smoke` (default) "], ["", " `small` "]], "README.md: page counts"


def test_the_tier_tables_rows_say_what_a_newcomer_gets():
    lines = TEXT.splitlines()
    header = next(line for line in lines if line.startswith("| tier |"))
    assert [c.strip() for c in header.strip("|").split("|")][3:] == [
        "time, on 2 cores",
        "report: pages, verdicts to expect",
        "disk, memory",
    ]
    for tier in ("smoke", "small", "paper"):
        (row,) = [line for line in lines if line.startswith(f"| `{tier}`")]
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 6 and all(cells), f"README.md: the {tier} tier's row"
