"""``psml bench calibrate``: measure a device profile on this machine and write its device file.

The sim backend charges compute and compression to its clock from ``config/devices/<name>.yaml``
and never times anything at run time. This module produces that file:

* **Codec costs.** Every registered codec's five operations (:data:`~psml_core.devices.device.OPS`:
  the worker's encode, a decode, the server's per-push aggregate, its ``encode_down`` of the
  aggregate and the worker's ``decode_down``) are timed at several sizes and ratios on a
  standard-normal float32 vector, driven as :mod:`psml_core.bench.codecs` drives them (threshold
  codecs get the threshold that keeps the ratio, OmniReduce a vector whose blocks are non-zero
  with probability = ratio, DFS its default dynamic settings, with and without a cost report).
  Each operation's median time at each size is stored as measured (``times``, aligned with
  ``codec_costs.calibration.sizes``; no fit: one line ``a + b n`` cannot follow the cache
  cliff), with the largest relative spread of its repeats (``spread``); the cost model
  interpolates between the points (:class:`~psml_core.devices.device.CostCurve`). A time measured
  as 0 is written as :data:`~psml_core.devices.device.TIME_FLOOR_S`. Wrappers (error feedback,
  momentum correction) are timed around a null inner codec, so what is measured is the
  wrapper's own work; whether the wrapper also decodes the inner payload is observed (a counter
  on the null codec), not assumed. A memcpy of each vector is timed as the yardstick.
* **Compute profile.** ``Model.loss_grad`` of the digits-sized MLP (input 64) at several widths
  and batch sizes and of the sparse logistic regression (RCV1-like rows) is timed and
  ``time = overhead + flops / rate`` fitted (``Model.flops``), again by relative NNLS.

Timing: one thread (torch and the BLAS pools), one warm-up, then the median of ``repeats``
timed runs, each long enough to be above timer noise (calls are looped up to ``min_time``).

:func:`estimate_gpu` derives a GPU device file from a measured CPU table: at each calibrated
size, each operation keeps its time relative to a memcpy of the same vector (measured in the same
calibration), the memcpy moved at the GPU's datasheet HBM bandwidth, plus a stated per-call
launch overhead; the compute block is a cited training throughput (:data:`GPU_SPECS`). GPU files
are therefore regenerated, not typed.
"""

from __future__ import annotations

import datetime
import os
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from psml_core.bench.calibrate_codecs import (
    DEFAULT_RATIOS,
    DEFAULT_SIZES,
    PUSHES,
    SEED,
    calibrate_codecs,
)
from psml_core.bench.device_file import device_yaml, write_device
from psml_core.bench.gpu_estimate import (
    GPU_CALL_OVERHEAD_S,
    GPU_MEMCPY_CALL_S,
    GPU_SPECS,
    estimate_gpu,
)
from psml_core.bench.timing import fit_linear, median_time, round_sig, set_threads
from psml_core.config import WorkloadSpec
from psml_core.devices.device import CostCurve
from psml_core.errors import ConfigError
from psml_core.models import make_model

__all__ = [
    "DEFAULT_RATIOS",
    "DEFAULT_SIZES",
    "GPU_CALL_OVERHEAD_S",
    "GPU_MEMCPY_CALL_S",
    "GPU_SPECS",
    "QUICK",
    "Calibration",
    "calibrate",
    "calibrate_codecs",
    "calibrate_compute",
    "device_yaml",
    "estimate_gpu",
    "format_summary",
    "write_device",
    "machine_description",
]


@dataclass(frozen=True)
class QuickSettings:
    """The ``--quick`` settings: tiny sizes, one repeat (for tests; the numbers mean nothing)."""

    sizes: tuple[int, ...] = (256, 2048)
    ratios: tuple[float, ...] = (0.01, 0.1)
    repeats: int = 1
    min_time: float = 0.0


QUICK = QuickSettings()

# --------------------------------------------------------------------------- compute

MLP_WIDTHS: tuple[tuple[int, ...], ...] = ((64,), (128, 64), (256, 128))
MLP_BATCHES: tuple[int, ...] = (16, 64, 256)
LOGREG_BATCHES: tuple[int, ...] = (64, 256, 1000)
LOGREG_FEATURES = 47_236  # RCV1-v2's feature count
LOGREG_NNZ_PER_ROW = 75  # about RCV1-v2's mean non-zeros per row


