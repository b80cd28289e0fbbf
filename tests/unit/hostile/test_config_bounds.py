"""Hostile config: YAML alias bombs, deep nesting and huge files are refused in one line.

Nine nested anchors under ``methods:`` ran past 90 s in `psml config` (validation walked every
aliased node), and 20,000 nested ``[`` gave a RecursionError of about 3,000 lines. Every
settings file is now read bounded (psml_core/config/reading.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from psml_core.config import RunSpec, effective_config, load_yaml, reading
from psml_core.config.reading import MAX_BYTES, MAX_DEPTH, MAX_NODES, load_json, parse_yaml
from psml_core.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]
HANG_S = 5


def _one_line(err: str, *names: str) -> None:
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err[:2000]
    for name in names:
        assert name in err, err[:2000]


def _bomb(levels: int = 9, width: int = 10) -> str:
    """``levels`` anchors, each a list of ``width`` aliases of the one before: width**levels."""
    lines = ["  - &a0 [" + ", ".join(["lol"] * width) + "]"]
    lines += [f"  - &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


HOSTILE = {
    "bomb_under_methods": ("tier: smoke\nmethods:\n" + _bomb(), "aliases expand to more than"),
    "bomb_in_a_description": (
        "tier: smoke\nexperiments:\n  e:\n    methods: [dense_bsp]\n    description:\n"
        + _bomb().replace("  - ", "      - "),
        "aliases expand to more than",
    ),
    "deep_brackets": ("tier: smoke\nmethods: " + "[" * 20_000 + "\n", "nested deeper than"),
    "deep_mappings": ("".join(f"{' ' * i}k{i}:\n" for i in range(200)) + " " * 200 + "x: 1\n",
                      "nested deeper than"),
    "an_alias_of_itself": ("tier: smoke\nmethods: &m [*m]\n", "refers to its own anchor"),
}  # fmt: skip


@pytest.mark.timeout(HANG_S)
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_yaml_file_is_refused_in_one_line_naming_it(tmp_path: Path, name: str) -> None:
    text, why = HOSTILE[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    _one_line(str(info.value), str(path), why)


@pytest.mark.timeout(HANG_S)
def test_too_many_entries_are_refused_while_reading(tmp_path: Path, monkeypatch) -> None:
    """Counted as the file is composed (at 50,000 nodes Python's composer takes a second or
    two: the bound is lowered here to keep the test short)."""
    monkeypatch.setattr(reading, "MAX_NODES", 1000)
    path = tmp_path / "many.yaml"
    path.write_text("tier: smoke\nmethods: [" + "a, " * 1010 + "]\n")
    with pytest.raises(ConfigError, match="more than 1,000 entries") as info:
        load_yaml(path)
    _one_line(str(info.value), str(path))
    path.write_text("tier: smoke\nmethods: [" + "a, " * 900 + "]\n")
    assert len(load_yaml(path)["methods"]) == 900


@pytest.mark.timeout(HANG_S)
def test_a_file_past_the_size_bound_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"# " + b"x" * MAX_BYTES + b"\n")
    with pytest.raises(ConfigError, match="larger than") as info:
        load_yaml(path, "config file")
    _one_line(str(info.value), str(path))


@pytest.mark.timeout(HANG_S)
@pytest.mark.parametrize("text", ["[" * 20_000, "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)])
def test_a_deep_json_spec_is_refused_in_one_line(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match="--run") as info:
        RunSpec.from_json(text)
    _one_line(str(info.value), "--run")
    path = tmp_path / "spec.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_json(path, "--spec")
    _one_line(str(info.value), str(path))


def test_anchors_within_the_bounds_still_work() -> None:
    """A config may share a block with an anchor; the bounds count it expanded."""
    text = "tier: smoke\nscenarios:\n  a: &link {bandwidth_gbps: 1, latency_us: 50}\n  b: *link\n"
    cfg = effective_config(parse_yaml(text), REPO / "config")
    assert cfg["scenarios"]["a"]["bandwidth_gbps"] == cfg["scenarios"]["b"]["bandwidth_gbps"] == 1


def _size_and_depth(node: yaml.Node) -> tuple[int, int]:
    kids = node.value if isinstance(node, yaml.SequenceNode) else []
    if isinstance(node, yaml.MappingNode):
        kids = [n for pair in node.value for n in pair]
    sizes = [_size_and_depth(k) for k in kids]
    return 1 + sum(s for s, _ in sizes), 1 + max((d for _, d in sizes), default=0)


def test_every_shipped_settings_file_is_well_within_the_bounds() -> None:
    """The bounds refuse no file psml ships, with room (the largest: an operating-point record).

    Composed by libyaml (fast); the shipped files use no aliases, so this is their full size.
    """
    paths = sorted((REPO / "config").rglob("*.yaml"))
    assert len(paths) > 10
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert len(text.encode()) < MAX_BYTES / 4, path
        size, depth = _size_and_depth(yaml.compose(text, Loader=yaml.CSafeLoader))
        assert size < MAX_NODES / 2 and depth < MAX_DEPTH / 4, (path, size, depth)
    for path in sorted((REPO / "config" / "validation").glob("*.json")):
        assert load_json(path, "validation table")["format"] == 1


def test_psml_config_refuses_deep_nesting_in_one_line(tmp_path: Path) -> None:
    """The case that printed a RecursionError of about 3,000 lines."""
    (tmp_path / "deep.yaml").write_text(HOSTILE["deep_brackets"][0])
    before = set(tmp_path.rglob("*"))
    proc = subprocess.run(
        [sys.executable, "-m", "psml_core", "config", "--configfile", "deep.yaml",
         "--config-dir", str(REPO / "config")],
        cwd=tmp_path, capture_output=True, text=True, timeout=HANG_S,
    )  # fmt: skip
    assert proc.returncode != 0
    _one_line(proc.stderr, "deep.yaml", "nested deeper than")
    assert set(tmp_path.rglob("*")) == before


def test_libyaml_and_python_read_every_shipped_file_alike(monkeypatch) -> None:
    """parse_yaml's libyaml path (events checked, then composed in C) reads what the bounded
    pure-Python loader reads, on every shipped settings file and on the bounds' edge cases."""
    paths = sorted((REPO / "config").rglob("*.yaml")) + sorted((REPO / "config").glob("*.yaml"))
    texts = [p.read_text(encoding="utf-8") for p in paths]
    texts.append("lr: 1e-3\nx: &a {k: [1, 2.5E2, .5]}\ny: *a\n")
    edge = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    texts.append(edge)
    fast = [parse_yaml(t) for t in texts]
    monkeypatch.setattr(reading, "_LibYamlLoader", None)
    assert fast == [parse_yaml(t) for t in texts]
    for loader in (None, "libyaml"):
        if loader:
            monkeypatch.undo()
        with pytest.raises(yaml.YAMLError, match=f"nested deeper than {MAX_DEPTH}"):
            parse_yaml("[" + edge + "]")
