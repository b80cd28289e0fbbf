"""Deploying the workflow: a deployment directory, and the rules' conda environments.

**A deployment** (``psml deploy DEST``) is a directory of its own that runs this checkout's
workflow as a Snakemake module: ``DEST/workflow/Snakefile`` names the checkout's
``workflow/Snakefile`` by its absolute path, and ``DEST/config/`` and ``DEST/profiles/`` are
copies to edit. ``snakedeploy deploy-workflow`` writes the same layout from a Git host (pin its
``--tag``); from a local path it writes ``snakefile: "workflow/Snakefile"``, relative to the
deployment's own ``workflow/``, which does not resolve.

**The rules' environments** (``snakemake --sdm conda``): ``workflow/envs/psml.yaml`` pins every
runtime dependency (``scripts/lock_env.py``). :func:`rules_env_text` derives two environments
from it: ``cpu`` (torch's CPU build from the PyTorch CPU index, for every rule that does not
compute on a GPU) and ``cuda`` (PyPI's default torch, for training with ``device: cuda`` or
``auto``), each ending in the line that installs psml-core *from where this workflow came*
(:func:`psml_core_requirement`): the checkout's absolute path, editable, for a local workflow or
module; ``git+https://<host>/<owner>/<repo>.git@<tag or commit>`` for a ``github(...)`` or
``gitlab(...)`` module. A relative ``-e ../..`` resolved against Snakemake's working directory
or ``--conda-prefix``, so conda worked only from the checkout itself. The workflow writes the
two files under ``.snakemake/psml/envs/`` (:func:`write_rules_envs`), named by their content, so
that Snakemake builds one environment per distinct deployment.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import yaml

from psml_core.atomic import write_text
from psml_core.errors import ConfigError

__all__ = [
    "ENV_DIR",
    "FLAVOURS",
    "TORCH_CPU_INDEX",
    "cmd_deploy",
    "deploy",
    "deploy_args",
    "psml_core_requirement",
    "rules_env_text",
    "torch_flavour",
    "write_rules_envs",
]

ENV_DIR = Path(".snakemake", "psml", "envs")
"""Where the workflow writes the rules' environments (relative to its working directory)."""
FLAVOURS = ("cpu", "cuda")
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
"""The PyTorch index of CPU-only wheels (scripts/install.sh uses the same)."""

SNAKEFILE = """\
# Deployed with `psml deploy` from {checkout}: this directory runs that checkout's workflow
# as a Snakemake module, with its own config/ (edit config/config.yaml) and profiles/.
configfile: "config/config.yaml"


module psml:
    snakefile:
        "{snakefile}"
    config:
        config


use rule * from psml
"""


def psml_core_requirement(source: Any) -> str:
    """The pip line that installs psml-core as the workflow at ``source`` was deployed.

    Args:
        source: Where the workflow's rule files come from: Snakemake's
            ``workflow.current_basedir`` of ``workflow/rules`` (a local path, or a
            ``github(...)``/``gitlab(...)`` source with a repository and a ref).

    Raises:
        ConfigError: a remote source without a tag, commit or branch to pin.
    """
    repo, host = getattr(source, "repo", None), getattr(source, "host", None)
    if repo and host:  # a Git-hosted module (github(...), gitlab(...))
        ref = source.tag or source.commit or source.branch
        if not ref:
            raise ConfigError(
                f"the workflow comes from {host}/{repo} without tag=, commit= or branch=; "
                "pin a version in the module's github(...) line (README, deployment)"
            )
        return f"psml-core @ git+https://{host}/{repo}.git@{ref}"
    repo_path = getattr(source, "repo_path", None)
    if repo_path:  # a local Git repository at a ref (git_file)
        return f"psml-core @ git+file://{os.path.abspath(repo_path)}@{source.ref}"
    root = Path(os.fspath(source)).resolve().parents[1]  # <checkout>/workflow/rules
    if not (root / "pyproject.toml").is_file():
        raise ConfigError(f"{root} holds no pyproject.toml: not a psml checkout to install")
    return f"-e {root}"


