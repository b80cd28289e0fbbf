"""What compression costs on the simulated clock: a per-codec cost model read from a device file.

Encoding, decoding, selection and aggregation take time; charging nothing for them makes every
compressor's speed-up an upper bound. :class:`CodecCostModel` prices each operation from the
device's cost table (``codec_costs`` in ``config/devices/<name>.yaml``, written by ``psml bench
calibrate``): per codec and operation, the measured median seconds at each calibrated size
(``times``, aligned with ``codec_costs.calibration.sizes``), at a list of calibrated ratios for
codecs whose cost depends on the density. It is a pure function of the table — it never times
anything — so the sim backend stays bit-reproducible.

Operations (the table's ``ops``), as the engine sees them:

=================  ============================================================  ==============
method             what                                                          table op
=================  ============================================================  ==============
``encode_s``       a worker's ``codec.encode`` of its n-vector (+ wrappers)      encode
``decode_s``       the server's decode of one push, added into the sum          aggregate
``encode_down_s``  the server's ``ServerCodec.encode_down`` of the aggregate     encode_down
                   (``pull=True``: a ``codec_down``'s ``encode`` of a pull)      (encode)
``decode_down_s``  a worker's ``ServerCodec.decode_down`` of the broadcast       decode_down
                   (``pull=True``: a ``codec_down``'s ``decode``)                (decode)
``round_s``        the server's once-per-round work (DFS: choosing the next B)  choose_block
=================  ============================================================  ==============

Rules:

* **Size.** ``t(n)`` is the stored time at a calibrated size, and between two calibrated sizes
  the linear interpolation of ``log t`` against ``log n`` (a power law through the two points;
  it is monotone when they are). Below the smallest calibrated size it is that size's time (a
  fixed per-call cost dominates there); above the largest it grows linearly,
  ``t(s_max) n / s_max``. A stored time of 0 or less would have no logarithm: times below
  :data:`~psml_core.devices.device.TIME_FLOOR_S` (1e-12 s) are read as that floor (the calibration
  writes such a measurement as the floor, and the loader rejects non-positive times). See
  :class:`~psml_core.devices.device.CostCurve`.
* **Ratio.** The density looked up is, in order: the ``ratio`` argument (e.g. the density a
  threshold-style codec actually sent, known from its payload), the codec's own ``ratio``
  parameter when set, else ``ctx.ratio``. Between calibrated ratios ``log t(n)`` is
  interpolated linearly in ``log(ratio)``; outside, the nearest calibrated ratio's ``t(n)`` is
  used (clamped). Ratio-independent codecs have a single entry (``ratio: null``).
* **Wrappers.** A codec with an ``inner`` codec attribute is a wrapper (``ErrorFeedback``;
  DGC-style momentum correction). Its name is its class's ``wrapper_name`` attribute, else the
  class name in snake case (``ErrorFeedback`` -> ``error_feedback``). ``encode_s`` adds the
  table's ``wrappers.<name>`` curve, plus the inner codec's ``decode`` when the wrapper decodes
  what it sent (``inner_decode``, error feedback's residual update). Server-side operations are
  the inner codec's (a wrapper reuses its server).
* **DFS cost reports.** When the codec's ``reports_due(ctx)`` is true (DFS, dynamic, with
  ``ctx.extra["dfs_report"]``) the encode evaluates every candidate block size: ``encode_s``
  uses ``encode_report`` and ``decode_s`` ``aggregate_report``, and the round's choice of the
  next block size from the reports is ``round_s`` (``choose_block``), once per round: it does
  not grow with the number of pushes.
* **Block size.** DFS's cost depends on its block size B as much as on its ratio: ranking
  n / B blocks costs more the smaller B is (at 2^20 elements an encode at B = 4 costs about
  seven times one at B = 256 on the project's VM). Its entries carry a ``block_size`` each,
  and every operation is priced at the step's B (``ctx.extra["dfs_block_size"]``, else the
  codec's ``block_size``), log t interpolated in log B between the calibrated block sizes. A
  report is calibrated as evaluating B/2, B and 2B.
* **kv** (PS-lite key/value, ``KVCodec.encode_keys``): ``n`` is the number of keys in the
  message.
* **Plugins.** A codec a plugin package registers is priced from its own cost file, measured
  by ``psml bench calibrate --plugin <codec>`` and scaled to the device by the memcpy ratio
  (:mod:`psml_core.devices.plugin_costs`).
* A codec or wrapper missing from the table is a ConfigError naming the device file and the
  calibration command that adds it.
"""

from __future__ import annotations

import math
import re
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from psml_core.codecs.base import Codec, CodecContext
from psml_core.devices.device import CodecCostEntry, CodecCostTable, Device, load_device
from psml_core.devices.plugin_costs import plugin_cost, scaled_entries
from psml_core.errors import ConfigError
from psml_core.plugins import block_origin, calibrate_command, cost_file

