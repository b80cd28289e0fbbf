"""GPU device files estimated from a CPU calibration and a GPU's published figures.

A GPU file written this way is an estimate, and says so in every entry; measure one with
``psml bench calibrate`` on the GPU itself where one is at hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from psml_core.bench.timing import round_sig
from psml_core.devices.device import TIME_FLOOR_S, device_from_dict
from psml_core.errors import ConfigError

__all__ = [
    "GPU_CALL_OVERHEAD_S",
    "GPU_MEMCPY_CALL_S",
    "GPU_SPECS",
    "GpuSpec",
    "estimate_gpu",
    "scaled_table",
]

GPU_CALL_OVERHEAD_S = 20e-6
"""Per-call cost of a codec operation on a GPU [assumption]: about four kernel launches of ~5 us
(CUDA's launch latency) each; a codec op is a few element-wise kernels plus a selection."""
GPU_MEMCPY_CALL_S = 5e-6
"""Per-call cost of the GPU memcpy reference [assumption]: one launch of ~5 us."""


@dataclass(frozen=True)
class GpuSpec:
    """A GPU's cited figures.

    Attributes:
        description: The device.
        hbm_bytes_per_s: Datasheet memory bandwidth.
        hbm_citation: Where the bandwidth comes from.
        flops_per_s: Sustained training FLOP/s derived from a cited throughput.
        flops_detail: The citation and the arithmetic.
        overhead_s: Fixed per-step cost [assumption].
        overhead_detail: The assumption in words.
    """

    description: str
    hbm_bytes_per_s: float
    hbm_citation: str
    flops_per_s: float
    flops_detail: str
    overhead_s: float
    overhead_detail: str


_RN50_MACS = 4_089_184_256
"""Multiply-accumulates of one ResNet-50 v1.5 forward pass at 224x224, 1000 classes (convs and
the classifier, counted layer by layer: stem 118.0M, stages [3, 4, 6, 3] bottlenecks with the
stride on the 3x3 convolution, downsample 1x1 convolutions, fc 2.048M)."""
_FLOPS_PER_MAC_TRAIN = 6  # psml's convention (Model.flops): 2 per MAC forward, 4 backward

_OVERHEAD_DETAIL = (
    "[assumption] 1 ms per gradient computation: PyTorch dispatch plus CUDA launch, about 10 us "
    "per operator, times about 100 operators in a training step of the paper tier's models "
    "(the 2-layer MLP has ~20, psml's ResNet-18 ~300), so within a factor of about 3 for "
    "either; for scale, NVIDIA reports a 10.37 ms batch-1 FP32 ResNet-50 inference latency on "
    "V100 16GB (same README as the rate), the floor of a 50-layer network with data loading"
)

GPU_SPECS: dict[str, GpuSpec] = {
    "v100": GpuSpec(
        description="NVIDIA V100 (SXM2 16 GB), FP32",
        hbm_bytes_per_s=900e9,
        hbm_citation="NVIDIA Tesla V100 datasheet: 900 GB/s HBM2",
        flops_per_s=367 * _FLOPS_PER_MAC_TRAIN * _RN50_MACS,
        flops_detail=(
            "NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md, "
            "'Training performance: NVIDIA DGX-1 16GB (8x V100 16GB)', 1 GPU, FP32: 367 img/s "
            "(pytorch-21.03 NGC container). ResNet-50 v1.5 forward at 224x224 = 4.089e9 MAC "
            "(counted layer by layer); training = 6 FLOP per MAC (psml's Model.flops convention: "
            "2 forward, 4 backward) = 2.453e10 FLOP per image; 367 x 2.453e10 = 9.004e12 FLOP/s "
            "(57% of the 15.7 TFLOP/s FP32 datasheet peak)"
        ),
        overhead_s=1e-3,
        overhead_detail=_OVERHEAD_DETAIL,
    ),
    "a100": GpuSpec(
        description="NVIDIA A100 (80 GB), TF32 tensor cores (PyTorch's default for convolutions)",
        hbm_bytes_per_s=1555e9,
        hbm_citation="NVIDIA A100 40GB datasheet: 1,555 GB/s HBM2 (the 80GB SXM part: 2,039 GB/s)",
        flops_per_s=938 * _FLOPS_PER_MAC_TRAIN * _RN50_MACS,
        flops_detail=(
            "NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md, "
            "'Training performance: NVIDIA DGX A100 (8x A100 80GB)', 1 GPU, TF32: 938 img/s "
            "(pytorch-21.03 NGC container). 938 x 2.453e10 FLOP per image (4.089e9 MAC x 6, as "
            "for v100) = 2.301e13 FLOP/s. TF32, not strict FP32: PyTorch runs convolutions in "
            "TF32 on A100 by default (torch.backends.cudnn.allow_tf32); this exceeds the 19.5 "
            "TFLOP/s FP32 (non-tensor-core) peak, and strict-FP32 training would be slower"
        ),
        overhead_s=1e-3,
        overhead_detail=_OVERHEAD_DETAIL,
    ),
}


def estimate_gpu(cpu: dict[str, Any], gpu: str, cpu_file: str) -> dict[str, Any]:
    """A GPU device file estimated from a measured CPU device file's content.

    Point by point: at each calibrated size ``n``, an operation measured at ``t_cpu(n)`` while
    a memcpy of the same vector took ``m_cpu(n)`` (same CPU calibration) becomes ``t_gpu(n) =
    GPU_CALL_OVERHEAD_S + (t_cpu(n) / m_cpu(n)) (8 n / HBM)``: it keeps its cost relative to the
    memcpy, and a memcpy on the GPU reads and writes 4 n bytes each at the datasheet bandwidth.
    The CPU's per-call cost (Python, allocation) stays in the ratio, so small sizes are
    overestimated by a little, under the launch overhead that dominates them anyway. The GPU
    memcpy reference is ``GPU_MEMCPY_CALL_S + 8 n / HBM``.

    Args:
        cpu: The CPU file's content (measured).
        gpu: A key of :data:`GPU_SPECS`.
        cpu_file: The CPU file's name (recorded in the source).

    Raises:
        ConfigError: an unknown GPU, or CPU content that is no valid device file (e.g. one
            written before the tables held measured points).
    """
    if gpu not in GPU_SPECS:
        raise ConfigError(
            f"no cited figures for GPU {gpu!r}; known GPUs: {', '.join(sorted(GPU_SPECS))}"
        )
    device_from_dict(cpu, Path(cpu_file).stem, source=f"device file {cpu_file!r}")  # checks
    spec = GPU_SPECS[gpu]
    table = scaled_table(
        cpu, cpu_file, 8.0 / spec.hbm_bytes_per_s, GPU_CALL_OVERHEAD_S, GPU_MEMCPY_CALL_S
    )
    detail = (
        f"[estimate] scaled point by point from the measured codec_costs of {cpu_file} (its "
        f"source says where and how): at each calibrated size n, each operation keeps its time "
        f"relative to a memcpy of the same vector on that CPU (t_cpu(n) / memcpy_cpu(n)), and a "
        f"GPU memcpy moves 8 B per float32 element at {spec.hbm_bytes_per_s / 1e9:g} GB/s "
        f"({spec.hbm_citation}); plus {GPU_CALL_OVERHEAD_S * 1e6:g} us per call [assumption: "
        f"about four kernel launches of ~5 us]; the memcpy reference is "
        f"{GPU_MEMCPY_CALL_S * 1e6:g} us [assumption: one launch] + 8 n bytes / bandwidth. "
        "Assumes the codecs ran as GPU kernels with the CPU code's memory-traffic profile; "
        "selection (top-k, compaction) is relatively slower on GPUs, so top-k-like encodes are "
        "likely underestimated; the CPU's per-call Python cost stays in the ratio at small n"
    )
    return {
        "description": f"{gpu}: {spec.description}",
        "compute": {
            "flops_per_s": round_sig(spec.flops_per_s),
            "overhead_s": spec.overhead_s,
            "source": {"kind": "cited", "detail": spec.flops_detail},
            "overhead_source": {"kind": "estimated", "detail": spec.overhead_detail},
        },
        "codec_costs": {"source": {"kind": "estimated", "detail": detail}, **table},
    }


_KEYS = ("ratio", "block_size")
"""An entry's keys that say where it was calibrated (copied, not scaled)."""


def scaled_table(
    cpu: dict[str, Any], cpu_file: str, copy_s_per_elem: float, call_s: float, copy_call_s: float
) -> dict[str, Any]:
    """A measured CPU table's codec costs moved to a GPU, point by point (see estimate_gpu).

    At each calibrated size ``n``: ``t_gpu(n) = call_s + (t_cpu(n) / memcpy_cpu(n)) *
    copy_s_per_elem * n``; the GPU memcpy reference is ``copy_call_s + copy_s_per_elem * n``.

    Args:
        cpu: The CPU file's content (measured, validated).
        cpu_file: Its name, recorded as ``calibration.scaled_from``.
        copy_s_per_elem: Seconds per float32 element of a memcpy on the GPU.
        call_s: Per-call cost of a codec operation on the GPU.
        copy_call_s: Per-call cost of the GPU memcpy reference.

    Returns:
        ``calibration``, ``reference``, ``codecs`` and ``wrappers`` of a ``codec_costs`` block.
    """
    cc = cpu["codec_costs"]
    sizes = [int(n) for n in cc["calibration"]["sizes"]]
    memcpy = [max(float(t), TIME_FLOOR_S) for t in cc["reference"]["times"]]
    gpu_copy = [copy_s_per_elem * n for n in sizes]

    def scale(curve: dict[str, Any]) -> dict[str, Any]:
        return {
            "times": [
                round_sig(call_s + float(t) / m * g)
                for t, m, g in zip(curve["times"], memcpy, gpu_copy, strict=True)
            ]
        }

    codecs = {
        name: [
            {k: e[k] for k in _KEYS if k in e}
            | {op: scale(v) for op, v in e.items() if op not in _KEYS}
            for e in entries
        ]
        for name, entries in cc["codecs"].items()
    }
    wrappers = {
        name: {**scale(w), "inner_decode": w["inner_decode"]}
        | ({"note": w["note"]} if "note" in w else {})
        for name, w in cc["wrappers"].items()
    }
    calibration: dict[str, Any] = {"sizes": sizes}
    if "ratios" in cc["calibration"]:
        calibration["ratios"] = list(cc["calibration"]["ratios"])
    calibration["scaled_from"] = cpu_file
    return {
        "calibration": calibration,
        "reference": {"times": [round_sig(copy_call_s + g) for g in gpu_copy]},
        "codecs": codecs,
        "wrappers": wrappers,
    }
