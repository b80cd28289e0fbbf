"""Which recipes each backend can run faithfully, checked when a config loads.

Each backend's refusal is its descriptor's (:class:`~psml_core.backend_info.BackendInfo`,
looked up by :func:`backend_info`, psml's own or a plugin's). The dist backend cannot move
keys between shard processes; an allreduce (horovod) has no asynchronous policies, per-key
pulls, down codecs or shards. The workflow and ``psml config``
call :func:`check_backend` right after loading the config, so that a tier its backend cannot
run stops with one line before any job starts, not hours later at its first training job; the
backends ask the same functions again when they run a job (a run spec written by hand).

This module reads only the settings and the blocks' class flags (``Placement.moves_keys``,
``SyncPolicy.barrier``), not the backends themselves, so that loading a config stays cheap:
the backends import torch.
"""

from __future__ import annotations

from psml_core.backend_info import (
    BACKEND_INFOS,
    BackendInfo,
    dist_refusal,
    has_barrier,
    horovod_refusal,
    moves_keys,
)
from psml_core.config import Experiment, config_root, load_yaml
from psml_core.errors import ConfigError
from psml_core.plugins import block_origin, calibrate_command, cost_file, load_plugins

__all__ = [
    "SERVER_DEVICE",
    "backend_info",
    "check_backend",
    "check_codec_costs",
    "dist_refusal",
    "has_barrier",
    "horovod_refusal",
    "moves_keys",
]


def backend_info(name: str, where: str = "backend") -> BackendInfo:
    """The descriptor of backend ``name``: psml's own, or a ``psml.backends`` plugin's.

    Raises:
        ConfigError: an unknown name, naming the config key and listing the known backends.
    """
    load_plugins()
    return BACKEND_INFOS.get(name, where=where)


SERVER_DEVICE = "cpu-core"
"""Where server shards run on the sim clock: CPU processes (PS-lite, BytePS), whatever the
workers' device (``engine/sim/charges.py`` prices their codec work there)."""


def _priced(device: str) -> set[str]:
    """The codecs ``config/devices/<device>.yaml`` prices.

    Empty where there is no such file: that error is the device loader's, naming the devices.
    """
    path = config_root() / "devices" / f"{device}.yaml"
    data = load_yaml(path, "device file") if path.is_file() else None
    costs = data.get("codec_costs") if isinstance(data, dict) else None
    codecs = costs.get("codecs") if isinstance(costs, dict) else None
    return set(codecs) if isinstance(codecs, dict) else set()


def check_codec_costs(exp: Experiment) -> None:
    """On a backend that prices codec work (sim), every codec of the tier's recipes has a cost.

    psml's own codecs are in every device file; a plugin's codec needs its cost file
    (``psml bench calibrate --plugin``), else the first training job would stop on it.

    Raises:
        ConfigError: naming the codec, a method using it, its plugin and the command.
    """
    if not backend_info(exp.backend).prices_codecs or not exp.compute.codec_costs:
        return
    devices = {exp.compute.cost_profile, SERVER_DEVICE}
    devices |= {wl.cost_profile for wl in exp.workloads.values() if wl.cost_profile is not None}
    known = set.intersection(*(_priced(d) for d in devices))
    if not known:
        return
    missing: dict[str, str] = {}
    for name, r in sorted(exp.recipes.items()):
        for block in (r.codec, r.codec_down):
            unknown = block is not None and block.name not in known
            if unknown and not cost_file(block.name).is_file():
                missing.setdefault(block.name, name)
    if missing:
        codec, method = next(iter(missing.items()))
        owner = block_origin("codec", codec)
        who = f", plugin {owner.label}" if owner else ""
        raise ConfigError(
            f"codec {codec!r} (method {method!r}{who}) has no cost table: the device files "
            f"price psml's own codecs, and {str(cost_file(codec))!r} does not exist; measure "
            f"it on this machine with `{calibrate_command(missing)}`, or set "
            "compute.codec_costs: false (codec work then takes 0 s of simulated time)"
        )


def check_backend(exp: Experiment) -> None:
    """Refuse a tier whose backend cannot run one of its recipes.

    Also checks that the sim backend can price every codec (:func:`check_codec_costs`).

    Raises:
        ConfigError: naming the backend, each recipe it cannot run and why, and the fix.
    """
    refusal = backend_info(exp.backend).refusal
    refused = {m: why for m, r in sorted(exp.recipes.items()) if (why := refusal(r))}
    if refused:
        first, why = next(iter(refused.items()))
        others = ", ".join(list(refused)[1:])
        more = f" (also: {others})" if others else ""
        raise ConfigError(
            f"backend {exp.backend!r} cannot run {len(refused)} of the tier's methods{more}: "
            f"{why}; set backend: sim, or leave these methods out of the tier"
        )
    check_codec_costs(exp)
