"""``psml bench calibrate --torch-device cuda``: a GPU device file measured on the local GPU.

What is measured on the GPU, and what is not:

* **Compute** (measured): ``Model.loss_grad`` with the model on the GPU, as the engine runs it
  with ``device: cuda`` (parameters copied in, gradient copied back to the host), for PF's MNIST
  MLP, the 1M-parameter CNN and a ResNet-18 (CIFAR variant) at a few batch sizes; ``time =
  overhead + flops / rate`` fitted as for the CPU profile.
* **Memory** (measured): a device-to-device copy of n float32 at each calibrated size (the GPU's
  memcpy reference) and its per-call cost, fitted as ``call + n * per_element``.
* **Codec costs** (estimated, and labelled so): psml's codecs are NumPy code that runs on the
  host; there are no GPU codec kernels to time. The table is the measured CPU table
  (``--from``, default ``cpu-core.yaml``) scaled point by point as
  :func:`~psml_core.bench.gpu_estimate.estimate_gpu` scales it, but with this GPU's *measured*
  memcpy rate and call cost in place of datasheet figures.
* **Checks** (measured, provenance only): ``torch.topk`` and a threshold compaction on the GPU at
  ratio 0.01, so a reader can see how far the estimated top-k and threshold encodes are from a
  real GPU selection kernel. The cost model does not read them.

Every measurement synchronises the device around the timed calls. ``force_cpu`` runs the same
code on the CPU's torch device, for tests on machines without a GPU; its file says so.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from psml_core.bench.gpu_estimate import scaled_table
from psml_core.bench.timing import fit_linear, median_time, round_sig, set_threads
from psml_core.config import WorkloadSpec
from psml_core.errors import ConfigError
from psml_core.models import make_model

__all__ = ["GpuCalibration", "calibrate_gpu", "torch_device_for"]

CHECK_RATIO = 0.01
"""Density of the top-k and threshold spot checks."""

# (label, model, hidden, features, classes, batches): the gradient computations timed.
_POINTS: tuple[tuple[str, str, tuple[int, ...], int, tuple[int, ...]], ...] = (
    ("mlp 784-128-64-10", "mlp", (128, 64), 784, (32, 256)),
    ("cnn 16-32-640", "cnn", (16, 32, 640), 784, (32, 256)),
    ("resnet18", "resnet18", (64,), 3072, (8, 32)),
)
_QUICK_POINTS = (("mlp 784-128-64-10", "mlp", (128, 64), 784, (4, 1024)),)


@dataclass
class GpuCalibration:
    """The inputs of a GPU device file.

    Attributes:
        device: The profile's name.
        command: The command that produced it (recorded in the source).
        cpu: The measured CPU device file's content whose codec table is scaled.
        cpu_file: That file's name.
        repeats: Timed runs per point.
        quick: Tiny settings (tests only).
        force_cpu: Run on the CPU's torch device (tests only; the file says so).
        min_time: Loop calls up to this many seconds per timed run.
        note: Extra words for the source detail.
    """

    device: str
    command: str
    cpu: dict[str, Any]
    cpu_file: str
    repeats: int = 5
    quick: bool = False
    force_cpu: bool = False
    min_time: float = 2e-3
    note: str = ""
    log: Callable[[str], None] | None = field(default=None, repr=False)


def torch_device_for(force_cpu: bool) -> torch.device:
    """The CUDA device to measure (``cuda:0``), or the CPU when forced.

    Raises:
        ConfigError: No CUDA device is visible and the CPU is not forced.
    """
    if force_cpu:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ConfigError(
            "--torch-device cuda: torch sees no CUDA device (torch.cuda.is_available() is False); "
            "run it on the GPU machine with a CUDA build of torch (scripts/install.sh), or add "
            "--force-cpu to try the path on the CPU (tests only)"
        )
    return torch.device("cuda:0")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(device: torch.device, fn: Callable[[], Any], repeats: int, min_time: float) -> float:
    """Seconds per call of ``fn`` on ``device``, synchronised after each call."""

    def call() -> None:
        fn()
        _sync(device)

    return median_time(call, repeats, min_time)


def _compute(cal: GpuCalibration, device: torch.device) -> dict[str, Any]:
    """Fit ``overhead + flops / rate`` to ``loss_grad`` timings on ``device``."""
    rng = np.random.default_rng(0)
    pts = []
    for label, name, hidden, features, batches in _QUICK_POINTS if cal.quick else _POINTS:
        wl = WorkloadSpec("cal", "cal", name, batches[0], 0.1, 1, hidden=hidden)
        model = make_model(wl, features, 10).to(device)
        params = model.init_params(0)
        for b in batches:
            X = rng.random((b, features), dtype=np.float32)
            y = rng.integers(0, 10, b)
            step = lambda m=model, X=X, y=y, p=params: m.loss_grad(p, X, y)  # noqa: E731
            t = _timed(device, step, cal.repeats, cal.min_time)
            pts.append((f"{label} batch {b}", float(model.flops(X)), t))
            if cal.log:
                cal.log(f"compute: {label} batch {b}: {t * 1e3:.3f} ms")
    a, b, err = fit_linear([p[1] for p in pts], [p[2] for p in pts])
    if b <= 0:
        raise ConfigError("the GPU compute calibration found no time per FLOP; re-run it idle")
    return {
        "flops_per_s": round_sig(1.0 / b),
        "overhead_s": round_sig(a),
        "fit": {
            "points": [
                {
                    "what": w,
                    "flops": round_sig(f),
                    "measured_s": round_sig(t),
                    "predicted_s": round_sig(a + f * b),
                }
                for w, f, t in pts
            ],
            "max_relative_error": round_sig(err, 3),
        },
    }


def _memory(cal: GpuCalibration, device: torch.device, sizes: list[int]) -> dict[str, Any]:
    """Device-to-device copies and the spot-check kernels at each calibrated size."""
    copy, topk, thresh = [], [], []
    for n in sizes:
        src = torch.randn(n, device=device)
        dst = torch.empty_like(src)
        k = max(1, int(CHECK_RATIO * n))
        cut = float(torch.quantile(src[: min(n, 1 << 24)].abs().float().cpu(), 1 - CHECK_RATIO))
        ops = {
            "copy": lambda s=src, d=dst: d.copy_(s),
            "topk": lambda s=src, k=k: torch.topk(s.abs(), k),
            "threshold": lambda s=src, c=cut: torch.nonzero(s.abs() >= c),
        }
        for out, op in zip((copy, topk, thresh), ops.values(), strict=True):
            out.append(_timed(device, op, cal.repeats, cal.min_time))
        if cal.log:
            cal.log(f"memory: n={n}: copy {copy[-1] * 1e6:.1f} us, topk {topk[-1] * 1e6:.1f} us")
    call_s, per_elem, err = fit_linear([float(n) for n in sizes], copy)
    return {
        "call_s": call_s,
        "per_elem_s": per_elem,
        "fit_error": err,
        "copy": copy,
        "topk": topk,
        "threshold": thresh,
    }


def _device_name(device: torch.device) -> str:
    if device.type != "cuda":
        return "CPU torch device (FORCED with --force-cpu: tests only, not a GPU)"
    props = torch.cuda.get_device_properties(device)
    return (
        f"{props.name} ({props.total_memory / 2**30:.0f} GiB), CUDA {torch.version.cuda}, "
        f"torch {torch.__version__}"
    )


def _some_sizes(cpu: dict[str, Any], picks: tuple[int, ...]) -> dict[str, Any]:
    """The CPU file's content cut to the calibrated sizes at ``picks`` (quick runs).

    A quick run takes the smallest size and one of about 2^18 elements: between the two
    smallest (1,024 and 4,096) a copy's time is all overhead, and noise can make the fitted
    time per element negative.
    """

    def take(v: list[Any]) -> list[Any]:
        return [v[i] for i in picks if i < len(v)]

    def cut(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                key: (take(v) if key in ("times", "sizes") and isinstance(v, list) else cut(v))
                for key, v in node.items()
            }
        if isinstance(node, list):
            return [cut(v) for v in node]
        return node

    return cut(cpu)


def calibrate_gpu(cal: GpuCalibration) -> dict[str, Any]:
    """Measure the local GPU: the content of a device file (see the module docstring)."""
    device = torch_device_for(cal.force_cpu)
    cpu = _some_sizes(cal.cpu, (0, 3)) if cal.quick else cal.cpu
    sizes = [int(n) for n in cpu["codec_costs"]["calibration"]["sizes"]]
    restore = set_threads(1)
    try:
        compute = _compute(cal, device)
        mem = _memory(cal, device, sizes)
    finally:
        restore()
    if mem["per_elem_s"] <= 0:
        raise ConfigError("the GPU memcpy calibration found no time per element; re-run it idle")
    table = scaled_table(cpu, cal.cpu_file, mem["per_elem_s"], mem["call_s"], mem["call_s"])
    # The reference is what was measured here, not the fit.
    table["reference"] = {"times": [max(round_sig(t), 1e-12) for t in mem["copy"]]}
    table["checks"] = {
        "ratio": CHECK_RATIO,
        "topk_encode": {"times": [round_sig(t) for t in mem["topk"]]},
        "threshold_encode": {"times": [round_sig(t) for t in mem["threshold"]]},
    }
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    name = _device_name(device)
    where = f"device: {name}; command: `{cal.command}`; date: {today}"
    forced = "; FORCED onto the CPU: tests only" if cal.force_cpu else ""
    quick = "; QUICK settings: tests only" if cal.quick else ""
    note = f"; {cal.note}" if cal.note else ""
    gbps = 8.0 / mem["per_elem_s"] / 1e9
    return {
        "description": f"{cal.device}: measured on {name.split(' (')[0]}{forced}",
        "compute": {
            "flops_per_s": compute["flops_per_s"],
            "overhead_s": compute["overhead_s"],
            "source": {
                "kind": "measured",
                "detail": (
                    f"{where}; median of {cal.repeats} after a warm-up of Model.loss_grad with the "
                    f"model on the device (parameters in, gradient back to the host, as the "
                    f"engine runs device: cuda): "
                    + ", ".join(p["what"] for p in compute["fit"]["points"])
                    + f"; fit time = overhead_s + Model.flops / flops_per_s{note}{forced}{quick}"
                ),
            },
            "fit": compute["fit"],
        },
        "codec_costs": {
            "source": {
                "kind": "estimated",
                "detail": (
                    f"[estimate] psml's codecs are host (NumPy) code, with no GPU kernels to "
                    f"time: scaled point by point from the measured CPU table of {cal.cpu_file} "
                    f"by this GPU's MEASURED device-to-device memcpy ({gbps:.4g} GB/s read + "
                    f"write, {mem['call_s'] * 1e6:.3g} us per call, fit error "
                    f"{mem['fit_error']:.0%}; {where}): each operation keeps its time relative "
                    f"to a memcpy of the same vector on that CPU. codec_costs.checks holds "
                    f"measured torch.topk and threshold-compaction times on this device at "
                    f"ratio {CHECK_RATIO} for comparison; the cost model does not read them"
                    f"{note}{forced}{quick}"
                ),
            },
            **table,
        },
    }
