"""Hostile config: names that are paths (``../``) are refused when the config loads.

A scenario named ten ``../`` and a folder outside the repository passed `psml config` and
`snakemake -n`, whose dry run then wrote that folder's ``seed0.json``. Every name now matches
the schema's ``$defs.name`` and every path built from names stays under its root.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from psml_core.config import Experiment, effective_config
from psml_core.config.paths import inside
from psml_core.config.schema import name_pattern
from psml_core.errors import ConfigError
from psml_core.run_resolver import find_cell, workflow_files

REPO = Path(__file__).resolve().parents[3]
HANG_S = 5  # every refusal here takes about a second; past this it hangs
WORKFLOW_HANG_S = 30  # Snakemake's own start takes 2-4 s on 2 cores; the bombs ran past 120 s
EVIL = "../" * 10 + "psml-hostile-outside"


def _one_line(err: str, *names: str) -> None:
    """A refusal: one line, no traceback, naming each of ``names``."""
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    for name in names:
        assert name in err, err


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


BAD_NAMES = [
    ({"scenarios": {EVIL: {"bandwidth_gbps": 1}}}, "'scenarios'"),
    ({"workloads": {"../../etc": {"dataset": "digits", "model": "mlp", "batch_size": 8,
                                  "lr": 0.1, "iterations": 2}}}, "'workloads'"),
    ({"datasets": {"/abs": {"source": "digits"}}}, "'datasets'"),
    ({"experiments": {"a/b": {"methods": ["dense_bsp"]}}}, "'experiments'"),
    ({"methods": ["dense_bsp", "../x"]}, "'methods[1]'"),
    ({"experiments": {"e": {"methods": ["..\\x"]}}}, "'experiments.e.methods[0]'"),
    ({"experiments": {"e": {"methods": ["dense_bsp"], "scenarios": [".hidden"]}}},
     "'experiments.e.scenarios[0]'"),
    ({"workloads": {"digits_mlp": {"dataset": "../../etc"}}}, "'workloads.digits_mlp.dataset'"),
    ({"workloads": {"digits_mlp": {"cost_profile": "../cpu-core"}}},
     "'workloads.digits_mlp.cost_profile'"),
    ({"experiments": {"e": {"methods": ["dense_bsp"], "scenario_sweep": {
        "base": "../x", "params": ["bandwidth_gbps"], "values": [1]}}}},
     "'experiments.e.scenario_sweep.base'"),
]  # fmt: skip


@pytest.mark.timeout(HANG_S)
@pytest.mark.parametrize(("override", "key"), BAD_NAMES)
def test_a_name_that_is_a_path_is_refused_in_one_line_naming_the_key(override, key) -> None:
    with pytest.raises(ConfigError) as info:
        effective_config({"tier": "smoke", **override}, REPO / "config")
    _one_line(str(info.value), key, "is not a valid name")


def test_names_with_dots_dashes_and_digits_still_pass() -> None:
    cfg = effective_config(
        {"tier": "smoke", "scenarios": {"fast-1.5g": {"bandwidth_gbps": 1.5}}}, REPO / "config"
    )
    assert "fast-1.5g" in cfg["scenarios"]
    assert name_pattern().startswith("^") and "/" not in name_pattern()


def test_inside_refuses_a_path_that_leaves_its_root(tmp_path: Path) -> None:
    inside(["results/smoke/runs/w/m/s/seed0", "a/../b", "."], tmp_path)
    for bad in ("../x", "results/../../x", "/etc/passwd", f"results/smoke/{EVIL}"):
        with pytest.raises(ConfigError, match="leaves") as info:
            inside(["ok", bad], tmp_path, what="run directory")
        _one_line(str(info.value), repr(bad), "run directory")


def test_inside_checks_words_not_links(tmp_path: Path) -> None:
    """results/ may be a link to another disk (a worktree's is): the user's choice, allowed."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "results").symlink_to(tmp_path / "elsewhere")
    inside(["results/smoke/x.json"], tmp_path / "root")


def test_a_run_whose_names_leave_the_results_is_refused_by_psml_train(smoke: Experiment) -> None:
    """`psml train`'s paths (run_resolver.workflow_files) for a spec with unchecked names."""
    w, m, s, seed = smoke.grid()[0]
    spec = smoke.run(w, m, s, seed)
    bad = dataclasses.replace(spec, run_id=f"{EVIL}/{m}/{s}/seed{seed}")
    with pytest.raises(ConfigError) as info:
        workflow_files(smoke, bad)
    _one_line(str(info.value), "leaves", "psml-hostile-outside")
    # By name (`psml train --workload ...`, `psml show`): only the tier's names are cells.
    with pytest.raises(ConfigError) as info:
        find_cell(smoke, EVIL, m, s, seed)
    _one_line(str(info.value), "psml-hostile-outside")


def test_psml_config_refuses_a_traversing_scenario(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "c.yaml").write_text(f"tier: smoke\nscenarios:\n  {EVIL}:\n    bandwidth_gbps: 1\n")
    before = _files(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "psml_core", "config", "--configfile", "c.yaml",
         "--config-dir", str(REPO / "config")],
        cwd=work, capture_output=True, text=True, timeout=HANG_S,
    )  # fmt: skip
    assert proc.returncode != 0
    _one_line(proc.stderr, "'scenarios'", "is not a valid name")
    assert _files(tmp_path) == before


def test_the_workflow_refuses_it_and_writes_nothing(tmp_path: Path) -> None:
    """`snakemake -n` (the workflow's own config check, in common.smk) in a copy of the repo."""
    repo = tmp_path / "a" / "b" / "repo"
    for part in ("workflow", "config"):
        shutil.copytree(REPO / part, repo / part)
    (tmp_path / "c.yaml").write_text(f"tier: smoke\nscenarios:\n  {EVIL}:\n    bandwidth_gbps: 1\n")
    before = _files(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile",
         str(tmp_path / "c.yaml")],
        cwd=repo, capture_output=True, text=True, timeout=WORKFLOW_HANG_S,
        # This checkout's psml_core, and its `psml` on PATH (the Snakefile asks for it).
        env={
            **os.environ,
            "PYTHONPATH": str(REPO),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        },
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in out
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "'scenarios'" in errors[0], out
    assert _files(tmp_path) - before <= {p for p in _files(tmp_path) if repo in p.parents}
    # Ten ../ from results/smoke/specs/runs/<w>/<m>/ in tmp/a/b/repo land beside tmp_path.
    assert not (tmp_path.parent / "psml-hostile-outside").exists()
