"""Compute-time models: how long a worker's gradient computation takes on the simulated clock."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from psml_core.config import ComputeSpec
from psml_core.errors import ConfigError
from psml_core.models.base import Matrix, Model
from psml_core.registry import Registry

__all__ = [
    "COMPUTE_MODELS",
    "DEVICE_PROFILES",
    "ComputeModel",
    "DeviceProfile",
    "make_compute_model",
]


@dataclass(frozen=True)
class DeviceProfile:
    """A device's sustained training throughput.

    Attributes:
        flops_per_s: Sustained FLOP/s on training kernels (not the datasheet peak).
        overhead_s: Fixed per-iteration cost (framework, kernel launches, data loading).
        source: Where the figures come from.
    """

    flops_per_s: float
    overhead_s: float
    source: str


# [ours] Sustained rates are about 40% of fp32 peak for GPUs, a common utilisation for small
# batches; the CPU figure is one AVX2 core. Datasheet peaks: V100 15.7 TFLOP/s, A100 19.5 TFLOP/s.
DEVICE_PROFILES: dict[str, DeviceProfile] = {
    "cpu-core": DeviceProfile(1.0e10, 50e-6, "[ours] one x86 core, AVX2, sustained"),
    "v100": DeviceProfile(6.3e12, 1e-3, "[ours] 40% of the V100 fp32 peak (15.7 TFLOP/s)"),
    "a100": DeviceProfile(7.8e12, 1e-3, "[ours] 40% of the A100 fp32 peak (19.5 TFLOP/s)"),
}


class ComputeModel(ABC):
    """Maps one gradient computation to a duration on the simulated clock."""

    name: ClassVar[str]
    deterministic: ClassVar[bool]

    @abstractmethod
    def seconds(self, model: Model, X: Matrix, measured_s: float) -> float:
        """Duration of a forward + backward pass on batch ``X``.

        Args:
            model: The model.
            X: The mini-batch.
            measured_s: Wall-clock seconds the real computation took in this process.
        """


COMPUTE_MODELS: Registry[type[ComputeModel]] = Registry("compute model")


@COMPUTE_MODELS.register("profile")
class ProfileCompute(ComputeModel):
    """FLOPs of the batch over the device profile's sustained rate, plus its overhead.

    Deterministic: the same batch always takes the same simulated time on any machine.
    """

    name = "profile"
    deterministic = True

    def __init__(self, spec: ComputeSpec) -> None:
        if spec.device not in DEVICE_PROFILES:
            raise ConfigError(
                f"key 'compute.device': {spec.device!r} is not allowed; allowed values: "
                + ", ".join(sorted(DEVICE_PROFILES))
            )
        self.profile = DEVICE_PROFILES[spec.device]

    def seconds(self, model: Model, X: Matrix, measured_s: float) -> float:
        """Overhead + flops / rate."""
        return self.profile.overhead_s + model.flops(X) / self.profile.flops_per_s


@COMPUTE_MODELS.register("measured")
class MeasuredCompute(ComputeModel):
    """The wall-clock time of the real computation on this machine.

    Not bit-reproducible across runs (timings vary); use ``profile`` where determinism matters.
    """

    name = "measured"
    deterministic = False

    def __init__(self, spec: ComputeSpec) -> None:
        self.spec = spec

    def seconds(self, model: Model, X: Matrix, measured_s: float) -> float:
        """The measured seconds."""
        return measured_s


def make_compute_model(spec: ComputeSpec) -> ComputeModel:
    """Instantiate the configured compute model."""
    return COMPUTE_MODELS.get(spec.model, where="compute.model")(spec)


def timed(fn, *args):  # type: ignore[no-untyped-def]
    """Call ``fn(*args)`` and return (result, wall-clock seconds)."""
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0
