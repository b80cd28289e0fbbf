"""Helpers for the workflow tests: a copy of the workflow, and the snakemake command line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WORKFLOW_PARTS = ("workflow", "config", "profiles")


def copy_workflow(dest: Path) -> Path:
    """Copy what a user checks out to run the workflow (no results, no data)."""
    dest.mkdir(parents=True, exist_ok=True)
    for part in WORKFLOW_PARTS:
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, dest / part)
        else:
            shutil.copy2(src, dest / part)
    return dest


def env_with_venv() -> dict[str, str]:
    """The environment with this interpreter's bin/ first, so rules find `psml`."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def snakemake_cli(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the snakemake command line (profiles are read by the CLI only)."""
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env_with_venv(),
        timeout=timeout,
    )