def _compute_points(quick: bool) -> list[tuple[str, Any, Any, np.ndarray]]:
    """``(label, model, X, y)`` of every timed gradient computation."""
    rng = np.random.default_rng(SEED)
    out: list[tuple[str, Any, Any, np.ndarray]] = []
    widths = MLP_WIDTHS[:1] if quick else MLP_WIDTHS
    batches = MLP_BATCHES[:1] if quick else MLP_BATCHES
    for hidden in widths:
        wl = WorkloadSpec("cal", "cal", "mlp", batches[0], 0.1, 1, hidden=hidden)
        model = make_model(wl, 64, 10)
        for b in batches:
            X = rng.standard_normal((b, 64), dtype=np.float32)
            y = rng.integers(0, 10, b)
            out.append((f"mlp {list(hidden)} batch {b}", model, X, y))
    wl = WorkloadSpec("cal", "cal", "logreg", 64, 0.1, 1)
    d = 2_000 if quick else LOGREG_FEATURES
    model = make_model(wl, d, 2)
    for b in LOGREG_BATCHES[:1] if quick else LOGREG_BATCHES:
        X = sp.random(
            b, d, density=LOGREG_NNZ_PER_ROW / d, format="csr", random_state=rng, dtype=np.float32
        )
        y = rng.integers(0, 2, b)
        out.append((f"logreg d={d} batch {b}", model, X, y))
    return out


def calibrate_compute(
    repeats: int = 5,
    min_time: float = 2e-3,
    quick: bool = False,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Time ``loss_grad`` of the MLP and the sparse logistic regression; fit overhead and rate.

    Returns:
        ``{"flops_per_s", "overhead_s", "fit"}``, ``fit`` listing each point (model, FLOPs,
        measured and predicted seconds) and the fit's max relative error.
    """
    pts = []
    for label, model, X, y in _compute_points(quick):
        params = model.init_params(0)
        t = median_time(lambda m=model, X=X, y=y, p=params: m.loss_grad(p, X, y), repeats, min_time)
        pts.append((label, float(model.flops(X)), t))
    a, b, err = fit_linear([p[1] for p in pts], [p[2] for p in pts])
    if b <= 0:
        raise ConfigError(
            "the compute calibration found no time per FLOP; re-run on a quiet machine"
        )
    rate = 1.0 / b
    fit = {
        "points": [
            {
                "what": label,
                "flops": round_sig(f),
                "measured_s": round_sig(t),
                "predicted_s": round_sig(a + f * b),
            }
            for label, f, t in pts
        ],
        "max_relative_error": round_sig(err, 3),
    }
    if log:
        log(f"compute: {rate:.3g} FLOP/s, overhead {a * 1e6:.1f} us (max fit error {err:.0%})")
    return {"flops_per_s": round_sig(rate), "overhead_s": round_sig(a), "fit": fit}


# --------------------------------------------------------------------------- the file


def machine_description() -> str:
    """CPU model (from /proc/cpuinfo), logical CPUs, OS and the library versions."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{model}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}, NumPy {np.__version__}, torch {torch.__version__}"
    )


@dataclass
class Calibration:
    """The inputs of a measured device file.

    Attributes:
        device: The profile's name.
        command: The command that produced it (recorded in the source).
        sizes: Vector lengths of the codec timings.
        ratios: Densities of the codec timings.
        repeats: Timed runs per measurement.
        threads: Threads allowed (1).
        quick: Tiny settings (tests only).
        note: Extra words for the source detail (e.g. "shared machine").
        codecs: Codec names (default: all).
    """

    device: str
    command: str
    sizes: tuple[int, ...] = DEFAULT_SIZES
    ratios: tuple[float, ...] = DEFAULT_RATIOS
    repeats: int = 5
    threads: int = 1
    quick: bool = False
    note: str = ""
    codecs: tuple[str, ...] | None = None
    min_time: float = 2e-3
    log: Callable[[str], None] | None = field(default=None, repr=False)