__all__ = ["CodecCostModel", "unwrap", "wrapper_name"]

_MEMO_SIZE = 4096  # op_s answers kept per model


def wrapper_name(codec: Codec | type[Codec]) -> str:
    """A wrapper's table name: its class's ``wrapper_name``, else the class name in snake case.

    Args:
        codec: The wrapper, or its class.
    """
    cls = codec if isinstance(codec, type) else type(codec)
    explicit = getattr(cls, "wrapper_name", None)  # on the class: no __getattr__ relay
    if isinstance(explicit, str) and explicit:
        return explicit
    return re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()


def unwrap(codec: Codec) -> tuple[list[str], Codec]:
    """``(wrapper names, outermost first; the innermost codec)``.

    A wrapper is a codec holding another in its ``inner`` attribute (looked up in the
    instance's own attributes, so a wrapper's attribute relay to its inner codec cannot make a
    plain codec look wrapped). A codec's ``inner`` is set once, at construction, so the answer
    is kept per live codec object (weakly: a finished run's codecs are not held): the
    simulator prices every message and asks this several times each.
    """
    key = id(codec)
    hit = _UNWRAPPED.get(key)
    if hit is not None and hit[0]() is codec:
        return list(hit[1]), codec if hit[2] is None else hit[2]
    names, base = _unwrap(codec)
    try:
        ref = weakref.ref(codec, lambda _, k=key: _UNWRAPPED.pop(k, None))
    except TypeError:  # a plugin codec without weak references: not kept
        return names, base
    # The innermost codec is held strongly only when it is another object, which the wrapper
    # holds anyway; the entry goes when the wrapper does.
    _UNWRAPPED[key] = (ref, tuple(names), None if base is codec else base)
    return names, base


# id(codec) -> (weak codec, wrapper names, innermost codec or None when it is the codec)
_UNWRAPPED: dict[int, tuple[Any, tuple[str, ...], Codec | None]] = {}


def _unwrap(codec: Codec) -> tuple[list[str], Codec]:
    names: list[str] = []
    c = codec
    while True:
        inner = vars(c).get("inner") if hasattr(c, "__dict__") else None
        if not isinstance(inner, Codec):
            return names, c
        names.append(wrapper_name(c))
        c = inner


