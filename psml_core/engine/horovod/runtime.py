"""Horovod plumbing: the lazy import, rank detection and the backend's options.

Nothing here imports Horovod at module import time: ``import psml_core`` never needs it. The
first call of :func:`import_horovod` imports ``horovod.torch``; a missing or broken Horovod is a
:class:`~psml_core.errors.ConfigError` that names ``scripts/install_horovod.sh``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from psml_core.engine.rank_entry import env_flag
from psml_core.errors import ConfigError

__all__ = [
    "COLLECTIVES",
    "INSTALL_HINT",
    "HorovodOptions",
    "horovodrun_path",
    "import_horovod",
    "in_horovod_rank",
]

INSTALL_HINT = (
    "install it with scripts/install_horovod.sh (Horovod 0.28.1 built against the installed "
    "torch as C++17, Gloo controller)"
)

COLLECTIVES = ("auto", "allreduce", "allgather")
"""How gradients are exchanged: ``auto`` = allreduce for the dense codec, else allgather."""

# Set by horovodrun (Gloo) in every rank's environment; mpirun-launched ranks of an MPI build
# would set OMPI_*/PMI_* instead, but psml's build has no MPI.
_RANK_VARS = ("HOROVOD_RANK", "HOROVOD_GLOO_RENDEZVOUS_ADDR")


def import_horovod() -> ModuleType:
    """Import and return ``horovod.torch``.

    Raises:
        ConfigError: Horovod is not installed, or was built without PyTorch support.
    """
    try:
        import horovod.torch as hvd
    except ImportError as exc:
        raise ConfigError(
            f"backend 'horovod' needs Horovod with PyTorch support ({exc}); {INSTALL_HINT}"
        ) from None
    return hvd


def in_horovod_rank(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process is a rank started by ``horovodrun``."""
    env = os.environ if environ is None else environ
    return any(env.get(v) for v in _RANK_VARS)


def horovodrun_path() -> str:
    """The ``horovodrun`` next to this interpreter, else the one on PATH.

    Raises:
        ConfigError: None is found.
    """
    beside = Path(sys.executable).with_name("horovodrun")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("horovodrun")
    if found is None:
        raise ConfigError(
            f"backend 'horovod': the horovodrun launcher was not found; {INSTALL_HINT}"
        )
    return found


@dataclass(frozen=True)
class HorovodOptions:
    """Settings of the horovod backend that are not part of a run's recipe.

    Attributes:
        collective: ``auto`` (allreduce for the dense codec ``none`` without error feedback,
            allgather otherwise), ``allreduce`` (dense codecs only) or ``allgather`` (any codec;
            with ``none`` it is a dense allgather, a cross-check of the allreduce path).
        emulate: Emulate the run's scenario on this host: sleep the scenario's per-iteration
            delay ``d_t`` once per step inside the communication phase (netem-style: the step's
            collective sees one extra one-way delay), and stretch each gradient computation by
            the heterogeneity factor (``compute.heterogeneity``). Turn it off on a real network
            where netem already injects the delays.
        timeout_s: Wall-clock limit of a locally spawned ``horovodrun`` (whole run).
        start_timeout_s: ``horovodrun --start-timeout``: how long ranks may take to join.
    """

    collective: str = "auto"
    emulate: bool = True
    timeout_s: float = 3600.0
    start_timeout_s: int = 60

    def __post_init__(self) -> None:
        if self.collective not in COLLECTIVES:
            raise ConfigError(
                f"horovod collective {self.collective!r} is not allowed; allowed values: "
                + ", ".join(COLLECTIVES)
            )
        if self.timeout_s <= 0 or self.start_timeout_s <= 0:
            raise ConfigError("horovod timeouts must be positive")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> HorovodOptions:
        """Options from the environment; unset or empty variables keep the defaults.

        Reads ``PSML_HOROVOD_COLLECTIVE`` (auto|allreduce|allgather), ``PSML_HOROVOD_EMULATE``
        (0|1), ``PSML_HOROVOD_TIMEOUT`` (seconds) and ``PSML_HOROVOD_START_TIMEOUT`` (seconds).

        Args:
            environ: The environment (default: ``os.environ``).
        """
        env = os.environ if environ is None else environ
        d = cls()
        try:
            return cls(
                collective=env.get("PSML_HOROVOD_COLLECTIVE") or d.collective,
                emulate=env_flag(env, "PSML_HOROVOD_EMULATE", d.emulate),
                timeout_s=float(env.get("PSML_HOROVOD_TIMEOUT") or d.timeout_s),
                start_timeout_s=int(env.get("PSML_HOROVOD_START_TIMEOUT") or d.start_timeout_s),
            )
        except ValueError as exc:
            raise ConfigError(f"PSML_HOROVOD_* environment: {exc}") from None
