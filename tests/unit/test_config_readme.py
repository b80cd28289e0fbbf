"""config/README.md describes every config key, and matches the schema it is written from."""

from __future__ import annotations

import re
from pathlib import Path

from psml_core.config.readme import config_readme
from psml_core.config.schema import read_schema

REPO = Path(__file__).resolve().parents[2]
README = REPO / "config" / "README.md"


def test_config_readme_is_current() -> None:
    assert README.read_text(encoding="utf-8") == config_readme(), (
        "config/README.md is stale: regenerate it with `psml config --readme > config/README.md`"
    )


def _keys(schema: dict) -> set[tuple[str, str]]:
    keys = {("Top-level keys", k) for k in schema["properties"]}
    for name, node in schema["$defs"].items():
        keys |= {(name, k) for k in node.get("properties", {})}
    return keys


def test_every_schema_key_has_a_described_row() -> None:
    """Independently of the generator: each key is a table row in its section, and back."""
    text = README.read_text(encoding="utf-8")
    rows: set[tuple[str, str]] = set()
    section = ""
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        elif m := re.match(r"\| `([^`]+)`", line):
            rows.add((section, m.group(1)))
    assert rows == _keys(read_schema("config"))


def test_psml_config_readme_prints_it(capsys) -> None:
    from psml_core.cli import main

    assert main(["config", "--readme"]) == 0
    assert capsys.readouterr().out == README.read_text(encoding="utf-8")


def test_the_generator_sees_a_new_key() -> None:
    schema = dict(read_schema("config"))
    schema["properties"] = {
        **schema["properties"],
        "new_key": {"type": "integer", "minimum": 1, "default": 2, "description": "A | new one."},
    }
    row = "| `new_key` | integer (>= 1) | `2` | A \\| new one. |"
    assert row in config_readme(schema).splitlines()
