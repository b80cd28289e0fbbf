"""The static controller: one ratio for the whole run."""

from __future__ import annotations

from psml_core.control.base import CONTROLLERS, Controller
from psml_core.errors import ConfigError

__all__ = ["StaticController"]


@CONTROLLERS.register("static")
class StaticController(Controller):
    """A fixed compression ratio ("uniform compression" in DC2's terms).

    Args:
        ratio: The ratio in (0, 1]; 1.0 means no compression.
    """

    def __init__(self, ratio: float = 1.0) -> None:
        if not 0.0 < ratio <= 1.0:
            raise ConfigError(f"controller 'static': params.ratio must be in (0, 1], got {ratio}")
        self._ratio = float(ratio)

    def ratio(self, step: int) -> float:
        """The fixed ratio."""
        return self._ratio
