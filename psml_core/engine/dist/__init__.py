"""The dist backend: workers and server shards as real processes over torch.distributed (gloo)."""

from psml_core.engine.dist.backend import DistBackend, DistResult
from psml_core.engine.dist.settings import DistOptions, Faults, Layout

__all__ = ["DistBackend", "DistOptions", "DistResult", "Faults", "Layout"]
