"""Every codec set to send something from a standard-normal vector (shared by test modules)."""

from __future__ import annotations

from typing import Any

from psml_core.codecs import make_codec
from psml_core.config import BlockSpec

PARAMS = {
    "threshold": {"threshold": 1.0},
    "omnireduce": {"block_size": 16},
    "value_bounded": {"schedule": "fixed", "theta0": 1.0, "warmup": 0},
    "topk_matched": {"schedule": "fixed", "theta0": 1.0, "warmup": 0},
    "dfs": {"block_size": 16},
}
"""Parameters that make each codec send something from a standard-normal vector."""


def sending_codec(name: str) -> Any:
    """The codec ``name`` with :data:`PARAMS` (its defaults where none are given)."""
    return make_codec(BlockSpec(name, PARAMS.get(name, {})))
