"""Codec calibration: every codec's encode, decode and aggregation timed over sizes and ratios."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from psml_core.bench.codecs import SETUPS, Setup
from psml_core.bench.timing import cost_curve, time_call
from psml_core.codecs import CODECS, Codec, CodecContext, Payload, make_codec
from psml_core.config import BlockSpec
from psml_core.devices.device import OPS, REPORT_OPS, TIME_FLOOR_S
from psml_core.errors import ConfigError
from psml_core.heap import configure_heap

__all__ = [
    "DEFAULT_RATIOS",
    "BLOCK_SIZES",
    "DFS_BLOCK_SIZES",
    "OMNIREDUCE_BLOCK_SIZES",
    "DEFAULT_SIZES",
    "PUSHES",
    "SEED",
    "calibrate_codecs",
    "dfs_params",
]

DEFAULT_SIZES: tuple[int, ...] = (2**10, 2**12, 2**15, 2**18, 2**20, 2**22, 2**24)
"""Vector lengths timed: 4 KB to 64 MB of float32, from cache-resident to DRAM-bound (the cost
model interpolates between them in log-log, so the cache cliff is followed point by point)."""
DEFAULT_RATIOS: tuple[float, ...] = (0.001, 0.01, 0.1, 0.3, 1.0)
"""Densities timed: the suite's top-k ratios, DFS's 0.3 and DC2's dense start (1.0)."""
PUSHES = 4
DFS_BLOCK_SIZES: tuple[int, ...] = (2, 4, 8, 32, 256)
"""DFS's calibrated block sizes: the suite's dynamic range (2, 4, 8), a middle point and DFS's
default 256. Ranking n / B blocks costs more the smaller B is, so one block size cannot price
the others."""
"""Pushes per timed aggregate (the per-push time is the aggregate's over this)."""
OMNIREDUCE_BLOCK_SIZES: tuple[int, ...] = (2, 4, 8, 32, 256)
"""OmniReduce's calibrated block sizes: its block size is a free parameter that the tuning
chooses (the recipes' ``tune`` blocks: 2 to 256), and checking n / B blocks for a non-zero
costs more the smaller B is (at 285,000 elements an encode at B = 2 takes about 14 times one at
B = 256 on the project's VM), so one block size cannot price the others."""
BLOCK_SIZES: dict[str, tuple[int, ...]] = {
    "dfs": DFS_BLOCK_SIZES,
    "omnireduce": OMNIREDUCE_BLOCK_SIZES,
}
"""The codecs calibrated per block size, and their block sizes."""
SEED = 0


