"""Provenance: git commit, package versions, host facts; stamped into summaries and the report."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from functools import cache
from pathlib import Path

__all__ = ["PACKAGES", "PLUGIN_GROUPS", "git_state", "versions"]

PACKAGES = (
    "psml-core",
    "torch",
    "numpy",
    "scipy",
    "pandas",
    "pyarrow",
    "simpy",
    "scikit-learn",
    "pymetis",
    "matplotlib",
    "seaborn",
    "typst",
    "snakemake",
    "jsonschema",
)

_REPO = Path(__file__).resolve().parent.parent


@cache
def git_state(repo: str | None = None) -> tuple[str, bool | None]:
    """Return (commit, dirty) of the repository holding psml_core; ("unknown", None) outside git."""
    cwd = repo or str(_REPO)
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown", None
    return commit, bool(status.strip())


PLUGIN_GROUPS = (
    "psml.codecs",
    "psml.sync",
    "psml.controllers",
    "psml.placements",
    "psml.recipes",
    "psml.backends",
)
"""The entry-point groups of plugin packages (:mod:`psml_core.plugins`)."""


@cache
def versions() -> dict[str, str]:
    """Versions of Python, of the packages that shape results and of installed psml plugins."""
    out = {"python": platform.python_version()}
    for pkg in PACKAGES:
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    for group in PLUGIN_GROUPS:
        for ep in importlib.metadata.entry_points(group=group):
            if ep.dist is not None:
                out.setdefault(ep.dist.name, ep.dist.version)
    return out
