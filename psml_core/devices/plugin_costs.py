"""The cost of a plugin's codec on any device: measured here, scaled by the devices' memcpy.

psml's device files (``config/devices/<device>.yaml``) price psml's own codecs. A codec a plugin
package registers (:mod:`psml_core.plugins`) is in none of them; ``psml bench calibrate --plugin
<codec>`` measures it on the machine the workflow runs on into ``config/devices/plugins/
<codec>.yaml`` (:func:`psml_core.plugins.cost_file`), with a memcpy of the same vectors timed in
the same calibration. Its time on a device is then

    t_device(op, n) = t_here(op, n) * memcpy_device(n) / memcpy_here(n)

at each size the plugin was calibrated at, where ``memcpy_device`` is the device file's own
``reference`` curve. That is the rule the GPU files' estimates follow (an operation keeps its
time relative to a memcpy of the same vector), so a plugin codec measured on another machine
than the device file is priced on the device's scale, not on this machine's. The scaled curves
then follow :class:`~psml_core.devices.device.CostCurve`'s interpolation like any entry.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from psml_core.config import load_yaml, validate
from psml_core.config.schema import StrictValidator, first_error, format_error, read_schema
from psml_core.devices.device import (
    CodecCostEntry,
    CodecCostTable,
    CostCurve,
    Source,
    _curve,
    _entries,
    _sizes,
)
from psml_core.errors import ConfigError
from psml_core.plugins import cost_file

__all__ = ["PluginCost", "plugin_cost", "plugin_cost_from_dict", "scaled_entries"]


@dataclass(frozen=True)
class PluginCost:
    """One plugin codec's cost file as measured.

    Attributes:
        codec: The codec's name.
        plugin: ``"<package> <version>"`` it was measured with.
        path: The file.
        sha256: SHA-256 of the file's bytes (a run's provenance).
        source: How it was measured.
        reference: The memcpy measured in the same calibration.
        entries: The codec's entries as measured here (one per calibrated ratio, or one).
    """

    codec: str
    plugin: str
    path: Path
    sha256: str
    source: Source
    reference: CostCurve
    entries: tuple[CodecCostEntry, ...]

    def describe(self) -> dict[str, Any]:
        """The file's identity and source, for a run's provenance."""
        return {
            "file": str(self.path),
            "sha256": self.sha256,
            "plugin": self.plugin,
            "source": self.source.as_dict(),
        }


def _check_codec_costs(data: Any, source: str) -> None:
    """``codec_costs`` against the device schema's own definition of it."""
    device = read_schema("device")
    schema = {"$defs": device["$defs"], **device["properties"]["codec_costs"]}
    err = first_error(StrictValidator(schema), data)
    if err is not None:
        raise ConfigError(f"invalid {source}: codec_costs: {format_error(err)}")


def plugin_cost_from_dict(data: Any, path: Path, *, sha256: str = "") -> PluginCost:
    """Validate a plugin cost file's content and build the :class:`PluginCost`.

    Raises:
        ConfigError: naming the file and the key, for anything the schemas reject, a codec that
            is not the file's stem, a table with other codecs or wrappers, or a curve without
            one positive time per calibrated size.
    """
    source = f"plugin cost file {str(path)!r}"
    data = validate(data, "plugin_costs", source=source)
    codec = data["codec"]
    if codec != path.stem:
        raise ConfigError(f"invalid {source}: codec {codec!r} must match the file name")
    cc = data["codec_costs"]
    _check_codec_costs(cc, source)
    if set(cc["codecs"]) != {codec} or cc["wrappers"]:
        raise ConfigError(
            f"invalid {source}: codec_costs must price codec {codec!r} only, without wrappers; "
            f"re-run `psml bench calibrate --plugin {codec}`"
        )
    sizes = _sizes(cc["calibration"], source)
    return PluginCost(
        codec=codec,
        plugin=str(data["plugin"]),
        path=path,
        sha256=sha256,
        source=Source(str(cc["source"]["kind"]), str(cc["source"]["detail"])),
        reference=_curve(cc["reference"], sizes, "codec_costs.reference", source),
        entries=_entries(codec, cc["codecs"][codec], sizes, source),
    )


@cache
def _read(path: Path, stamp: tuple[int, int]) -> PluginCost:
    """Read and build a cost file (cached by path, modification time and size)."""
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    return plugin_cost_from_dict(load_yaml(path, "plugin cost file"), path, sha256=sha)


def plugin_cost(codec: str) -> PluginCost | None:
    """The cost file of plugin codec ``codec`` (:func:`~psml_core.plugins.cost_file`), if any.

    Raises:
        ConfigError: the file exists but is malformed (naming it and the key).
    """
    path = cost_file(codec)
    if not path.is_file():
        return None
    path = path.resolve()
    st = path.stat()
    return _read(path, (st.st_mtime_ns, st.st_size))


def scaled_entries(cost: PluginCost, table: CodecCostTable) -> tuple[CodecCostEntry, ...]:
    """``cost``'s entries on the device of ``table``: each time times the memcpy ratio.

    At each calibrated size ``n`` of the plugin's file, a time becomes ``t * table.reference(n)
    / cost.reference(n)`` (the device's memcpy interpolated at ``n``).
    """
    factors = [table.reference.at(n) / cost.reference.at(n) for n in cost.reference.sizes]

    def scaled(curve: CostCurve) -> CostCurve:
        times = tuple(t * f for t, f in zip(curve.times, factors, strict=True))
        return CostCurve(curve.sizes, times, curve.spread)

    return tuple(
        CodecCostEntry(e.ratio, {op: scaled(c) for op, c in e.ops.items()}, e.block_size)
        for e in cost.entries
    )
