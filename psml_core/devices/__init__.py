"""What work costs on a device: device profiles, compute-time models, codec cost tables."""

from psml_core.devices.compute import (
    COMPUTE_MODELS,
    DEVICE_PROFILES,
    ComputeModel,
    make_compute_model,
)

__all__ = ["COMPUTE_MODELS", "DEVICE_PROFILES", "ComputeModel", "make_compute_model"]
