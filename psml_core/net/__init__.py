"""Network and compute-time models for the sim backend."""

from psml_core.net.compute import COMPUTE_MODELS, DEVICE_PROFILES, ComputeModel, make_compute_model
from psml_core.net.network import FairShareNetwork, max_min_rates

__all__ = [
    "COMPUTE_MODELS",
    "DEVICE_PROFILES",
    "ComputeModel",
    "FairShareNetwork",
    "make_compute_model",
    "max_min_rates",
]
