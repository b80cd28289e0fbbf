"""The workflow deployed as a Snakemake module into a directory of its own, run on .test/.

This is how snakedeploy deploys a catalog workflow: a Snakefile with a `module` whose
`snakefile:` is this checkout's workflow/Snakefile and whose `config:` is the deployment's own
config/config.yaml (here the repository's .test/ configuration). Nothing of the checkout is
copied, so every path the workflow uses must resolve from the module or the deployment.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pypdf import PdfReader
from wf_helpers import REPO, env_with_venv, snakemake_cli

pytestmark = pytest.mark.slow

DEPLOY_SNAKEFILE = """\
configfile: "config/config.yaml"


module psml:
    snakefile:
        "{snakefile}"
    config:
        config


use rule * from psml
"""


def _deploy(dest: Path) -> Path:
    (dest / "workflow").mkdir(parents=True)
    (dest / "workflow" / "Snakefile").write_text(
        DEPLOY_SNAKEFILE.format(snakefile=REPO / "workflow" / "Snakefile")
    )
    shutil.copytree(REPO / ".test" / "config", dest / "config")
    return dest


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = _deploy(tmp_path_factory.mktemp("deployment"))
    proc = snakemake_cli(["--cores", "2"], dest, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return dest


def test_the_module_runs_the_test_config_to_its_report(deployed: Path) -> None:
    pdf = deployed / "reports" / "smoke" / "report.pdf"
    text = "\n".join(p.extract_text() for p in PdfReader(pdf).pages)
    assert "omnireduce" in text
    # .test keeps only DFS's experiment: the other papers' claims say they were not run.
    assert re.search(r"NOT\s+RUN", text)
    figures = deployed / "reports" / "smoke" / "figures"
    groups = [p.name for p in figures.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert sorted(groups) == ["dfs", "general"]  # .captions/: the HTML report's captions
    assert list((figures / "dfs").glob("*.png"))
    assert not (REPO / ".test" / "results").exists()  # the deployment wrote only its own dir


def test_the_cli_in_a_deployment_sees_the_workflows_runs(deployed: Path) -> None:
    """psml runs applies the Snakefile's config-directory rule (no config/methods.yaml here)."""
    proc = subprocess.run(
        [sys.executable, "-m", "psml_core", "runs"],
        cwd=deployed,
        capture_output=True,
        text=True,
        env=env_with_venv(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    row = next(ln for ln in proc.stdout.splitlines() if ln.startswith("digits_mlp/dfs/slow_100m"))
    assert row.split()[-1] == "yes"  # its results are found where the workflow wrote them


def test_a_deployment_config_dir_with_recipes_is_the_one_read(tmp_path: Path) -> None:
    dest = _deploy(tmp_path / "own")
    shutil.rmtree(dest / "config")
    shutil.copytree(REPO / "config", dest / "config")
    shutil.copy2(REPO / ".test" / "config" / "config.yaml", dest / "config" / "config.yaml")
    methods = yaml.safe_load((dest / "config" / "methods.yaml").read_text())
    del methods["omnireduce"]
    (dest / "config" / "methods.yaml").write_text(yaml.safe_dump(methods))
    proc = snakemake_cli(["-n"], dest)
    assert proc.returncode != 0
    assert "omnireduce" in proc.stderr + proc.stdout
