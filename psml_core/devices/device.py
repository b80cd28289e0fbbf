"""Device profiles as data: ``config/devices/<name>.yaml``, each figure with its source.

A device file says what the sim backend charges to its clock on one device (schema:
``workflow/schemas/device.schema.yaml``):

* ``compute``: the sustained FLOP rate and fixed per-step cost of a gradient computation
  (:class:`~psml_core.devices.compute.ProfileCompute`);
* ``codec_costs``: the per-codec cost table (:class:`~psml_core.devices.codec_cost.CodecCostModel`):
  per operation, the measured seconds at each calibrated size (:class:`CostCurve`).

Every figure carries a :class:`Source`: ``measured`` on a named machine (``psml bench
calibrate`` writes the file), ``cited`` (a published figure and the arithmetic from it to the
number) or ``estimated`` (the assumption in words). Nothing here times anything: the simulator
reads the committed file, so the same file, config and seed give byte-identical metrics.
"""

from __future__ import annotations

import bisect
import hashlib
import math
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from psml_core.config import config_root, load_yaml, validate
from psml_core.errors import ConfigError

__all__ = [
    "OPS",
    "REPORT_OPS",
    "CodecCostEntry",
    "TIME_FLOOR_S",
    "CodecCostTable",
    "ComputeProfile",
    "CostCurve",
    "Device",
    "Source",
    "WrapperCost",
    "device_dir",
    "device_names",
    "device_from_dict",
    "load_device",
]

OPS: tuple[str, ...] = ("encode", "decode", "aggregate", "encode_down", "decode_down")
"""The operations every codec entry prices (see the schema's ``entry``)."""
REPORT_OPS: tuple[str, ...] = ("encode_report", "aggregate_report", "choose_block")
"""DFS's extra operations when a push carries a cost report (``choose_block``: the server's
choice of the next block size from a round's reports, once per round)."""

SOURCE_KINDS: tuple[str, ...] = ("measured", "cited", "estimated")

TIME_FLOOR_S = 1e-12
"""The smallest time a cost curve holds, seconds. A measurement of 0 (or below: a timer's
rounding) cannot be interpolated in log t, so ``psml bench calibrate`` writes it as this floor and
:class:`CostCurve` reads anything below it as this floor; a device file itself must hold positive
times. 1 ps is far below any timer's resolution, so a floored point only says "too fast to see"."""


@dataclass(frozen=True)
class Source:
    """Where a figure comes from.

    Attributes:
        kind: ``measured``, ``cited`` or ``estimated``.
        detail: Machine, command, date, torch version and threads (measured); the citation and
            the derivation (cited); the assumption in words (estimated).
    """

    kind: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        """The YAML/JSON form."""
        return {"kind": self.kind, "detail": self.detail}