def calibrate(cal: Calibration) -> dict[str, Any]:
    """Measure this machine: the content of a device file (see :func:`device_yaml`)."""
    restore = set_threads(cal.threads)
    try:
        compute = calibrate_compute(cal.repeats, cal.min_time, cal.quick, cal.log)
        costs = calibrate_codecs(
            cal.sizes, cal.ratios, cal.repeats, cal.codecs, cal.min_time, cal.log
        )
    finally:
        restore()
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    where = (
        f"machine: {machine_description()}; command: `{cal.command}`; date: {today}; "
        f"threads: {cal.threads}"
    )
    note = f"; {cal.note}" if cal.note else ""
    quick = "; QUICK settings (tiny sizes, 1 repeat): for tests only" if cal.quick else ""
    compute_detail = (
        f"{where}; median of {cal.repeats} after a warm-up of Model.loss_grad on the "
        f"digits-sized MLP (input 64, hidden {', '.join(str(list(h)) for h in MLP_WIDTHS)}, "
        f"batches {list(MLP_BATCHES)}) and the sparse logistic regression "
        f"({LOGREG_FEATURES} features, ~{LOGREG_NNZ_PER_ROW} non-zeros per row, batches "
        f"{list(LOGREG_BATCHES)}); fit time = overhead_s + Model.flops / flops_per_s by "
        f"non-negative least squares on relative errors (points and residuals under fit)"
        f"{note}{quick}"
    )
    codec_detail = (
        f"{where}; median of {cal.repeats} after a warm-up, standard-normal float32 vectors, "
        f"sizes {sorted(set(cal.sizes))}, ratios {sorted(set(cal.ratios))}; the medians are "
        f"stored per codec, ratio, operation and size (times, aligned with calibration.sizes; "
        f"spread: the largest (max - min) / median of the repeats over the sizes), and "
        f"interpolated in log t against log n by the cost model{note}{quick}"
    )
    return {
        "description": f"{cal.device}: measured on {machine_description().split(',')[0]}",
        "compute": {
            "flops_per_s": compute["flops_per_s"],
            "overhead_s": compute["overhead_s"],
            "source": {"kind": "measured", "detail": compute_detail},
            "fit": compute["fit"],
        },
        "codec_costs": {
            "source": {"kind": "measured", "detail": codec_detail},
            "calibration": {
                "sizes": sorted(set(cal.sizes)),
                "ratios": sorted(set(cal.ratios)),
                "repeats": cal.repeats,
                "threads": cal.threads,
                "pushes_per_aggregate": PUSHES,
            },
            "reference": costs["reference"],
            "codecs": costs["codecs"],
            "wrappers": costs["wrappers"],
        },
    }


# --------------------------------------------------------------------------- summary


def format_summary(content: dict[str, Any], sizes: Sequence[int] = (2**15, 2**20)) -> str:
    """A Markdown table of a device file: compute, then each codec's ops at ``sizes``.

    The costs are the cost model's (:class:`~psml_core.devices.device.CostCurve`): the measured
    times at calibrated sizes, interpolated between them.
    """
    c = content["compute"]
    cc = content["codec_costs"]
    costs = f"codec costs: {cc['source']['kind']}"
    if cc["source"]["kind"] == "estimated":
        scaled = cc["calibration"].get("scaled_from", "a CPU table")
        costs += (
            f" from {scaled}'s CPU table and this device's memory bandwidth, not measured "
            "on the device itself"
        )
    lines = [
        f"compute: {c['flops_per_s']:.4g} FLOP/s, overhead {c['overhead_s'] * 1e6:.1f} us "
        f"({c['source']['kind']})",
        costs,
        "",
        "| codec | ratio | op | " + " | ".join(f"n={n} (ms)" for n in sizes) + " |",
        "|---|---|---|" + "---|" * len(sizes),
    ]
    cal = tuple(int(n) for n in cc["calibration"]["sizes"])

    def cells(curve: dict[str, Any]) -> str:
        at = CostCurve(cal, tuple(float(t) for t in curve["times"])).at
        return " | ".join(f"{1e3 * at(n):.3f}" for n in sizes)

    lines.append("| memcpy (reference) | – | copy | " + cells(cc["reference"]) + " |")
    for name, entries in cc["codecs"].items():
        for e in entries:
            for op, v in e.items():
                if op in ("ratio", "block_size"):
                    continue
                r = "–" if e["ratio"] is None else f"{e['ratio']:g}"
                label = name if "block_size" not in e else f"{name} (B = {e['block_size']})"
                lines.append(f"| {label} | {r} | {op} | " + cells(v) + " |")
    for name, w in cc["wrappers"].items():
        extra = " + inner decode" if w["inner_decode"] else ""
        lines.append(f"| wrapper {name} | – | encode{extra} | " + cells(w) + " |")
    return "\n".join(lines)
