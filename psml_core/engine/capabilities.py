"""Whether a tier's backend can run every recipe of the tier, checked when the config loads.

Each backend says what it cannot run faithfully (:meth:`~psml_core.engine.backend.Backend.refusal`:
the dist backend cannot move keys between shard processes; an allreduce has no asynchronous
policies, per-key pulls, down codecs or shards). The workflow and ``psml config`` call
:func:`check_backend` after loading the config, so a tier its backend cannot run stops with one
line before any job starts, not hours later at its first training job.
"""

from __future__ import annotations

import psml_core.engine.horovod.backend
import psml_core.engine.sim.backend
import psml_core.engine.torchdist.backend  # noqa: F401 - the backends register themselves
from psml_core.config import Experiment
from psml_core.engine.backend import BACKENDS
from psml_core.errors import ConfigError

__all__ = ["check_backend"]


def check_backend(exp: Experiment) -> None:
    """Refuse a tier whose backend cannot run one of its recipes.

    Raises:
        ConfigError: naming the backend, each recipe it cannot run and why, and the fix.
    """
    backend = BACKENDS.get(exp.backend, where="backend")
    refused = {m: why for m, r in sorted(exp.recipes.items()) if (why := backend.refusal(r))}
    if refused:
        first, why = next(iter(refused.items()))
        others = ", ".join(list(refused)[1:])
        more = f" (also: {others})" if others else ""
        raise ConfigError(
            f"backend {exp.backend!r} cannot run {len(refused)} of the tier's methods{more}: "
            f"{why}; set backend: sim, or leave these methods out of the tier"
        )
