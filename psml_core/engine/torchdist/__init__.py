"""The dist backend: workers and server shards as real processes over torch.distributed (gloo)."""

from psml_core.engine.torchdist.backend import DistBackend, DistResult
from psml_core.engine.torchdist.settings import DistOptions, Faults, Layout

__all__ = ["DistBackend", "DistOptions", "DistResult", "Faults", "Layout"]
