"""Where a run's tensors live (``device: cpu | cuda | auto``) and what it ran on.

The simulated clock never depends on this: it comes from the device profile
(``compute.cost_profile``). This is where the real gradients are computed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from typing import Any

import torch

from psml_core.errors import ConfigError

__all__ = ["DEVICES", "device_provenance", "rank_device", "resolve_device"]

DEVICES = ("cpu", "cuda", "auto")


def resolve_device(name: str) -> torch.device:
    """The torch device for the ``device`` setting.

    ``auto`` is the first GPU where torch sees one, else the CPU; ``cuda`` without a GPU is an
    error that says so.

    Raises:
        ConfigError: An unknown name, or ``cuda`` where torch finds no GPU.
    """
    if name not in DEVICES:
        raise ConfigError(f"device: {name!r} is not one of {list(DEVICES)}")
    if name == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        if name == "auto":
            if torch.version.cuda is None and _gpu_listed():
                print(f"psml: warning: device auto runs on the CPU: {_CPU_BUILD}", file=sys.stderr)
            return torch.device("cpu")
        if torch.version.cuda is None:
            raise ConfigError(f"device: cuda, but {_CPU_BUILD}")
        raise ConfigError(
            "device: cuda, but torch finds no GPU here (torch "
            f"{torch.__version__}, CUDA build {torch.version.cuda}); use "
            "--config device=cpu, or device=auto to take a GPU only where there is one"
        )
    return torch.device("cuda", torch.cuda.current_device())


_CPU_BUILD = (
    f"torch {torch.__version__} is the CPU build (scripts/install.sh installs it where "
    "nvidia-smi lists no GPU, e.g. on a login node), which cannot use a GPU; install the CUDA "
    "build in the environment the GPU jobs run in: `PSML_TORCH=cuda bash scripts/install.sh` "
    "(or use --config device=cpu)"
)


def _gpu_listed() -> bool:
    """Whether ``nvidia-smi -L`` lists a GPU on this host (as scripts/install.sh asks)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return False
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return any(line.startswith("GPU") for line in out.splitlines())


def rank_device(name: str, local_rank: int) -> torch.device:
    """The device of one process of a multi-process run (dist, horovod): one GPU per rank.

    A rank takes GPU ``local_rank % n`` of the ``n`` this host's torch sees, so a node with as
    many GPUs as ranks gives each rank its own, and fewer GPUs are shared round-robin (a shared
    GPU is correct, only slower). ``cpu``, and ``auto`` without a GPU, is the CPU.

    Raises:
        ConfigError: As :func:`resolve_device`.
    """
    device = resolve_device(name)
    if device.type != "cuda":
        return device
    return torch.device("cuda", local_rank % torch.cuda.device_count())


def _driver_version() -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None


def device_provenance(device: torch.device) -> dict[str, Any]:
    """What the run computed on: the device, and on a GPU its model, CUDA and driver versions."""
    if device.type != "cuda":
        return {"device": "cpu"}
    props = torch.cuda.get_device_properties(device)
    return {
        "device": str(device),
        "gpu": props.name,
        "gpu_memory_bytes": int(props.total_memory),
        "cuda": torch.version.cuda,
        "driver": _driver_version(),
    }
