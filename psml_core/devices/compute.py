"""Compute-time models: how long a worker's gradient computation takes on the simulated clock.

Both models scale with the FLOPs of the batch (``Model.flops``), so a batch twice as large, or
a sparse batch with twice the non-zeros, takes twice as long. They differ in where the FLOP rate
comes from: a device profile (``config/devices/<name>.yaml``: measured once with ``psml bench
calibrate`` or cited, committed, deterministic and machine-independent at run time) or one
measurement on this machine at the start of the run (realistic for this host, not
bit-reproducible).
"""

from __future__ import annotations

import statistics
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from psml_core.config import ComputeSpec, HeterogeneitySpec
from psml_core.devices.device import ComputeProfile, Device, device_names, load_device
from psml_core.errors import ConfigError
from psml_core.models.base import Matrix, Model
from psml_core.registry import Registry

__all__ = [
    "COMPUTE_MODELS",
    "DEVICE_PROFILES",
    "ComputeModel",
    "DeviceProfile",
    "Heterogeneity",
    "MeasuredCompute",
    "ProfileCompute",
    "make_compute_model",
]


DeviceProfile = ComputeProfile
"""A device's sustained training throughput (the ``compute`` block of its device file)."""


class _DeviceProfiles(Mapping[str, ComputeProfile]):
    """Device name -> its compute profile, read from ``config/devices/*.yaml`` on access.

    There are no numbers in the code: every profile is a device file, with its source.
    """

    def __getitem__(self, name: str) -> ComputeProfile:
        if name not in self:
            raise KeyError(name)
        return load_device(name).compute

    def __iter__(self) -> Iterator[str]:
        return iter(device_names())

    def __len__(self) -> int:
        return len(device_names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in device_names()


DEVICE_PROFILES: Mapping[str, ComputeProfile] = _DeviceProfiles()
"""Device name -> compute profile, from the device files (see :mod:`psml_core.devices.device`)."""


class ComputeModel(ABC):
    """Maps one gradient computation to a duration on the simulated clock."""

    name: ClassVar[str]
    deterministic: ClassVar[bool]

    def calibrate(self, model: Model, X: Matrix, y: np.ndarray, params: np.ndarray) -> None:  # noqa: B027
        """Called once before the run with a representative batch (default: nothing to do)."""

    @abstractmethod
    def seconds(self, model: Model, X: Matrix) -> float:
        """Duration of a forward + backward pass on batch ``X``."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """What the model assumed or measured, for the run's provenance."""


COMPUTE_MODELS: Registry[type[ComputeModel]] = Registry("compute model")


@COMPUTE_MODELS.register("profile")
class ProfileCompute(ComputeModel):
    """FLOPs of the batch over the device profile's sustained rate, plus its overhead.

    The rate and the overhead come from the device file ``config/devices/<device>.yaml``
    (:func:`~psml_core.devices.device.load_device`), measured with ``psml bench calibrate`` or
    cited, each with its source. Deterministic: the same batch always takes the same simulated
    time on any machine; nothing is timed at run time.

    Args:
        spec: The compute settings (``cost_profile`` names the file).
        root: Config directory holding ``devices/`` (default: :func:`config_root`).
    """

    deterministic = True

    def __init__(self, spec: ComputeSpec, root: str | Path | None = None) -> None:
        self.cost_profile = spec.cost_profile
        self.device_profile: Device = load_device(spec.cost_profile, root)
        self.profile: ComputeProfile = self.device_profile.compute

    def seconds(self, model: Model, X: Matrix) -> float:
        """Overhead + flops / rate."""
        return self.profile.overhead_s + model.flops(X) / self.profile.flops_per_s

    def describe(self) -> dict[str, Any]:
        """The device profile: rate, overhead, their source and the device file's SHA-256."""
        return {"model": self.name, **self.device_profile.describe()}


@COMPUTE_MODELS.register("measured")
class MeasuredCompute(ComputeModel):
    """A FLOP rate measured once on this machine, at the start of the run.

    ``calibrate`` times the real gradient computation on a representative batch (median of
    ``repeats`` runs after one warm-up) and derives seconds per FLOP; every later batch takes
    ``flops(X) * seconds_per_flop``. Realistic for this host, but not bit-reproducible across
    runs: use ``profile`` where determinism matters.

    Args:
        spec: The compute settings.
        repeats: Timed repetitions of the calibration.
    """

    deterministic = False

    def __init__(self, spec: ComputeSpec, repeats: int = 5) -> None:
        self.repeats = repeats
        self.seconds_per_flop: float | None = None
        self.calibration_s: float | None = None

    def calibrate(self, model: Model, X: Matrix, y: np.ndarray, params: np.ndarray) -> None:
        """Time the gradient computation on (X, y) and fix the rate for the whole run."""
        model.loss_grad(params, X, y)  # warm-up: allocations, lazy initialisation
        times = []
        for _ in range(self.repeats):
            t0 = time.perf_counter()
            model.loss_grad(params, X, y)
            times.append(time.perf_counter() - t0)
        self.calibration_s = statistics.median(times)
        self.seconds_per_flop = self.calibration_s / max(model.flops(X), 1.0)

    def seconds(self, model: Model, X: Matrix) -> float:
        """flops(X) at the measured rate."""
        if self.seconds_per_flop is None:
            raise RuntimeError("MeasuredCompute.seconds called before calibrate()")
        return model.flops(X) * self.seconds_per_flop

    def describe(self) -> dict[str, Any]:
        """The measurement (wall-clock seconds of the calibration batch, and the rate)."""
        return {
            "model": self.name,
            "calibration_batch_wall_clock_s": self.calibration_s,
            "seconds_per_flop": self.seconds_per_flop,
            "repeats": self.repeats,
        }


def make_compute_model(spec: ComputeSpec) -> ComputeModel:
    """Instantiate the configured compute model."""
    return COMPUTE_MODELS.get(spec.model, where="compute.model")(spec)


class Heterogeneity:
    """Per-worker, per-step compute-time multipliers (speed differences and stragglers).

    ``factor(worker, step)`` = base multiplier x (``straggler_slowdown`` with probability
    ``straggler_prob``). The base is ``multipliers[worker % len]`` when fixed multipliers are
    given, else drawn uniformly from ``draw_from`` (once, or again every ``redraw_every`` steps),
    else 1. Every draw comes from a counter-based stream keyed by (seed, worker, epoch), so the
    result does not depend on the order in which the engine asks.

    Args:
        spec: The settings (None: all workers equally fast).
        seed: The run seed.
    """

    def __init__(self, spec: HeterogeneitySpec | None, seed: int) -> None:
        self.spec = spec or HeterogeneitySpec()
        self.seed = seed
        if self.spec.multipliers and self.spec.draw_from:
            raise ConfigError(
                "key 'compute.heterogeneity': give either multipliers or draw_from, not both"
            )

    def base(self, worker: int, step: int) -> float:
        """The worker's speed multiplier in force at ``step`` (1 = nominal)."""
        sp = self.spec
        if sp.multipliers:
            return float(sp.multipliers[worker % len(sp.multipliers)])
        if sp.draw_from:
            epoch = step // sp.redraw_every if sp.redraw_every else 0
            rng = np.random.default_rng([self.seed, worker, epoch, 1])
            return float(sp.draw_from[int(rng.integers(len(sp.draw_from)))])
        return 1.0

    def factor(self, worker: int, step: int) -> float:
        """The multiplier of the worker's compute time at ``step``, stragglers included."""
        f = self.base(worker, step)
        if self.spec.straggler_prob > 0:
            rng = np.random.default_rng([self.seed, worker, step, 2])
            if rng.random() < self.spec.straggler_prob:
                f *= self.spec.straggler_slowdown
        return f
