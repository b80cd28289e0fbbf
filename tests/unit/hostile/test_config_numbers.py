"""Config refused wrongly: ``lr: 1e-3`` is a number (YAML 1.2), not a string (YAML 1.1).

PyYAML follows YAML 1.1, whose floats need a dot (``1.0e-3``), so ``lr: 1e-3`` was refused as
a string. psml's reader takes YAML 1.2's floats, and the workflow lays that reading over
Snakemake's own (which stays YAML 1.1) with :func:`yaml12_numbers`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from psml_core.config import effective_config
from psml_core.config.reading import parse_yaml, yaml12_numbers
from psml_core.run_resolver import user_config

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e-3", 0.001),
        ("1E5", 100000.0),
        ("-2.5e-3", -0.0025),
        ("+1e3", 1000.0),
        (".5", 0.5),
        ("1.0e-3", 0.001),
        ("3", 3),
        ("'1e-3'", "1e-3"),
        ("1e", "1e"),
        ("e3", "e3"),
        ("1_000", 1000),
    ],
)
def test_numbers_follow_yaml_1_2(text: str, value: object) -> None:
    got = parse_yaml(f"x: {text}")["x"]
    assert got == value and type(got) is type(value)


def test_lr_1e_3_in_a_config_file_is_a_number(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("tier: smoke\nworkloads:\n  digits_mlp:\n    lr: 1e-3\n")
    cfg = effective_config(user_config(path), REPO / "config")
    assert cfg["workloads"]["digits_mlp"]["lr"] == 0.001
    assert user_config(path, ["lr_override=1e-3"])["lr_override"] == 0.001  # --set reads alike


def test_the_workflow_takes_the_number_where_snakemake_read_a_string() -> None:
    text = "tier: smoke\nseeds: [0, 1]\nworkloads:\n  w: {lr: 1e-3, name: 1e-3x, it: 5}\n"
    theirs = yaml.safe_load(text)  # Snakemake's reader: YAML 1.1
    assert theirs["workloads"]["w"]["lr"] == "1e-3"
    theirs["extra"] = "from --config"
    got = yaml12_numbers(theirs, parse_yaml(text))
    assert got["workloads"]["w"] == {"lr": 0.001, "name": "1e-3x", "it": 5}
    assert got["seeds"] == [0, 1] and got["extra"] == "from --config"
    # A value --config replaced (a string there, another type in the file) is left as given.
    assert yaml12_numbers({"lr": "fast"}, {"lr": 0.1}) == {"lr": "fast"}
