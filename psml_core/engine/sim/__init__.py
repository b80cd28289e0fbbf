"""The sim backend (SimPy discrete-event simulation)."""

from psml_core.engine.sim.backend import SimBackend

__all__ = ["SimBackend"]
