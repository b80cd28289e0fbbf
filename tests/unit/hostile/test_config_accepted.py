"""Hostile config: values that were accepted, then crashed a job, are refused when it loads.

``seeds: [12345678901234567890123]`` passed both checks and then `psml train` died in
``manual_seed``; ``shards: 100000``, a data path that is a directory, ``report.validation:
/etc/passwd`` and ``url: file:///etc/passwd`` all passed.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch

from psml_core.config import build_experiment, effective_config
from psml_core.config.schema import read_schema
from psml_core.errors import ConfigError
from psml_core.recipes import load_experiment

REPO = Path(__file__).resolve().parents[3]
HANG_S = 5
BIG = 12345678901234567890123


def _one_line(err: str, *names: str) -> None:
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    for name in names:
        assert name in err, err


def _refused(override: dict, *names: str, load=effective_config) -> None:
    with pytest.raises(ConfigError) as info:
        load({"tier": "smoke", **override}, REPO / "config")
    _one_line(str(info.value), *names)


@pytest.mark.timeout(HANG_S)
@pytest.mark.parametrize(
    ("override", "key"),
    [
        ({"seeds": [0, BIG]}, "'seeds[1]'"),
        ({"seeds": [-1]}, "'seeds[0]'"),
        ({"tuning": {"seed": 2**63}}, "'tuning.seed'"),
        ({"experiments": {"e": {"methods": ["dense_bsp"], "seeds": [2**32]}}},
         "'experiments.e.seeds[0]'"),
    ],
)  # fmt: skip
def test_a_seed_no_generator_takes_is_refused(override: dict, key: str) -> None:
    _refused(override, key, "out of range")


def test_the_largest_seed_with_its_check_seeds_is_taken_by_every_generator() -> None:
    """The schema's bound, plus the most check seeds, fits numpy, torch and random.

    (MurmurHash's placement seeds take the seed mod 2**32: psml_core/placement/hash.py.)
    """
    schema = read_schema("config")
    top = schema["$defs"]["seed"]["maximum"]
    checks = schema["$defs"]["tuning"]["properties"]["check_seeds"]["maximum"]
    for seed in (top, top + 1 + checks):
        np.random.default_rng([seed, 3]).random()
        np.random.RandomState(seed).random_sample()  # the strictest: below 2**32
        torch.Generator().manual_seed(seed)
        random.Random(seed).random()
    effective_config({"tier": "smoke", "seeds": [top]}, REPO / "config")


@pytest.mark.timeout(HANG_S)
@pytest.mark.parametrize(
    ("override", "key"),
    [
        ({"shards": 100_000}, "'shards'"),
        ({"workers": 100_000}, "'workers'"),
        ({"workloads": {"digits_mlp": {"workers": 10**9}}}, "'workloads.digits_mlp.workers'"),
    ],
)
def test_workers_and_shards_past_the_bound_are_refused(override: dict, key: str) -> None:
    _refused(override, key, "out of range")


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("file:///etc/passwd", False),
        ("ftp://example.org/a.bz2", False),
        ("http://example.org/a.bz2", False),
        ("https://example.org/a.bz2", True),
    ],
)
def test_only_https_downloads_are_allowed(url: str, ok: bool) -> None:
    ds = {"digits": {"source": "libsvm", "url": url, "sha256": "0" * 64, "n_features": 64}}
    if ok:
        effective_config({"tier": "smoke", "datasets": ds}, REPO / "config")
    else:
        _refused({"datasets": ds}, "'datasets.digits.url'", "https")


def test_a_data_path_of_the_wrong_kind_is_refused(tmp_path: Path) -> None:
    folder, file = tmp_path / "rcv1", tmp_path / "mnist.gz"
    folder.mkdir()
    file.write_bytes(b"x")
    libsvm = {"digits": {"source": "libsvm", "path": str(folder), "n_features": 64}}
    _refused({"datasets": libsvm}, "'datasets.digits.path'", "is a directory; give a file",
             load=build_experiment)  # fmt: skip
    trace = {"bandwidth_gbps": 1, "delay": {"kind": "trace", "path": str(folder)}}
    _refused({"scenarios": {"dc_10g": trace}}, "'scenarios.dc_10g.delay.path'", "a directory",
             load=build_experiment)  # fmt: skip


@pytest.mark.parametrize(
    ("validation", "why"),
    [
        ("/etc/passwd", "leaves"),
        ("../outside.json", "leaves"),
        ("folder.json", "is a directory"),
        ("notes.txt", "not a .json file"),
        ("other.json", "not a `psml validate` table"),
    ],
)
def test_report_validation_must_be_a_table_under_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, validation: str, why: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder.json").mkdir()
    (tmp_path / "notes.txt").write_text("{}")
    (tmp_path / "other.json").write_text('{"format": 7}')
    # The place is the settings' check; the contents are checked one layer up (recipes).
    load = load_experiment if why.startswith("not a `psml") else build_experiment
    _refused({"report": {"validation": validation}}, "'report.validation'", why, load=load)


def _seed_nodes(node: object, name: str = "") -> list[dict]:
    """Every schema node of a seed: a property named seed, or the items of one named seeds."""
    out: list[dict] = []
    if isinstance(node, dict):
        if name == "seed" or (name == "seeds" and "items" in node):
            out.append(node if name == "seed" else node["items"])
        for key, sub in node.items():
            children = (
                sub.items() if key == "properties" and isinstance(sub, dict) else [(key, sub)]
            )
            for child_name, child in children:
                out += _seed_nodes(child, child_name if key == "properties" else "")
    elif isinstance(node, list):
        for sub in node:
            out += _seed_nodes(sub)
    return out


@pytest.mark.parametrize("schema", ["config", "paper"])
def test_every_seed_a_person_writes_is_bounded_as_defs_seed(schema: str) -> None:
    """A seed key without the bound would reach ``manual_seed`` unchecked."""
    top = read_schema("config")["$defs"]["seed"]["maximum"]
    nodes = _seed_nodes(read_schema(schema))
    assert nodes
    for node in nodes:
        assert node.get("$ref") == "#/$defs/seed" or node.get("maximum") == top, node