@dataclass(frozen=True)
class CostCurve:
    """An operation's measured seconds at each calibrated size, and ``t(n)`` between them.

    ``t(n)`` is the linear interpolation of ``log t`` against ``log n`` between neighbouring
    calibrated sizes (exactly the stored time at a calibrated size); below the smallest size the
    smallest size's time (a fixed per-call cost dominates there); above the largest size the
    largest size's time scaled linearly, ``t(s_max) n / s_max``. Times below
    :data:`TIME_FLOOR_S` are read as the floor, so the logarithms always exist. Between two
    calibrated sizes ``t`` is monotone, and between their times, so a curve whose points rise
    rises everywhere.

    Attributes:
        sizes: The calibrated sizes (elements), strictly ascending, at least one.
        times: The measured seconds at each size (aligned with ``sizes``).
        spread: The largest relative spread of the timed repeats over the sizes, ``(max - min) /
            median`` (provenance only; None when not recorded).
    """

    sizes: tuple[int, ...]
    times: tuple[float, ...]
    spread: float | None = field(default=None, compare=False)
    _t: tuple[float, ...] = field(init=False, repr=False, compare=False)
    _log_n: tuple[float, ...] = field(init=False, repr=False, compare=False)
    _log_t: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.sizes or len(self.sizes) != len(self.times):
            raise ValueError(
                f"a cost curve needs one time per size, got {len(self.times)} times for "
                f"{len(self.sizes)} sizes"
            )
        if any(n <= 0 for n in self.sizes) or any(
            b <= a for a, b in zip(self.sizes[:-1], self.sizes[1:], strict=True)
        ):
            raise ValueError(f"cost curve sizes must be positive and ascending, got {self.sizes}")
        t = tuple(max(float(x), TIME_FLOOR_S) for x in self.times)  # NaN fails the loader first
        object.__setattr__(self, "_t", t)
        object.__setattr__(self, "_log_n", tuple(math.log(n) for n in self.sizes))
        object.__setattr__(self, "_log_t", tuple(math.log(x) for x in t))

    def at(self, n: float) -> float:
        """Seconds at ``n`` elements (see the class docstring)."""
        sizes, t = self.sizes, self._t
        if n <= sizes[0]:
            return t[0]
        if n >= sizes[-1]:
            return t[-1] if n == sizes[-1] else t[-1] * (n / sizes[-1])
        i = bisect.bisect_right(sizes, n) - 1  # sizes[i] <= n < sizes[i + 1]
        if n == sizes[i]:
            return t[i]
        ln, lt = self._log_n, self._log_t
        w = (math.log(n) - ln[i]) / (ln[i + 1] - ln[i])
        return math.exp(lt[i] + w * (lt[i + 1] - lt[i]))

    def as_dict(self) -> dict[str, Any]:
        """The YAML/JSON form (the sizes live once, in ``codec_costs.calibration.sizes``)."""
        out: dict[str, Any] = {"times": list(self.times)}
        if self.spread is not None:
            out["spread"] = self.spread
        return out


@dataclass(frozen=True)
class ComputeProfile:
    """A device's gradient-computation speed.

    Attributes:
        flops_per_s: Sustained FLOP/s of a training step (``Model.flops`` per second).
        overhead_s: Fixed cost of one gradient computation.
        source: Where the rate (and the overhead, unless ``overhead_source``) comes from.
        overhead_source: Where the overhead comes from, if not ``source``.
        fit: The calibration's points and residuals (measured profiles), for provenance.
    """

    flops_per_s: float
    overhead_s: float
    source: Source
    overhead_source: Source | None = None
    fit: dict[str, Any] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class CodecCostEntry:
    """One codec's costs at one calibrated ratio (None: ratio-independent).

    Attributes:
        ratio: The calibrated density, or None.
        ops: Operation name (:data:`OPS`, plus :data:`REPORT_OPS` for DFS) -> its cost curve.
        block_size: The calibrated block size, for a codec priced per block size (DFS); None
            when the codec's entries carry none.
    """

    ratio: float | None
    ops: dict[str, CostCurve]
    block_size: int | None = None


@dataclass(frozen=True)
class WrapperCost:
    """A codec wrapper's own work per encode.

    Attributes:
        curve: Its measured seconds per calibrated size.
        inner_decode: The wrapper also decodes the inner payload (error feedback's residual).
        note: How it was measured, when not plainly (e.g. a stand-in).
    """

    curve: CostCurve
    inner_decode: bool
    note: str = ""


@dataclass(frozen=True)
class CodecCostTable:
    """The per-codec cost table of a device.

    Attributes:
        source: Where the table comes from.
        sizes: The calibrated sizes every curve's times are aligned with.
        reference: A memcpy of n float32 measured in the same calibration.
        codecs: Codec name -> its entries, ascending ratio (one entry with ratio None when the
            codec's cost does not depend on a ratio).
        wrappers: Wrapper name -> its own cost per encode.
        calibration: Sizes, ratios, repeats and threads of the calibration.
    """

    source: Source
    sizes: tuple[int, ...]
    reference: CostCurve
    codecs: dict[str, tuple[CodecCostEntry, ...]]
    wrappers: dict[str, WrapperCost]
    calibration: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Device:
    """A device profile (``config/devices/<name>.yaml``).

    Attributes:
        name: The device name (the file's stem; ``compute.cost_profile`` in a config).
        path: The file it was read from.
        sha256: SHA-256 of the file's bytes (identifies the calibration in provenance).
        description: One line on the device.
        compute: Its gradient-computation speed.
        codec_costs: Its codec cost table.
    """

    name: str
    path: Path
    sha256: str
    description: str
    compute: ComputeProfile
    codec_costs: CodecCostTable

    def describe(self) -> dict[str, Any]:
        """The compute profile and the file's identity, for a run's provenance."""
        out: dict[str, Any] = {
            "cost_profile": self.name,
            "device_file": f"devices/{self.path.name}",
            "device_file_sha256": self.sha256,
            "flops_per_s": self.compute.flops_per_s,
            "overhead_s": self.compute.overhead_s,
            "source": self.compute.source.as_dict(),
            "codec_costs_source": self.codec_costs.source.as_dict(),
        }
        if self.compute.overhead_source is not None:
            out["overhead_source"] = self.compute.overhead_source.as_dict()
        return out


