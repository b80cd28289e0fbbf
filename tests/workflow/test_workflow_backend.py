"""A backend from outside the tree: docs/extending.md's toy backend, installed with pip, runs
the smoke tier's dense_bsp through snakemake, with no file of psml_core edited.

The package is built from the guide's files by pip (no network: --no-build-isolation,
--no-deps) into a folder of the test's own, which the workflow's processes get on PYTHONPATH:
what `pip install ./psml-toy` gives a user. The tier is cut to one run, dense_bsp on
digits_mlp, with `backend: toy`; the workflow prepares, places and trains it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from wf_helpers import REPO, copy_workflow, env_with_venv

pytestmark = pytest.mark.slow

GUIDE = REPO / "docs" / "extending.md"
RUN = Path("results", "smoke", "runs", "digits_mlp", "dense_bsp", "dc_10g", "seed0")
CONFIG = {
    "tier": "smoke",
    "backend": "toy",
    # One experiment of one run; the papers' experiments (and their claims) left out.
    "experiments": {
        **dict.fromkeys(("overview", "jpdc", "dfs", "ratatouille", "pf_theta", "dc2", "pcp")),
        "toy": {"methods": ["dense_bsp"], "workloads": ["digits_mlp"], "scenarios": ["dc_10g"]},
    },
    "workloads": {"digits_mlp": {"iterations": 10}},
}


def psml_core_digest() -> str:
    """SHA-256 over every file of psml_core (names and bytes)."""
    h = hashlib.sha256()
    for path in sorted((REPO / "psml_core").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            h.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_the_toy_backend_runs_dense_bsp_through_the_workflow(tmp_path: Path) -> None:
    before = psml_core_digest()
    for rel, body in re.findall(r"```\w+ (psml-toy/\S+)\n(.*?)```", GUIDE.read_text(), re.S):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(body)
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation"]
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    proc = _run(
        [*pip, "--no-index", "--target", str(site), str(tmp_path / "psml-toy")], tmp_path, env
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    wf = copy_workflow(tmp_path / "wf")
    (wf / "config" / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    env = env_with_venv()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    target = str(RUN / "summary.json")
    run = _run([sys.executable, "-m", "snakemake", "--cores", "2", target], wf, env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = json.loads((wf / RUN / "summary.json").read_text())
    assert (summary["backend"], summary["clock"]) == ("toy", "wall-clock")
    assert summary["provenance"]["versions"]["psml-toy"] == "0.1.0"
    metrics = pd.read_parquet(wf / RUN / "metrics.parquet")
    assert len(metrics) == 10 * summary["workers"] and set(metrics["clock"]) == {"wall-clock"}
    assert metrics["bytes_up"].gt(0).all()
    assert psml_core_digest() == before  # the toy lives in tmp_path: psml_core is untouched
