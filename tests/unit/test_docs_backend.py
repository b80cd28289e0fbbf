"""docs/extending.md's toy backend, installed on disk as a distribution, runs as written.

Its descriptor comes in through the ``psml.backends`` entry point its ``pyproject.toml``
declares (a real ``.dist-info``, :mod:`importlib.metadata` finds it as it finds a pip-installed
one); the config check asks it, and ``train`` runs a smoke run on it. On ``dense_bsp`` its
records match the sim's in everything but time. tests/workflow/test_workflow_backend.py
installs the same files with pip and runs them through snakemake.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest
from plugin_dists import fresh_plugins

from psml_core import plugins
from psml_core.capabilities import backend_info, check_backend
from psml_core.errors import ConfigError
from psml_core.recipes import load_experiment

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "extending.md"


def guide_files() -> dict[str, str]:
    """The toy backend's files: a fenced block whose info string names its path."""
    text = GUIDE.read_text(encoding="utf-8")
    return dict(re.findall(r"```\w+ (psml-toy/\S+)\n(.*?)```", text, re.S))


def install_toy(root: Path, name: str = "toy") -> Path:
    """The guide's package under ``root`` with its dist-info (entry points from its pyproject)."""
    src = root / "src"
    for rel, body in guide_files().items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(body, encoding="utf-8")
    project = tomllib.loads((src / "psml-toy" / "pyproject.toml").read_text())["project"]
    shutil.copytree(src / "psml-toy" / "psml_toy", root / "psml_toy")
    info = root / f"psml_toy-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    groups = project["entry-points"]
    lines = [
        f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) for g, eps in groups.items()
    ]
    (info / "entry_points.txt").write_text("".join(lines).replace("toy =", f"{name} =", 1))
    (info / "top_level.txt").write_text("psml_toy\n")
    return root


def test_the_guide_holds_the_toy_package() -> None:
    assert set(guide_files()) == {
        "psml-toy/pyproject.toml",
        "psml-toy/psml_toy/__init__.py",
        "psml-toy/psml_toy/info.py",
        "psml-toy/psml_toy/backend.py",
    }


def test_the_toy_comes_in_through_its_entry_point_and_refuses_what_it_cannot_run(
    tmp_path, smoke
) -> None:
    with fresh_plugins(install_toy(tmp_path)):
        info = backend_info("toy")
        assert (info.clock, info.processes(4, 2), info.checkpoints) == ("wall-clock", 1, False)
        assert "psml_toy.backend" not in sys.modules  # the descriptor only: no class yet
        assert "psml-toy 0.1.0 (backends: toy)" in plugins.describe_plugins()
        exp = load_experiment({"tier": "smoke", "backend": "toy"}, REPO / "config")
        with pytest.raises(ConfigError, match=r"^backend 'toy' cannot run \d+ of the tier's"):
            check_backend(exp)  # the smoke tier has touched pulls and an adaptive controller
        assert info.refusal(exp.recipes["dense_bsp"]) is None


def test_a_plugin_cannot_take_a_builtin_backends_name(tmp_path) -> None:
    refused = pytest.raises(ConfigError, match="psml itself")
    with fresh_plugins(install_toy(tmp_path, name="sim")), refused as err:
        plugins.load_plugins()
    assert "entry point 'sim' of group 'psml.backends'" in str(err.value)


def test_train_runs_dense_bsp_on_the_toy_as_the_sim_does_but_on_the_wall_clock(
    tmp_path, smoke, prepared
) -> None:
    from psml_core.engine.training import train

    run = smoke.run("digits_mlp", "dense_bsp", "dc_10g", smoke.seeds[0])
    run = dataclasses.replace(run, workload=dataclasses.replace(run.workload, iterations=8))
    data = prepared[run.workload.dataset]
    with fresh_plugins(install_toy(tmp_path / "site")):
        toy = train(dataclasses.replace(run, backend="toy"), data, tmp_path / "toy")
    sim = train(run, data, tmp_path / "sim")
    assert (toy["backend"], toy["clock"], sim["clock"]) == ("toy", "wall-clock", "simulated")
    assert toy["provenance"]["backend"] == "toy"
    a, b = (pd.read_parquet(tmp_path / d / "metrics.parquet") for d in ("sim", "toy"))
    same = ["iteration", "worker", "loss", "bytes_up", "bytes_down", "test_accuracy"]
    pd.testing.assert_frame_equal(a[same], b[same])
    assert set(b["clock"]) == {"wall-clock"}
    saved = json.loads((tmp_path / "toy" / "summary.json").read_text())
    assert saved["final_test_accuracy"] == sim["final_test_accuracy"]