def device_dir(root: str | Path | None = None) -> Path:
    """The directory of the device files: ``<config root>/devices``."""
    return Path(root) / "devices" if root is not None else config_root() / "devices"


def device_names(root: str | Path | None = None) -> list[str]:
    """The names of the device files present, sorted."""
    d = device_dir(root)
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


def _source(data: dict[str, Any]) -> Source:
    return Source(str(data["kind"]), str(data["detail"]))


def _curve(data: dict[str, Any], sizes: tuple[int, ...], where: str, source: str) -> CostCurve:
    """The curve of ``data`` (``{times, spread?}``), checked: one positive time per size."""
    times = [float(t) for t in data["times"]]
    if len(times) != len(sizes):
        raise ConfigError(
            f"invalid {source}: key {where + '.times'!r}: expected one time per calibrated size "
            f"({len(sizes)}, codec_costs.calibration.sizes), got {len(times)}"
        )
    for i, t in enumerate(times):
        if not (math.isfinite(t) and t > 0):
            raise ConfigError(
                f"invalid {source}: key '{where}.times[{i}]': expected a positive finite number of "
                f"seconds, got {t}"
            )
    spread = data.get("spread")
    return CostCurve(sizes, tuple(times), None if spread is None else float(spread))


def _sizes(cal: dict[str, Any], source: str) -> tuple[int, ...]:
    sizes = [int(n) for n in cal["sizes"]]
    if any(b <= a for a, b in zip(sizes[:-1], sizes[1:], strict=True)):
        raise ConfigError(
            f"invalid {source}: key 'codec_costs.calibration.sizes': the sizes must be distinct "
            f"and ascending, got {sizes}"
        )
    return tuple(sizes)


def _check_finite(data: Any, where: str, source: str) -> None:
    """ConfigError naming the key of the first NaN or infinite number (YAML allows ``.nan``)."""
    if isinstance(data, dict):
        for k, v in data.items():
            _check_finite(v, f"{where}.{k}" if where else str(k), source)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            _check_finite(v, f"{where}[{i}]", source)
    elif isinstance(data, float) and not math.isfinite(data):
        raise ConfigError(f"invalid {source}: key {where!r}: expected a finite number, got {data}")


def _entries(
    name: str, items: list[dict[str, Any]], sizes: tuple[int, ...], source: str
) -> tuple[CodecCostEntry, ...]:
    where = f"codec_costs.codecs.{name}"
    blocks = [it.get("block_size") for it in items]
    if None in blocks and any(b is not None for b in blocks):
        raise ConfigError(
            f"invalid {source}: key {where!r}: either every entry has a block_size or none has"
        )
    groups: dict[Any, list[Any]] = {}
    for b, it in zip(blocks, items, strict=True):
        groups.setdefault(b, []).append(it["ratio"])
    runs = [b for i, b in enumerate(blocks) if i == 0 or blocks[i - 1] != b]
    if runs != sorted(groups, key=lambda b: b or 0) or len(runs) != len(groups):
        raise ConfigError(
            f"invalid {source}: key {where!r}: the block sizes must ascend, each block size's "
            f"entries together, got {blocks}"
        )
    for b, ratios in groups.items():
        at = "" if b is None else f" at block_size {b}"
        if None in ratios and len(ratios) != 1:
            raise ConfigError(
                f"invalid {source}: key {where!r}: a ratio-independent codec (ratio null) has "
                f"exactly one entry{at}, got {len(ratios)}"
            )
        if None not in ratios and ratios != sorted(set(ratios)):
            raise ConfigError(
                f"invalid {source}: key {where!r}: the ratios must be distinct and ascending"
                f"{at}, got {ratios}"
            )
    out = []
    for i, it in enumerate(items):
        ops = {
            op: _curve(v, sizes, f"{where}[{i}].{op}", source)
            for op, v in it.items()
            if op not in ("ratio", "block_size")
        }
        ratio = None if it["ratio"] is None else float(it["ratio"])
        block = None if it.get("block_size") is None else int(it["block_size"])
        out.append(CodecCostEntry(ratio, ops, block))
    return tuple(out)


