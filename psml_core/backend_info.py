"""What the workflow and the settings know of a backend before it runs: its descriptor.

A backend is two things. Its :class:`~psml_core.engine.backend.Backend` class runs a job (it
imports torch, and often more); its :class:`BackendInfo` says, without importing the class,
what the rest of psml needs before any job starts: the clock it keeps, how many processes a run
takes (SLURM's tasks and threads, the memory estimate), whether its runs checkpoint, whether a
launcher starts its processes (``srun``, ``torchrun``), and which recipes it refuses and why
(checked for every recipe of a tier when its config loads).

psml's own three descriptors are :data:`BUILTIN`; a package adds one through the
``psml.backends`` entry-point group (:mod:`psml_core.plugins`), whose entry point names a
:class:`BackendInfo` object. Both land in :data:`BACKEND_INFOS`;
:func:`psml_core.capabilities.backend_info` looks a name up (loading the plugins first).

This module reads only the settings and the blocks' class flags (``Placement.moves_keys``,
``SyncPolicy.barrier``), not the backends, so that loading a config stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from psml_core.config import MethodRecipe
from psml_core.placement.base import PLACEMENTS
from psml_core.registry import Registry
from psml_core.sync.base import SYNC_POLICIES

__all__ = [
    "BACKEND_INFOS",
    "BUILTIN",
    "CLOCKS",
    "BackendInfo",
    "dist_refusal",
    "has_barrier",
    "horovod_refusal",
    "moves_keys",
]

CLOCKS = ("simulated", "wall-clock")
"""The clocks a backend may keep; every time it reports is labelled with its clock."""


def _refuses_nothing(method: MethodRecipe) -> str | None:
    return None


def _one_process(workers: int, shards: int) -> int:
    return 1


@dataclass(frozen=True)
class BackendInfo:
    """A backend, as the settings and the workflow see it (no import of its class).

    Attributes:
        name: The name ``backend:`` takes in a tier's config.
        backend: Where its :class:`~psml_core.engine.backend.Backend` subclass lives,
            ``"module:Class"``; imported only when a job runs (:meth:`load`).
        clock: ``"simulated"`` or ``"wall-clock"``: the label of every time it reports.
        summary: One sentence on what it is, for ``psml config`` and the docs.
        process_count: ``(workers, shards) -> processes`` of one run (:meth:`processes`).
        checkpoints: Whether its runs honour ``checkpoint_every`` (others say they ignore it).
        launch_module: The module a launcher (``srun`` in the workflow, or ``psml train
            --launcher``) starts on each of the run's processes (``python -m <module>``); None:
            ``psml train`` runs the job in its own process, and SLURM gives it one task.
        in_process: Whether the training process reports the run's progress itself; False:
            other processes (its ranks) do from the start of training (``Progress.handover``).
        prices_codecs: Whether its clock charges codec work from the device files' cost tables
            (then a tier's codecs must all be priced, ``capabilities.check_codec_costs``).
        refuse: ``method -> why it cannot run it (with the fix), or None`` (:meth:`refusal`).
    """

    name: str
    backend: str
    clock: str
    summary: str = ""
    process_count: Callable[[int, int], int] = _one_process
    checkpoints: bool = False
    launch_module: str | None = None
    in_process: bool = True
    prices_codecs: bool = False
    refuse: Callable[[MethodRecipe], str | None] = _refuses_nothing

    def __post_init__(self) -> None:
        if self.clock not in CLOCKS:
            raise ValueError(
                f"backend {self.name!r}: clock {self.clock!r} is neither of {', '.join(CLOCKS)}"
            )
        if ":" not in self.backend:
            raise ValueError(
                f"backend {self.name!r}: backend {self.backend!r} is not 'module:Class'"
            )

    def processes(self, workers: int, shards: int) -> int:
        """Processes of one run of ``workers`` workers and ``shards`` shards."""
        return int(self.process_count(workers, shards))

    def refusal(self, method: MethodRecipe) -> str | None:
        """Why this backend cannot run ``method`` faithfully, with the fix; None if it can."""
        return self.refuse(method)

    def load(self) -> Any:
        """The backend's class (imported here, the first time a job runs on it)."""
        module, _, attr = self.backend.partition(":")
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj


def moves_keys(method: MethodRecipe) -> bool:
    """Whether the recipe's placement moves keys between shards during the run."""
    return bool(PLACEMENTS.get(method.placement.name).moves_keys)


def has_barrier(method: MethodRecipe) -> bool:
    """Whether the recipe's sync policy applies each clock's pushes together (BSP, PCP)."""
    return bool(SYNC_POLICIES.get(method.sync.name).barrier)


def dist_refusal(method: MethodRecipe) -> str | None:
    """Why the dist backend cannot run ``method``, or None."""
    if moves_keys(method):
        return (
            f"method {method.name!r}: placement {method.placement.name!r} moves keys between "
            "shards mid-run, which the dist backend cannot do yet; run it on the sim backend"
        )
    return None


def horovod_refusal(method: MethodRecipe) -> str | None:
    """Why an allreduce cannot run ``method``, or None.

    An asynchronous sync policy, touched pulls, a down-direction codec on pulls, or a
    placement that moves keys.
    """
    if not has_barrier(method):
        return (
            f"backend 'horovod' runs bulk-synchronous allreduce; method {method.name!r} uses "
            f"sync {method.sync.name!r} — use sync: bsp, or the sim or dist backend"
        )
    if method.pull == "touched":
        return (
            f"backend 'horovod' allreduces whole gradients and has no per-key pulls; method "
            f"{method.name!r} sets pull: touched — use the sim or dist backend"
        )
    if method.codec_down is not None and method.codec_down.name != "none":
        return (
            f"backend 'horovod' has no parameter pulls to encode; method {method.name!r} sets "
            f"codec_down {method.codec_down.name!r} — use the sim or dist backend"
        )
    if moves_keys(method):
        return (
            f"backend 'horovod' has no server shards to move keys between; method "
            f"{method.name!r} uses placement {method.placement.name!r} — use the sim backend"
        )
    return None


def _ranks(workers: int, shards: int) -> int:
    return workers + shards


def _workers(workers: int, shards: int) -> int:
    return workers


BUILTIN = (
    BackendInfo(
        name="sim",
        backend="psml_core.engine.sim.backend:SimBackend",
        clock="simulated",
        summary="a deterministic discrete-event simulation in one process, simulated time",
        checkpoints=True,
        prices_codecs=True,
    ),
    BackendInfo(
        name="dist",
        backend="psml_core.engine.torchdist.backend:DistBackend",
        clock="wall-clock",
        summary="real processes over torch.distributed (gloo), P + S ranks per run",
        process_count=_ranks,
        launch_module="psml_core.engine.torchdist.launch",
        in_process=False,
        refuse=dist_refusal,
    ),
    BackendInfo(
        name="horovod",
        backend="psml_core.engine.horovod.backend:HorovodBackend",
        clock="wall-clock",
        summary="allreduce over Horovod's Gloo, P ranks per run (scripts/install_horovod.sh)",
        process_count=_workers,
        in_process=False,
        refuse=horovod_refusal,
    ),
)
"""psml's own backends; registered here, so that they need no installed entry points."""

BACKEND_INFOS: Registry[BackendInfo] = Registry("backend")
"""Every backend's descriptor by name: :data:`BUILTIN`, then the ``psml.backends`` plugins'."""

for _info in BUILTIN:
    BACKEND_INFOS.register(_info.name)(_info)