def torch_flavour(device: str, env: dict[str, str] | None = None) -> str:
    """The torch build a job's environment needs.

    ``$PSML_TORCH`` when set, else ``cuda`` for ``device: cuda`` or ``auto`` and ``cpu``
    otherwise.
    """
    forced = (os.environ if env is None else env).get("PSML_TORCH", "").strip()
    if forced:
        if forced not in FLAVOURS:
            raise ConfigError(f"PSML_TORCH={forced!r}: expected cpu or cuda")
        return forced
    return "cuda" if device in ("cuda", "auto") else "cpu"


def rules_env_text(lock: str, flavour: str, requirement: str) -> str:
    """One rules' environment: the lock's pins, the torch build of ``flavour``, then psml-core.

    Args:
        lock: ``workflow/envs/psml.yaml`` (its pip list pins every dependency, torch without a
            build label).
        flavour: ``cpu`` or ``cuda``.
        requirement: The psml-core line (:func:`psml_core_requirement`).
    """
    env = yaml.safe_load(lock)
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    pins = [p for p in pip if not p.startswith("-")]
    if flavour == "cpu":
        # The CPU index first for torch's CPU wheel; PyPI stays the index of everything else.
        pins = [f"{p}+cpu" if p.startswith("torch==") else p for p in pins]
        pins = [f"--extra-index-url {TORCH_CPU_INDEX}", *pins]
    env["dependencies"] = [
        *(d for d in env["dependencies"] if not isinstance(d, dict)),
        {"pip": [*pins, requirement]},
    ]
    head = (
        f"# The rules' {flavour} environment of this deployment, written by the workflow from\n"
        "# workflow/envs/psml.yaml (psml_core/deploy.py); psml-core from where the workflow came.\n"
    )
    return head + yaml.safe_dump(env, sort_keys=False, width=100)


def write_rules_envs(lock: str, requirement: str, dest: Path = ENV_DIR) -> dict[str, Path]:
    """Write both flavours' environments under ``dest`` (once per content); flavour -> file."""
    out = {}
    for flavour in FLAVOURS:
        text = rules_env_text(lock, flavour, requirement)
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        path = (dest / f"psml-{flavour}-{digest}.yaml").resolve()
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            write_text(path, text)
        out[flavour] = path
    return out


def deploy(dest: Path, checkout: Path, force: bool = False) -> list[Path]:
    """Write a deployment of ``checkout``'s workflow into ``dest``; the files written.

    Raises:
        ConfigError: ``checkout`` holds no workflow, or ``dest`` has a deployment already
            (without ``force``).
    """
    snakefile = (checkout / "workflow" / "Snakefile").resolve()
    if not snakefile.is_file():
        raise ConfigError(f"{checkout}: no workflow/Snakefile here; give a psml checkout")
    target = dest / "workflow" / "Snakefile"
    if target.exists() and not force:
        raise ConfigError(f"{target} exists already; give --force to overwrite the deployment")
    written = []
    for part in ("config", "profiles"):
        if (dest / part).exists() and not force:
            continue  # the deployment's own, edited copy stays
        shutil.copytree(checkout / part, dest / part, dirs_exist_ok=True)
        written.append(dest / part)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_text(target, SNAKEFILE.format(checkout=checkout.resolve(), snakefile=snakefile))
    return [target, *written]


def deploy_args(p: argparse.ArgumentParser) -> None:
    """The arguments of ``psml deploy``."""
    p.add_argument("dest", type=Path, help="the deployment's directory (created)")
    p.add_argument(
        "--checkout",
        type=Path,
        default=Path(__file__).resolve().parents[1],
        help="the psml checkout whose workflow runs (default: this psml_core's)",
    )
    p.add_argument("--force", action="store_true", help="overwrite an existing deployment")


def cmd_deploy(args: argparse.Namespace) -> int:
    """``psml deploy DEST``: a directory that runs this checkout's workflow as a module."""
    for path in deploy(args.dest, args.checkout, args.force):
        print(f"wrote {path}")
    print(f"next: edit {args.dest / 'config' / 'config.yaml'}, then `snakemake --cores 2` there")
    return 0
