"""One engine, interchangeable backends: workers, server shards, and the run loop."""

from psml_core.engine.backend import BACKENDS, Backend
from psml_core.engine.horovod import HorovodBackend
from psml_core.engine.job import Job, build_job
from psml_core.engine.sim import SimBackend
from psml_core.engine.stages import staged_job
from psml_core.engine.torchdist import DistBackend
from psml_core.engine.training import train

__all__ = [
    "BACKENDS",
    "Backend",
    "DistBackend",
    "HorovodBackend",
    "Job",
    "SimBackend",
    "build_job",
    "staged_job",
    "train",
]