class CodecCostModel:
    """Seconds of each codec operation on one device (see the module docstring).

    Args:
        table: The device's codec cost table.
        cost_profile: The cost profile's name, the device file's stem (for messages).
        path: The device file (for messages and provenance).
    """

    def __init__(
        self, table: CodecCostTable, cost_profile: str = "", path: str | Path = ""
    ) -> None:
        self.table = table
        self.cost_profile = cost_profile
        self.path = str(path)
        self._plugins: dict[str, tuple[CodecCostEntry, ...] | None] = {}
        self._blocks: dict[str, dict[int, tuple[CodecCostEntry, ...]]] = {}
        # op_s is a pure function of the table: a simulation asks the same few questions
        # thousands of times (every push of a dense vector is one). Bounded: a sparse codec's
        # density varies continuously.
        self._memo: dict[tuple[Any, ...], float] = {}

    @classmethod
    def for_device(cls, name: str, root: str | Path | None = None) -> CodecCostModel:
        """The cost model of ``config/devices/<name>.yaml`` (see :func:`load_device`)."""
        return cls.from_device(load_device(name, root))

    @classmethod
    def from_device(cls, device: Device) -> CodecCostModel:
        """The cost model of a loaded device profile."""
        return cls(device.codec_costs, device.name, device.path)

    # ------------------------------------------------------------------ the engine's view

    def encode_s(
        self, codec: Codec, n: int, ctx: CodecContext, *, ratio: float | None = None
    ) -> float:
        """A worker's encode of an n-element vector, wrappers and DFS's cost report included.

        Args:
            codec: The worker's codec (possibly wrapped).
            n: Elements of the vector (kv: keys in the message).
            ctx: The step's codec context (ratio, ``extra``).
            ratio: The density to price instead of the codec's ``ratio`` or ``ctx.ratio``.
        """
        names, base = unwrap(codec)
        r = self._ratio(base, ctx, ratio)
        op = "encode_report" if self._report(base, ctx) else "encode"
        b = self._block(base, ctx)
        total = self.op_s(base.name, op, n, r, b)
        for w in names:
            cost = self.table.wrappers.get(w)
            if cost is None:
                raise self._missing(f"wrapper {w!r}")
            total += cost.curve.at(n)
            if cost.inner_decode:
                total += self.op_s(base.name, "decode", n, r, b)
        return total

    def decode_s(
        self, codec: Codec, n: int, ctx: CodecContext, *, ratio: float | None = None
    ) -> float:
        """The server's decode of one push, including adding it into the sum (per push)."""
        _, base = unwrap(codec)
        op = "aggregate_report" if self._report(base, ctx) else "aggregate"
        return self.op_s(base.name, op, n, self._ratio(base, ctx, ratio), self._block(base, ctx))

    def round_s(self, codec: Codec, n: int, ctx: CodecContext) -> float:
        """The server's once-per-round work beyond its per-push decodes and its encode down.

        DFS with cost reports chooses the next block size from the round's reports
        (``choose_block``), once however many workers pushed; every other codec's round costs
        only its pushes and its encode down (0 here).
        """
        _, base = unwrap(codec)
        if not self._report(base, ctx):
            return 0.0
        return self.op_s(
            base.name, "choose_block", n, self._ratio(base, ctx, None), self._block(base, ctx)
        )

    def encode_down_s(
        self,
        codec: Codec,
        n: int,
        ctx: CodecContext,
        *,
        ratio: float | None = None,
        pull: bool = False,
    ) -> float:
        """The server's encode of what it sends down.

        Args:
            codec: The up codec whose server encodes the aggregate (``pull=False``), or the
                ``codec_down`` that encodes a params/delta pull (``pull=True``).
            n: Elements of the vector.
            ctx: The step's codec context.
            ratio: The density to price instead of the codec's ``ratio`` or ``ctx.ratio``.
            pull: Price ``codec.encode`` (a codec_down) instead of its server's
                ``encode_down``.
        """
        if pull:
            return self.encode_s(codec, n, ctx, ratio=ratio)
        _, base = unwrap(codec)
        r = self._ratio(base, ctx, ratio)
        return self.op_s(base.name, "encode_down", n, r, self._block(base, ctx))

    def decode_down_s(
        self,
        codec: Codec,
        n: int,
        ctx: CodecContext,
        *,
        ratio: float | None = None,
        pull: bool = False,
    ) -> float:
        """A worker's decode of what it receives (``pull=True``: a codec_down's ``decode``)."""
        _, base = unwrap(codec)
        op = "decode" if pull else "decode_down"
        return self.op_s(base.name, op, n, self._ratio(base, ctx, ratio), self._block(base, ctx))

    # ------------------------------------------------------------------ the table

    def op_s(
        self, name: str, op: str, n: int, ratio: float | None = None, block_size: int | None = None
    ) -> float:
        """Seconds of operation ``op`` of codec ``name`` on ``n`` elements at density ``ratio``.

        A codec calibrated per block size (DFS) is priced at ``block_size``: log t interpolated
        in log B between the calibrated block sizes, clamped outside them (None: the largest,
        DFS's default B).

        Raises:
            ConfigError: the codec, or this operation of it, is not in the table.
            ValueError: a negative ``n``.
        """
        key = (name, op, n, ratio, block_size)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        seconds = self._op_s(name, op, n, ratio, block_size)
        if len(self._memo) >= _MEMO_SIZE:
            self._memo.clear()
        self._memo[key] = seconds
        return seconds

    def _op_s(
        self, name: str, op: str, n: int, ratio: float | None, block_size: int | None
    ) -> float:
        if n < 0:
            raise ValueError(f"a vector of {n} elements cannot be priced")
        entries = self.table.codecs.get(name) or self._plugin_entries(name)
        if entries is None:
            raise self._missing(f"codec {name!r}", name)
        if any(op not in e.ops for e in entries):
            raise self._missing(f"operation {op!r} of codec {name!r}")
        if entries[0].block_size is None:
            return self._at_ratio(entries, op, n, ratio)
        groups = self._by_block(name, entries)
        blocks = list(groups)  # ascending (the loader checks)
        b = float(block_size) if block_size else float(blocks[-1])
        if b <= blocks[0] or b >= blocks[-1]:
            edge = blocks[0] if b <= blocks[0] else blocks[-1]
            return self._at_ratio(groups[edge], op, n, ratio)
        hi = next(x for x in blocks if x >= b)
        lo = blocks[blocks.index(hi) - 1] if hi > b else hi
        t_hi = self._at_ratio(groups[hi], op, n, ratio)
        if lo == hi:
            return t_hi
        t_lo = self._at_ratio(groups[lo], op, n, ratio)
        w = (math.log(b) - math.log(lo)) / (math.log(hi) - math.log(lo))
        return math.exp(math.log(t_lo) + w * (math.log(t_hi) - math.log(t_lo)))

    def _by_block(
        self, name: str, entries: tuple[CodecCostEntry, ...]
    ) -> dict[int, tuple[CodecCostEntry, ...]]:
        """A block-size-keyed codec's entries per block size (grouped once per codec)."""
        if name not in self._blocks:
            groups: dict[int, list[CodecCostEntry]] = {}
            for e in entries:
                assert e.block_size is not None
                groups.setdefault(e.block_size, []).append(e)
            self._blocks[name] = {b: tuple(g) for b, g in groups.items()}
        return self._blocks[name]

    def _at_ratio(
        self, entries: tuple[CodecCostEntry, ...], op: str, n: int, ratio: float | None
    ) -> float:
        """``op`` at ``ratio`` among one block size's entries (log t linear in log ratio)."""
        if len(entries) == 1 or entries[0].ratio is None:
            return entries[0].ops[op].at(n)
        r = ratio if ratio is not None and math.isfinite(ratio) else 1.0
        lo, hi = self._bracket(entries, r)
        t_lo = lo.ops[op].at(n)
        if lo is hi:
            return t_lo
        assert lo.ratio is not None and hi.ratio is not None
        t_hi = hi.ops[op].at(n)  # both > 0: a curve's times are floored at TIME_FLOOR_S
        w = (math.log(r) - math.log(lo.ratio)) / (math.log(hi.ratio) - math.log(lo.ratio))
        return math.exp(math.log(t_lo) + w * (math.log(t_hi) - math.log(t_lo)))

    def describe(self, codecs: Iterable[str] = ()) -> dict[str, Any]:
        """The table's identity and source, for a run's provenance.

        Args:
            codecs: The run's codecs; those priced from a plugin's cost file add its identity
                under ``plugin_costs``.
        """
        out: dict[str, Any] = {
            "cost_profile": self.cost_profile,
            "device_file": f"devices/{Path(self.path).name}" if self.path else "",
            "source": self.table.source.as_dict(),
        }
        plugins = {
            c: cost.describe()
            for c in sorted(set(codecs))
            if c not in self.table.codecs and (cost := plugin_cost(c)) is not None
        }
        if plugins:
            out["plugin_costs"] = plugins
        return out

    def _plugin_entries(self, name: str) -> tuple[CodecCostEntry, ...] | None:
        """A plugin codec's entries on this device (:mod:`psml_core.devices.plugin_costs`)."""
        if name not in self._plugins:
            cost = plugin_cost(name)
            self._plugins[name] = None if cost is None else scaled_entries(cost, self.table)
        return self._plugins[name]

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _bracket(
        entries: tuple[CodecCostEntry, ...], r: float
    ) -> tuple[CodecCostEntry, CodecCostEntry]:
        """The calibrated entries around ``r`` (the same entry twice when clamped or exact)."""
        first, last = entries[0], entries[-1]
        assert first.ratio is not None and last.ratio is not None
        if r <= first.ratio:
            return first, first
        if r >= last.ratio:
            return last, last
        for lo, hi in zip(entries[:-1], entries[1:], strict=True):
            assert lo.ratio is not None and hi.ratio is not None
            if r == lo.ratio:
                return lo, lo
            if lo.ratio < r < hi.ratio:
                return lo, hi
        return last, last  # r == last.ratio (handled above); kept for the type checker

    @staticmethod
    def _ratio(base: Codec, ctx: CodecContext, ratio: float | None) -> float:
        if ratio is not None:
            return float(ratio)
        own = getattr(base, "ratio", None)
        if isinstance(own, int | float) and not isinstance(own, bool):
            return float(own)
        return float(ctx.ratio)

    @staticmethod
    def _block(base: Codec, ctx: CodecContext) -> int | None:
        """The block size the step's operations use: DFS's published B, else the codec's."""
        b = ctx.extra.get("dfs_block_size") if ctx.extra else None
        if b is None:
            b = getattr(base, "block_size", None)
        return int(b) if isinstance(b, int | float) and not isinstance(b, bool) and b > 0 else None

    @staticmethod
    def _report(base: Codec, ctx: CodecContext) -> bool:
        due = getattr(base, "reports_due", None)
        return bool(due(ctx)) if callable(due) else False

    def _missing(self, what: str, codec: str | None = None) -> ConfigError:
        where = self.path or f"config/devices/{self.cost_profile}.yaml"
        dev = self.cost_profile or Path(where).stem
        owner = block_origin("codec", codec) if codec else None
        if owner is not None:
            return ConfigError(
                f"codec {codec!r} (plugin {owner.label}) has no cost table: device file "
                f"{where!r} prices psml's own codecs, and {str(cost_file(codec))!r} does not "
                f"exist; measure it on this machine with `{calibrate_command([codec])}`, or "
                "set compute.codec_costs: false (codec work then takes 0 s)"
            )
        return ConfigError(
            f"device file {where!r} has no codec cost for {what}; calibrate it with "
            f"`psml bench calibrate --cost-profile {dev} --out {where}` (or add the entry)"
        )
