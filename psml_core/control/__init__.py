"""Controllers: how much to compress, step by step. See :mod:`.base`."""

from psml_core.control.base import CONTROLLERS, Controller, Observation
from psml_core.control.dc2 import DC2Controller, DelayMonitor
from psml_core.control.feed import ControllerFeed
from psml_core.control.static import StaticController

__all__ = [
    "CONTROLLERS",
    "Controller",
    "ControllerFeed",
    "DC2Controller",
    "DelayMonitor",
    "Observation",
    "StaticController",
]
