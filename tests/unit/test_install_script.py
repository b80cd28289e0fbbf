"""scripts/install.sh picks the torch build that fits the machine (dry runs, fake nvidia-smi).

The CPU path also runs for real in CI: `.ci/run` is the README's test command, which installs
through this script on a machine without a GPU
(tests/workflow/test_workflow_static.py checks that both README commands use it).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "install.sh"
CPU = "--index-url https://download.pytorch.org/whl/cpu"


def _run(tmp_path: Path, *args: str, gpu: bool | None, **env: str) -> subprocess.CompletedProcess:
    """The script with a fake nvidia-smi first on PATH (None: one that fails)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "nvidia-smi"
    lines = "echo 'GPU 0: NVIDIA H100 (UUID: GPU-0)'" if gpu else "exit 9"
    fake.write_text(f"#!/bin/sh\n{lines}\n")
    fake.chmod(0o755)
    full = {k: v for k, v in os.environ.items() if k != "PSML_TORCH"}
    full.update(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **env)
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, env=full, timeout=60
    )


def test_no_gpu_installs_the_cpu_build_first(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--dry-run", "test", gpu=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "torch build 'cpu'" in lines[0]
    assert lines[1] == f"+ python3 -m pip install torch==2.13.* {CPU}"
    assert lines[2] == "+ python3 -m pip install -e .[test]"


def test_a_gpu_keeps_pips_default_cuda_build(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--dry-run", gpu=True)
    assert proc.returncode == 0, proc.stderr
    assert "torch build 'cuda'" in proc.stdout
    assert CPU not in proc.stdout
    assert proc.stdout.splitlines()[-1] == "+ python3 -m pip install -e ."


@pytest.mark.parametrize(("value", "cpu"), [("cpu", True), ("cuda", False)])
def test_psml_torch_overrides_the_detection(tmp_path: Path, value: str, cpu: bool) -> None:
    proc = _run(tmp_path, "--dry-run", gpu=cpu, PSML_TORCH=value)  # the opposite machine
    assert proc.returncode == 0, proc.stderr
    assert (CPU in proc.stdout) is cpu


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    bad = _run(tmp_path, "--dry-run", gpu=False, PSML_TORCH="rocm")
    assert bad.returncode == 2
    assert bad.stderr.strip() == "error: PSML_TORCH='rocm': expected cpu or cuda"
    opt = _run(tmp_path, "--frobnicate", gpu=False)
    assert opt.returncode == 2 and len(opt.stderr.strip().splitlines()) == 1


def test_help_prints_the_header_comment_only(tmp_path: Path) -> None:
    """--help printed the line after the comment too (`set -euo pipefail`)."""
    proc = _run(tmp_path, "--help", gpu=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Install psml-core")
    assert "set -euo" not in proc.stdout
    assert proc.stdout.rstrip().endswith("PSML_TORCH=cuda overrides the detection.")
