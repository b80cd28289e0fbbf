"""What every `psml train` process pays before training: no needless imports, torch configured."""

from __future__ import annotations

import subprocess
import sys

import torch

from psml_core.config import ComputeSpec


def test_run_path_imports_neither_sklearn_nor_inductor() -> None:
    """scikit-learn (~1.7 s) and inductor (~1 s) would be paid by each of hundreds of runs."""
    code = (
        "import sys, psml_core.cli, psml_core.engine.training, psml_core.placement\n"
        "from psml_core.engine.training import configure_torch\n"
        "from types import SimpleNamespace\n"
        "configure_torch(SimpleNamespace(compute=SimpleNamespace(threads=1)))\n"
        "print(sorted(m for m in ('sklearn', 'torch._inductor') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_configure_torch_turns_deterministic_algorithms_on() -> None:
    from types import SimpleNamespace

    from psml_core.engine.training import configure_torch

    before = (torch.are_deterministic_algorithms_enabled(), torch.get_num_threads())
    try:
        spec = SimpleNamespace(compute=ComputeSpec(model="profile", threads=1))
        configure_torch(spec)  # type: ignore[arg-type]
        assert torch.are_deterministic_algorithms_enabled()
        assert not torch.is_deterministic_algorithms_warn_only_enabled()
        assert torch.get_num_threads() == 1
    finally:
        torch.use_deterministic_algorithms(before[0])
        torch.set_num_threads(before[1])