def device_from_dict(
    data: Any, name: str, *, source: str, path: Path | None = None, sha256: str = ""
) -> Device:
    """Validate a device file's content and build the :class:`Device`.

    Args:
        data: The parsed YAML.
        name: The device name.
        source: Names the file in error messages.
        path: The file (default ``<name>.yaml``).
        sha256: SHA-256 of the file's bytes.

    Raises:
        ConfigError: naming ``source`` and the key, for anything the schema rejects, a
            non-finite number, calibrated sizes that do not ascend, a cost curve without exactly
            one positive time per calibrated size, or a codec whose ratios are not ascending.
    """
    data = validate(data, "device", source=source)
    _check_finite(data, "", source)
    c = data["compute"]
    compute = ComputeProfile(
        flops_per_s=float(c["flops_per_s"]),
        overhead_s=float(c["overhead_s"]),
        source=_source(c["source"]),
        overhead_source=_source(c["overhead_source"]) if "overhead_source" in c else None,
        fit=c.get("fit"),
    )
    cc = data["codec_costs"]
    sizes = _sizes(cc["calibration"], source)
    table = CodecCostTable(
        source=_source(cc["source"]),
        sizes=sizes,
        reference=_curve(cc["reference"], sizes, "codec_costs.reference", source),
        codecs={k: _entries(k, v, sizes, source) for k, v in sorted(cc["codecs"].items())},
        wrappers={
            k: WrapperCost(
                _curve(v, sizes, f"codec_costs.wrappers.{k}", source),
                bool(v["inner_decode"]),
                str(v.get("note", "")),
            )
            for k, v in sorted(cc["wrappers"].items())
        },
        calibration=dict(cc["calibration"]),
    )
    return Device(
        name=name,
        path=path if path is not None else Path(f"{name}.yaml"),
        sha256=sha256,
        description=str(data.get("description", "")),
        compute=compute,
        codec_costs=table,
    )


@cache
def _load(path: Path, name: str, stamp: tuple[int, int]) -> Device:
    """Read and build a device file (cached by path, modification time and size)."""
    raw = path.read_bytes()
    data = load_yaml(path, what="device file")
    return device_from_dict(
        data,
        name,
        source=f"device file {str(path)!r}",
        path=path,
        sha256=hashlib.sha256(raw).hexdigest(),
    )


def load_device(name: str, root: str | Path | None = None) -> Device:
    """The device profile ``<root>/devices/<name>.yaml`` (root: :func:`config_root`).

    A file is read once per process unless it changes (cached by path, modification time and
    size).

    Raises:
        ConfigError: an unknown name (listing the known ones), or a malformed file (naming
            the file and the key).
    """
    d = device_dir(root)
    path = d / f"{name}.yaml"
    if not isinstance(name, str) or not name or "/" in name or not path.is_file():
        known = device_names(root)
        raise ConfigError(
            f"key 'compute.cost_profile': {name!r} is not allowed; allowed values: "
            + (", ".join(known) if known else f"none (no device files in {str(d)!r})")
        )
    path = path.resolve()
    st = path.stat()
    return _load(path, name, (st.st_mtime_ns, st.st_size))
