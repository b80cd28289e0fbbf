"""``psml bench calibrate --plugin CODEC``: measure a plugin codec's cost table on this machine.

A codec that a plugin package registers (:mod:`psml_core.plugins`) is in no device file. This
times its five operations exactly as the device calibration times psml's own codecs
(:func:`~psml_core.bench.calibrate_codecs.calibrate_codecs`: the same vectors, sizes, ratios,
repeats and one thread), plus a memcpy of the same vectors, and writes
``config/devices/plugins/<codec>.yaml`` (:func:`psml_core.plugins.cost_file`). The sim backend
scales it to each device by the memcpy ratio (:mod:`psml_core.devices.plugin_costs`).

Run it on the machine the workflow's training jobs run on, while it is otherwise idle, once per
plugin version: the workflow does not start it by itself, because timings taken beside the
workflow's own jobs would be those jobs' noise.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from psml_core.atomic import write_text
from psml_core.bench.calibrate_codecs import (
    DEFAULT_RATIOS,
    DEFAULT_SIZES,
    PUSHES,
    calibrate_codecs,
)
from psml_core.bench.device_file import device_yaml
from psml_core.bench.timing import set_threads
from psml_core.codecs import CODECS
from psml_core.devices.plugin_costs import plugin_cost_from_dict
from psml_core.errors import ConfigError
from psml_core.plugins import Plugin, block_origin, cost_file, load_plugins

__all__ = ["calibrate_plugin_codecs"]


def _owners(names: Sequence[str]) -> dict[str, Plugin]:
    """Each name's plugin; psml's own or an unknown codec is a ConfigError with the fix."""
    load_plugins()
    out = {}
    for name in names:
        CODECS.get(name, where="--plugin")  # an unknown name: did you mean ..., known codecs
        owner = block_origin("codec", name)
        if owner is None:
            raise ConfigError(
                f"--plugin {name}: {name!r} is one of psml's own codecs, priced by the device "
                "files; calibrate those with `psml bench calibrate --cost-profile NAME --out FILE`"
            )
        out[name] = owner
    return out


def calibrate_plugin_codecs(
    names: Sequence[str],
    *,
    command: str,
    sizes: Sequence[int] = DEFAULT_SIZES,
    ratios: Sequence[float] = DEFAULT_RATIOS,
    repeats: int = 5,
    min_time: float = 2e-3,
    quick: bool = False,
    machine: str = "",
    log: Callable[[str], None] | None = None,
) -> list[Path]:
    """Measure each plugin codec and write its cost file; the files written.

    Args:
        names: The plugin codecs' registered names.
        command: The command line, recorded in each file's source.
        sizes: Vector lengths.
        ratios: Densities.
        repeats: Timed runs per measurement (the median is kept) after one warm-up.
        min_time: Each timed run loops the call until it lasts this long.
        quick: Tiny settings (tests only): said so in the source.
        machine: This machine in words (CPU, cores, OS, versions), for the source.
        log: Called with progress lines.

    Raises:
        ConfigError: a name that is no plugin's codec.
    """
    owners = _owners(names)
    restore = set_threads(1)
    try:
        costs = calibrate_codecs(sizes, ratios, repeats, list(owners), min_time, log, False)
    finally:
        restore()
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    detail = (
        f"machine: {machine}; command: `{command}`; date: {today}; threads: 1; median of "
        f"{repeats} after a warm-up, standard-normal float32 vectors, sizes "
        f"{sorted(set(sizes))}, ratios {sorted(set(ratios))}, as psml bench calibrate times "
        "psml's own codecs; scaled to each device by its memcpy over the reference measured "
        "here" + ("; QUICK settings (tiny sizes, 1 repeat): for tests only" if quick else "")
    )
    written = []
    for name, owner in owners.items():
        path = cost_file(name)
        content: dict[str, Any] = {
            "codec": name,
            "plugin": owner.label,
            "codec_costs": {
                "source": {"kind": "measured", "detail": detail},
                "calibration": {
                    "sizes": sorted(set(sizes)),
                    "ratios": sorted(set(ratios)),
                    "repeats": repeats,
                    "threads": 1,
                    "pushes_per_aggregate": PUSHES,
                },
                "reference": costs["reference"],
                "codecs": {name: costs["codecs"][name]},
                "wrappers": {},
            },
        }
        plugin_cost_from_dict(content, path)  # the file is read back the same way
        header = (
            f"Cost table of codec {name!r} (plugin {owner.label}), measured by `{command}`.\n"
            "Do not edit by hand: re-run the command on an idle machine (docs/extending.md)."
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, device_yaml(content, header))
        written.append(path)
    return written