class _NullCodec(Codec):
    """A codec that costs (almost) nothing: the inner codec of a timed wrapper.

    ``encode`` returns a payload made in advance; ``decode`` returns a vector made in advance
    and counts its calls, which tells whether the wrapper decodes what it sent.
    """

    name = "null"

    def __init__(self, n: int) -> None:
        self.payload = Payload("null", n, b"")
        self.dense = np.zeros(n, dtype=np.float32)
        self.decodes = 0

    def encode(self, x: np.ndarray, ctx: CodecContext) -> Payload:
        """The payload made in advance."""
        return self.payload

    def decode(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """The vector made in advance (counted)."""
        self.decodes += 1
        return self.dense


def _wrapper_factories() -> dict[str, Callable[[Codec], Codec]]:
    """Every wrapper class of the library, by table name.

    A wrapper is a Codec subclass defined in ``psml_core``, not registered as a codec, whose
    constructor takes ``inner`` and needs nothing else (its other parameters have defaults).
    """
    import inspect

    import psml_core.codecs  # noqa: F401  - registers every codec and imports the wrappers
    from psml_core.devices.codec_cost import wrapper_name

    registered = {CODECS.get(n) for n in CODECS.names()}
    found: dict[str, Callable[[Codec], Codec]] = {}
    stack = list(Codec.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls in registered or cls is _NullCodec or inspect.isabstract(cls):
            continue
        if not cls.__module__.startswith("psml_core."):  # the library's wrappers only
            continue
        try:
            params = inspect.signature(cls.__init__).parameters
        except (TypeError, ValueError):
            continue
        others = [
            p
            for k, p in params.items()
            if k not in ("self", "inner")
            and p.default is inspect.Parameter.empty
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        if "inner" in params and not others:
            found[wrapper_name(cls)] = cls
    return dict(sorted(found.items()))


def _momentum_standin(n: int) -> Callable[[np.ndarray], None]:
    """DGC's momentum correction, as vector ops, until its wrapper exists (see the note)."""
    u = np.zeros(n, dtype=np.float32)
    v = np.zeros(n, dtype=np.float32)

    def step(x: np.ndarray) -> None:
        u.__imul__(np.float32(0.9))
        u.__iadd__(x)  # u <- m u + g
        v.__iadd__(u)  # v <- v + u

    return step


def _time_wrappers(
    sizes: Sequence[int], repeats: int, min_time: float, log: Callable[[str], None] | None
) -> dict[str, dict[str, Any]]:
    factories = _wrapper_factories()
    ctx = CodecContext(step=100, ratio=1.0, seed=1, lr=0.1)
    points: dict[str, list[tuple[float, float]]] = {}
    decodes: dict[str, bool] = {}
    for name, make in factories.items():
        for n in sizes:
            x = np.random.default_rng(SEED).standard_normal(n, dtype=np.float32)
            null = _NullCodec(n)
            wrapped = make(null)
            timed = time_call(lambda w=wrapped, x=x: w.encode(x, ctx), repeats, min_time)
            null.decodes = 0
            wrapped.encode(x, ctx)
            decodes[name] = null.decodes > 0  # observed: does the wrapper decode what it sent?
            points.setdefault(name, []).append(timed)
    out: dict[str, dict[str, Any]] = {}
    for name, pts in points.items():
        out[name] = {**cost_curve(pts), "inner_decode": decodes[name]}
        if log:
            ms = ", ".join(f"{1e3 * t:.3g}" for t, _ in pts)
            log(f"wrapper {name}: {ms} ms at sizes {list(sizes)}")
    if "momentum_correction" not in out:
        pts = []
        for n in sizes:
            x = np.random.default_rng(SEED).standard_normal(n, dtype=np.float32)
            step = _momentum_standin(n)
            pts.append(time_call(lambda s=step, x=x: s(x), repeats, min_time))
        out["momentum_correction"] = {
            **cost_curve(pts),
            "inner_decode": False,
            "note": (
                "stand-in: no momentum_correction wrapper class was found, so DGC's two vector "
                "ops per encode (u <- 0.9 u + g; v <- v + u, float32, in place) were timed; "
                "re-run the calibration once the wrapper exists"
            ),
        }
    return out


def _codec_names(codecs: Sequence[str] | None) -> list[str]:
    names = list(codecs) if codecs else list(CODECS.names())
    unknown = [c for c in names if c not in CODECS.names()]
    if unknown:
        raise ConfigError(
            f"unknown codec(s) {', '.join(unknown)}; known codecs: {', '.join(CODECS.names())}"
        )
    return sorted(names)


def _setup_for(name: str) -> str | Setup:
    return SETUPS.get(name, "ratio")


def _time_ops(
    name: str,
    params: dict[str, Any],
    data: np.ndarray,
    ctx: CodecContext,
    repeats: int,
    min_time: float,
    report: bool = False,
) -> dict[str, tuple[float, float]]:
    """``(seconds, spread)`` of each operation of codec ``name`` on ``data`` (:func:`time_call`).

    A report run times DFS's three report operations (``encode_report``, ``aggregate_report``
    and ``choose_block``): the choice of the next block size happens once per aggregate, so it
    is timed on its own and taken out of the per-push ``aggregate_report``.
    """
    codec = make_codec(BlockSpec(name, params))
    n = int(data.size)
    keys = np.arange(n, dtype=np.int64)
    payload: list[Payload] = []

    def enc() -> None:
        # One instance across repetitions (its buffers are reused, as in training), its
        # residual cleared: encoding the same vector again would feed it back into the timing.
        if hasattr(codec, "reset"):
            codec.reset()
        if name == "kv":
            payload[:] = [codec.encode_keys(data, keys, ctx)]  # type: ignore[attr-defined]
        else:
            payload[:] = [codec.encode(data, ctx)]

    out: dict[str, tuple[float, float]] = {}
    out["encode_report" if report else "encode"] = time_call(enc, repeats, min_time)
    server = codec.server()
    pushes = [payload[0]] * PUSHES
    agg: list[np.ndarray] = []

    def aggregate() -> None:
        agg[:] = [server.aggregate(pushes, ctx)]

    t, spread = time_call(aggregate, repeats, min_time)
    if report:
        out["choose_block"] = _time_choice(codec, server, pushes, ctx, repeats, min_time)
        out["aggregate_report"] = (max(t - out["choose_block"][0], TIME_FLOOR_S) / PUSHES, spread)
        return out
    out["aggregate"] = (t / PUSHES, spread)
    # A fresh instance per decode: no state from encoding (random-k's index cache) helps it.
    out["decode"] = time_call(
        lambda: make_codec(BlockSpec(name, params)).decode(payload[0], ctx), repeats, min_time
    )
    avg = agg[0] / np.float32(PUSHES)
    fresh = bool(getattr(codec, "carries_residual", False))  # a server residual would grow
    down: list[Payload] = []

    def encode_down() -> None:
        srv = codec.server() if fresh else server
        down[:] = [srv.encode_down(avg, ctx)]

    out["encode_down"] = time_call(encode_down, repeats, min_time)
    out["decode_down"] = time_call(lambda: server.decode_down(down[0], ctx), repeats, min_time)
    return out


def _time_choice(
    codec: Codec,
    server: Any,
    pushes: list[Payload],
    ctx: CodecContext,
    repeats: int,
    min_time: float,
) -> tuple[float, float]:
    """DFS's choice of the next ``B`` from one round's cost reports, after an aggregate.

    The server holds that aggregate's union, as in a run's steady state, so the union estimate
    remaps it to every candidate's grid.
    """
    reports = [codec.parse(p, ctx)[0] for p in pushes]  # type: ignore[attr-defined]
    keep = server.block_size
    try:
        return time_call(lambda: server.choose_block_size(reports), repeats, min_time)
    finally:
        server.block_size = keep


def dfs_params(block: int) -> dict[str, Any]:
    """DFS at block size ``B``: its report evaluates the candidates B/2, B and 2B."""
    return {"block_size": block, "candidates": sorted({max(1, block // 2), block, 2 * block})}


def _block_params(name: str, block: int) -> dict[str, Any]:
    """A codec's parameters at calibrated block size ``block`` (DFS: with its candidates)."""
    return dfs_params(block) if name == "dfs" else {"block_size": block}


def _entry(
    name: str,
    setup: str | Setup,
    ratio: float | None,
    block: int | None,
    xs: dict[int, np.ndarray],
    repeats: int,
    min_time: float,
    log: Callable[[str], None] | None,
) -> dict[str, Any]:
    """One cost entry: every operation of ``name`` at ``ratio`` (and ``block``), every size."""
    points: dict[str, list[tuple[float, float]]] = {}
    for x in xs.values():
        params: dict[str, Any] = {} if block is None else _block_params(name, block)
        data = x
        if callable(setup) and ratio is not None:
            extra, data = setup(x, ratio)
            params = {**params, **extra}
        r = ratio if ratio is not None else 1.0
        ctx = CodecContext(step=100, ratio=r, seed=1, lr=0.1)
        for op, t in _time_ops(name, params, data, ctx, repeats, min_time).items():
            points.setdefault(op, []).append(t)
        if name == "dfs":
            extra = {"dfs_report": True, "dfs_block_size": block or 256}
            rctx = CodecContext(step=100, ratio=r, seed=1, lr=0.1, extra=extra)
            timed = _time_ops(name, params, data, rctx, repeats, min_time, report=True)
            for op, t in timed.items():
                points.setdefault(op, []).append(t)
    entry: dict[str, Any] = {"ratio": ratio} | ({} if block is None else {"block_size": block})
    for op in (*OPS, *REPORT_OPS):
        if op in points:
            entry[op] = cost_curve(points[op])
    if log:
        enc = entry["encode"]["times"]
        at = "" if block is None else f" B {block}"
        sizes = list(xs)
        log(
            f"{name:14s} ratio {'-' if ratio is None else f'{ratio:g}':6s}{at} encode "
            f"{1e3 * enc[0]:.4f} .. {1e3 * enc[-1]:.3f} ms (n = {sizes[0]} .. {sizes[-1]})"
        )
    return entry


def calibrate_codecs(
    sizes: Sequence[int] = DEFAULT_SIZES,
    ratios: Sequence[float] = DEFAULT_RATIOS,
    repeats: int = 5,
    codecs: Sequence[str] | None = None,
    min_time: float = 2e-3,
    log: Callable[[str], None] | None = None,
    wrappers: bool = True,
) -> dict[str, Any]:
    """Time every codec's operations at every size; the ``codec_costs`` block minus its source.

    Args:
        sizes: Vector lengths.
        ratios: Densities (ratio-dependent codecs).
        repeats: Timed runs per measurement (the median is kept) after one warm-up.
        codecs: Codec names (default: every registered codec).
        min_time: Each timed run loops the call until it lasts this long.
        log: Called with progress lines.
        wrappers: Time the wrappers too (a plugin codec's own file has none).

    Returns:
        ``{"reference", "codecs", "wrappers"}``: the memcpy curve, codec name -> entries
        (``{"ratio", <op>: curve, ...}``), wrapper name -> curve and ``inner_decode``; a curve is
        ``{"times": median seconds per size, "spread": the largest (max - min) / median of the
        repeats over the sizes}``.
    """
    configure_heap()  # the regime the runs it prices are in (psml_core.heap)
    ratios = tuple(sorted(set(ratios)))
    sizes = tuple(sorted(set(sizes)))
    xs = {n: np.random.default_rng(SEED).standard_normal(n, dtype=np.float32) for n in sizes}
    ref_pts = []
    for x in xs.values():
        dst = np.empty_like(x)
        ref_pts.append(time_call(lambda d=dst, x=x: np.copyto(d, x), repeats, min_time))
    table: dict[str, list[dict[str, Any]]] = {}
    for name in _codec_names(codecs):
        setup = _setup_for(name)
        variants: list[float | None] = [None] if setup == "fixed" else list(ratios)
        blocks: tuple[int | None, ...] = BLOCK_SIZES.get(name, (None,))
        table[name] = [
            _entry(name, setup, ratio, block, xs, repeats, min_time, log)
            for block in blocks
            for ratio in variants
        ]
    return {
        "reference": cost_curve(ref_pts),
        "codecs": table,
        "wrappers": _time_wrappers(tuple(sizes), repeats, min_time, log) if wrappers else {},
    }
