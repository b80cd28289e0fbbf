"""Deploying the workflow: `psml deploy`, and the rules' environments from a deployed copy."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from snakemake.sourcecache import GithubFile, GitlabFile

from psml_core.cli import main
from psml_core.deploy import (
    TORCH_CPU_INDEX,
    psml_core_requirement,
    rules_env_text,
    torch_flavour,
    write_rules_envs,
)
from psml_core.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
LOCK = (REPO / "workflow" / "envs" / "psml.yaml").read_text(encoding="utf-8")


def _pip(text: str) -> list[str]:
    env = yaml.safe_load(text)
    return next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))


def test_psml_core_comes_from_where_the_workflow_came(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # not the checkout: the line must not depend on the cwd
    assert psml_core_requirement(REPO / "workflow" / "rules") == f"-e {REPO}"
    hosted = GithubFile(repo="someone/psml", path="workflow/rules", tag="v0.1.0")
    assert psml_core_requirement(hosted) == (
        "psml-core @ git+https://github.com/someone/psml.git@v0.1.0"
    )
    sha = "0123456789abcdef0123456789abcdef01234567"
    lab = GitlabFile(repo="group/psml", path="workflow/rules", commit=sha, host="gitlab.example")
    assert (
        psml_core_requirement(lab) == f"psml-core @ git+https://gitlab.example/group/psml.git@{sha}"
    )
    unpinned = SimpleNamespace(repo="someone/psml", host="github.com", tag=None, commit=None)
    with pytest.raises(ConfigError, match="without tag=, commit= or branch=; pin a version"):
        psml_core_requirement(SimpleNamespace(**vars(unpinned), branch=None))
    with pytest.raises(ConfigError, match="not a psml checkout"):
        psml_core_requirement(tmp_path / "workflow" / "rules")


def test_the_cpu_and_cuda_environments_keep_the_lock_and_choose_torch(tmp_path) -> None:
    lock = _pip(LOCK)
    torch = next(p for p in lock if p.startswith("torch=="))
    cpu = _pip(rules_env_text(LOCK, "cpu", "-e /x"))
    cuda = _pip(rules_env_text(LOCK, "cuda", "-e /x"))
    assert cpu[0] == f"--extra-index-url {TORCH_CPU_INDEX}" and f"{torch}+cpu" in cpu
    assert torch in cuda and not any(p.startswith("--") for p in cuda)
    assert cpu[-1] == cuda[-1] == "-e /x"
    assert [p for p in cuda[:-1]] == lock
    envs = write_rules_envs(LOCK, "-e /x", tmp_path / "envs")
    again = write_rules_envs(LOCK, "-e /x", tmp_path / "envs")
    other = write_rules_envs(LOCK, "-e /y", tmp_path / "envs")
    assert envs == again and envs["cpu"] != other["cpu"]  # one file per distinct deployment
    assert _pip(envs["cuda"].read_text())[-1] == "-e /x"


def test_the_torch_build_follows_the_device_or_psml_torch() -> None:
    assert torch_flavour("cpu", {}) == "cpu"
    assert torch_flavour("auto", {}) == torch_flavour("cuda", {}) == "cuda"
    assert torch_flavour("cpu", {"PSML_TORCH": "cuda"}) == "cuda"
    with pytest.raises(ConfigError, match="PSML_TORCH='rocm': expected cpu or cuda"):
        torch_flavour("cpu", {"PSML_TORCH": "rocm"})


def test_psml_deploy_writes_a_module_whose_path_resolves(tmp_path, capsys) -> None:
    """snakedeploy from a local path writes snakefile: "workflow/Snakefile", which resolves
    against the deployment's own workflow/ and so names nothing."""
    dest = tmp_path / "study"
    assert main(["deploy", str(dest), "--checkout", str(REPO)]) == 0
    text = (dest / "workflow" / "Snakefile").read_text()
    assert f'"{REPO / "workflow" / "Snakefile"}"' in text and "use rule * from psml" in text
    assert (dest / "config" / "methods.yaml").is_file() and (dest / "profiles" / "slurm").is_dir()
    assert main(["deploy", str(dest), "--checkout", str(REPO)]) == 2
    assert "exists already; give --force" in capsys.readouterr().err


def test_the_readmes_deployment_line_pins_the_packages_version() -> None:
    """The github("...") line was a placeholder with no version to pin."""
    import re
    import tomllib

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    readme = (REPO / "README.md").read_text()
    (line,) = re.findall(
        r'snakefile: github\("[^"]+", path="workflow/Snakefile", tag="([^"]+)"\)', readme
    )
    assert line == f"v{version}"
    assert f"deploy-workflow https://github.com/<owner>/psml my-study --tag v{version}" in readme
