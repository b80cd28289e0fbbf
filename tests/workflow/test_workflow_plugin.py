"""A method from outside the tree: docs/extending.md's plugin package, installed with pip, runs
in a smoke experiment beside DFS, and the report names it.

The package is built from the guide's files by pip with the environment's own setuptools (no
network: --no-build-isolation, --no-deps) into a folder of its own, which the workflow's
processes get on PYTHONPATH: what `pip install ./psml-firstk` gives a user, without changing the
test environment. The run follows the guide: the config stops on the missing cost table with
the calibration command, the command is run (with --quick, so that the test stays short), and
the workflow runs the experiment, judges the plugin's claim and writes the report.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from pypdf import PdfReader
from wf_helpers import REPO, copy_workflow, env_with_venv

pytestmark = pytest.mark.slow

GUIDE = REPO / "docs" / "extending.md"
CONFIG = {
    "tier": "smoke",
    # The smoke tier cut to one experiment: the plugin's recipe beside DFS (its claim's
    # baseline, dense_bsp, joins by itself); the five papers' claims are NOT RUN.
    "experiments": {
        **dict.fromkeys(("overview", "jpdc", "dfs", "ratatouille", "pf_theta", "dc2", "pcp")),
        "firstk": {
            "paper": "firstk",
            "methods": ["first_half", "dfs"],
            "workloads": ["digits_mlp"],
            "scenarios": ["dc_10g"],
        },
    },
    "workloads": {"digits_mlp": {"iterations": 10}},
}


def _env(site: Path) -> dict[str, str]:
    env = env_with_venv()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 600):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    tmp = tmp_path_factory.mktemp("plugin")
    files = re.findall(r"```\w+ (psml-firstk/\S+)\n(.*?)```", GUIDE.read_text(), re.S)
    for rel, body in files:
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_text(body)
    site = tmp / "site"
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation"]
    proc = _run(
        [*pip, "--no-index", "--target", str(site), str(tmp / "psml-firstk")],
        tmp,
        {
            **os.environ,
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        },
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    wf = copy_workflow(tmp / "wf")
    (wf / "config" / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    env = _env(site)
    snakemake = [sys.executable, "-m", "snakemake"]
    out: dict[str, object] = {"wf": wf, "env": env}
    out["dry"] = _run([*snakemake, "-n"], wf, env)
    calibrate = ["psml", "bench", "calibrate", "--plugin", "first_k", "--quick"]
    out["calibrate"] = _run(calibrate, wf, env)
    out["config"] = _run(["psml", "config"], wf, env)
    out["run"] = _run([*snakemake, "--cores", "2"], wf, env, timeout=900)
    return out


def test_the_missing_cost_table_stops_the_config_with_the_command(deployed) -> None:
    dry = deployed["dry"]
    assert dry.returncode != 0
    errors = [ln for ln in dry.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, dry.stderr
    assert "codec 'first_k' (method 'first_half', plugin psml-firstk 0.1.0)" in errors[0]
    assert "`psml bench calibrate --plugin first_k`" in errors[0]
    assert "Traceback" not in dry.stderr


def test_psml_config_lists_the_plugin(deployed) -> None:
    assert deployed["calibrate"].returncode == 0, deployed["calibrate"].stderr
    cfg = deployed["config"]
    assert cfg.returncode == 0, cfg.stderr
    head = cfg.stdout.splitlines()[:2]
    assert head[0] == "# plugins: 1"
    assert head[1].startswith("#   psml-firstk 0.1.0 (codecs: first_k; recipes: first_half")
    assert "papers: firstk" in head[1]


def test_the_plugins_recipe_runs_beside_the_papers_methods(deployed) -> None:
    run, wf = deployed["run"], deployed["wf"]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    runs = pd.read_csv(wf / "results" / "smoke" / "runs.csv")
    assert set(runs["method"]) == {"first_half", "dfs", "dense_bsp"}
    summary = wf / "results" / "smoke" / "runs" / "digits_mlp" / "first_half" / "dc_10g"
    prov = json.loads((summary / "seed0" / "summary.json").read_text())["provenance"]
    assert prov["versions"]["psml-firstk"] == "0.1.0"
    costs = prov["compute_model"]["codec_costs"]["workers"]["plugin_costs"]["first_k"]
    assert costs["plugin"] == "psml-firstk 0.1.0" and costs["file"].endswith("first_k.yaml")
    claims = pd.read_csv(wf / "results" / "smoke" / "claims.csv")
    mine = claims[claims["claim"] == "firstk_half_up"].iloc[0]
    assert mine["verdict"] not in ("NOT RUN", "NOT COMPARABLE (regime)"), mine["verdict"]
    pdf = wf / "reports" / "smoke" / "report.pdf"
    text = " ".join(" ".join(p.extract_text().split()) for p in PdfReader(pdf).pages)
    assert "plugin: psml-firstk 0.1.0" in text
