"""The rules' environments: workflow/envs/psml.yaml pins each dependency; the workflow derives a
CPU and a CUDA environment from it that install psml-core from where the workflow came."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
ENVS = REPO / "workflow" / "envs"


def _pip() -> list[str]:
    env = yaml.safe_load((ENVS / "psml.yaml").read_text(encoding="utf-8"))
    return next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))


def _lock() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in _pip():
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==([A-Za-z0-9.!+_-]+)", line)
        assert m, f"psml.yaml: not a name==version pin: {line!r}"
        name = canonicalize_name(m.group(1))
        assert name not in pins, f"psml.yaml pins {name} twice"
        pins[name] = m.group(2)
    assert list(pins) == sorted(pins)
    return pins


def test_every_runtime_dependency_is_pinned_within_its_range() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = _lock()
    for text in project["dependencies"]:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} (pyproject.toml) is not pinned in psml.yaml"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"psml.yaml pins {name}=={pins[name]}, outside pyproject.toml's {req}; "
            "regenerate it: python scripts/lock_env.py > workflow/envs/psml.yaml"
        )
    assert "+" not in pins["torch"]  # no local build label: the CPU or the CUDA build


def test_the_lock_names_no_psml_core_and_no_side_files() -> None:
    """A relative `-e ../..` resolved against the working directory or --conda-prefix, so
    conda worked from the checkout only; the derived environments name the source instead."""
    env = yaml.safe_load((ENVS / "psml.yaml").read_text(encoding="utf-8"))
    assert not any(line.startswith("-") or "psml" in line for line in _pip())
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python"))
    assert python == "python=3.11"
    assert not list(ENVS.glob("*.txt"))  # Snakemake copies only the env file: no side files


def test_the_main_install_can_write_snakemakes_html_report() -> None:
    """`snakemake --report` needs pygments; without the test extra only psml-core's own
    requirements bring it (snakemake[reports]), and the lock follows that extra."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("lock_env", REPO / "scripts" / "lock_env.py")
    assert spec and spec.loader
    lock_env = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("lock_env", lock_env)
    spec.loader.exec_module(lock_env)
    assert "pygments" in lock_env.closure()
    assert "pygments" in _lock()
