"""Whether a codec input is a torch tensor, asked without importing torch.

The codecs dispatch on the input's type: a NumPy vector takes the host path, a torch tensor
the torch path on its device (:class:`~psml_core.codecs.base.Codec`). Importing torch takes
seconds, and ``psml config`` or the Snakefile import the codecs without it, so the check looks
torch up only where something else has imported it (no tensor can exist otherwise).
"""

from __future__ import annotations

import sys

__all__ = ["is_tensor"]


def is_tensor(x: object) -> bool:
    """Whether ``x`` is a torch tensor, without importing torch where nothing else has."""
    mod = sys.modules.get("torch")
    return mod is not None and isinstance(x, mod.Tensor)
