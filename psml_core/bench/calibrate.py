"""``psml bench calibrate``: measure a device profile on this machine and write its device file.

The sim backend charges compute and compression to its clock from ``config/devices/<name>.yaml``
and never times anything at run time. This module produces that file:

* **Codec costs.** Every registered codec's five operations (:data:`~psml_core.devices.device.OPS`:
  the worker's encode, a decode, the server's per-push aggregate, its ``encode_down`` of the
  aggregate and the worker's ``decode_down``) are timed at several sizes and ratios on a
  standard-normal float32 vector, driven as :mod:`psml_core.bench.codecs` drives them (threshold
  codecs get the threshold that keeps the ratio, OmniReduce a vector whose blocks are non-zero
  with probability = ratio, DFS its default dynamic settings, with and without a cost report).
  Each operation's median time at each size is stored as measured (``times``, aligned with
  ``codec_costs.calibration.sizes``; no fit: one line ``a + b n`` cannot follow the cache
  cliff), with the largest relative spread of its repeats (``spread``); the cost model
  interpolates between the points (:class:`~psml_core.devices.device.CostCurve`). A time measured
  as 0 is written as :data:`~psml_core.devices.device.TIME_FLOOR_S`. Wrappers (error feedback,
  momentum correction) are timed around a null inner codec, so what is measured is the
  wrapper's own work; whether the wrapper also decodes the inner payload is observed (a counter
  on the null codec), not assumed. A memcpy of each vector is timed as the yardstick.
* **Compute profile.** ``Model.loss_grad`` of the digits-sized MLP (input 64) at several widths
  and batch sizes and of the sparse logistic regression (RCV1-like rows) is timed and
  ``time = overhead + flops / rate`` fitted (``Model.flops``), again by relative NNLS.

Timing: one thread (torch and the BLAS pools), one warm-up, then the median of ``repeats``
timed runs, each long enough to be above timer noise (calls are looped up to ``min_time``).

:func:`estimate_gpu` derives a GPU device file from a measured CPU table: at each calibrated
size, each operation keeps its time relative to a memcpy of the same vector (measured in the same
calibration), the memcpy moved at the GPU's datasheet HBM bandwidth, plus a stated per-call
launch overhead; the compute block is a cited training throughput (:data:`GPU_SPECS`). GPU files
are therefore regenerated, not typed.
"""

from __future__ import annotations

import datetime
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
import yaml
from scipy.optimize import nnls

from psml_core.atomic import write_text
from psml_core.bench.codecs import SETUPS, Setup
from psml_core.codecs import CODECS, Codec, CodecContext, Payload, make_codec
from psml_core.config import BlockSpec, WorkloadSpec
from psml_core.devices.device import OPS, REPORT_OPS, TIME_FLOOR_S, CostCurve, device_from_dict
from psml_core.errors import ConfigError
from psml_core.models import make_model

__all__ = [
    "DEFAULT_RATIOS",
    "DEFAULT_SIZES",
    "GPU_CALL_OVERHEAD_S",
    "GPU_MEMCPY_CALL_S",
    "GPU_SPECS",
    "QUICK",
    "Calibration",
    "calibrate",
    "calibrate_codecs",
    "calibrate_compute",
    "device_yaml",
    "estimate_gpu",
    "format_summary",
    "machine_description",
]

DEFAULT_SIZES: tuple[int, ...] = (2**10, 2**12, 2**15, 2**18, 2**20, 2**22, 2**24)
"""Vector lengths timed: 4 KB to 64 MB of float32, from cache-resident to DRAM-bound (the cost
model interpolates between them in log-log, so the cache cliff is followed point by point)."""
DEFAULT_RATIOS: tuple[float, ...] = (0.001, 0.01, 0.1, 0.3, 1.0)
"""Densities timed: the suite's top-k ratios, DFS's 0.3 and DC2's dense start (1.0)."""
PUSHES = 4
"""Pushes per timed aggregate (the per-push time is the aggregate's over this)."""
SEED = 0


@dataclass(frozen=True)
class QuickSettings:
    """The ``--quick`` settings: tiny sizes, one repeat (for tests; the numbers mean nothing)."""

    sizes: tuple[int, ...] = (256, 2048)
    ratios: tuple[float, ...] = (0.01, 0.1)
    repeats: int = 1
    min_time: float = 0.0


QUICK = QuickSettings()

# --------------------------------------------------------------------------- timing


def _timing(fn: Callable[[], Any], repeats: int, min_time: float) -> tuple[float, float]:
    """``(seconds per call, relative spread)`` of ``fn``: one warm-up, then ``repeats`` runs.

    A run loops ``fn`` as often as the warm-up says it takes to last ``min_time`` (at most
    1000 calls), so microsecond operations are not lost in the timer's resolution. The time is
    the median of the runs; the spread is ``(max - min) / median`` (0 for one run).
    """
    t0 = time.perf_counter()
    fn()
    warm = time.perf_counter() - t0
    loops = 1 if warm >= min_time else min(1000, max(1, math.ceil(min_time / max(warm, 1e-7))))
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        times.append((time.perf_counter() - t0) / loops)
    med = statistics.median(times)
    return med, (max(times) - min(times)) / med if med > 0 else 0.0


def _median_time(fn: Callable[[], Any], repeats: int, min_time: float) -> float:
    """Seconds per call of ``fn`` (the median of :func:`_timing`)."""
    return _timing(fn, repeats, min_time)[0]


def _fit_linear(ns: Sequence[float], ts: Sequence[float]) -> tuple[float, float, float]:
    """``(a, b, max relative error)`` of ``t = a + b n``, a, b >= 0, least relative squares."""
    n = np.asarray(ns, dtype=np.float64)
    t = np.maximum(np.asarray(ts, dtype=np.float64), 1e-12)
    A = np.column_stack([np.ones_like(n), n]) / t[:, None]
    (a, b), _ = nnls(A, np.ones_like(t))
    pred = a + b * n
    return float(a), float(b), float(np.max(np.abs(pred - t) / t))


def _sig(x: float, digits: int = 4) -> float:
    """``x`` rounded to ``digits`` significant digits (readable, stable YAML)."""
    return float(f"{x:.{digits}g}")


def _curve(points: Sequence[tuple[float, float]]) -> dict[str, Any]:
    """The file's form of measured ``(median, spread)`` points, one per size, in size order.

    A median of 0 or less (too fast for the timer) is written as :data:`TIME_FLOOR_S`: the cost
    model interpolates ``log t``, and the loader rejects non-positive times.
    """
    return {
        "times": [max(_sig(t), TIME_FLOOR_S) for t, _ in points],
        "spread": _sig(max(sp for _, sp in points), 2),
    }


def _set_threads(threads: int) -> Callable[[], None]:
    """Limit torch and the BLAS pools to ``threads``; returns a function that restores them."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    limiter: Any = None
    try:
        from threadpoolctl import threadpool_limits

        limiter = threadpool_limits(threads)
    except ImportError:  # scikit-learn brings threadpoolctl; without it numpy keeps its pool
        pass

    def restore() -> None:
        torch.set_num_threads(before)
        if limiter is not None:
            limiter.restore_original_limits()

    return restore


# --------------------------------------------------------------------------- codecs


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
            timed = _timing(lambda w=wrapped, x=x: w.encode(x, ctx), repeats, min_time)
            null.decodes = 0
            wrapped.encode(x, ctx)
            decodes[name] = null.decodes > 0  # observed: does the wrapper decode what it sent?
            points.setdefault(name, []).append(timed)
    out: dict[str, dict[str, Any]] = {}
    for name, pts in points.items():
        out[name] = {**_curve(pts), "inner_decode": decodes[name]}
        if log:
            ms = ", ".join(f"{1e3 * t:.3g}" for t, _ in pts)
            log(f"wrapper {name}: {ms} ms at sizes {list(sizes)}")
    if "momentum_correction" not in out:
        pts = []
        for n in sizes:
            x = np.random.default_rng(SEED).standard_normal(n, dtype=np.float32)
            step = _momentum_standin(n)
            pts.append(_timing(lambda s=step, x=x: s(x), repeats, min_time))
        out["momentum_correction"] = {
            **_curve(pts),
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
    """``(seconds, spread)`` of each operation of codec ``name`` on ``data`` (:func:`_timing`).

    A report run times two of the operations (``encode_report``, ``aggregate_report``).
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
    out["encode_report" if report else "encode"] = _timing(enc, repeats, min_time)
    server = codec.server()
    pushes = [payload[0]] * PUSHES
    agg: list[np.ndarray] = []

    def aggregate() -> None:
        agg[:] = [server.aggregate(pushes, ctx)]

    t, spread = _timing(aggregate, repeats, min_time)
    out["aggregate_report" if report else "aggregate"] = (t / PUSHES, spread)
    if report:
        return out
    # A fresh instance per decode: no state from encoding (random-k's index cache) helps it.
    out["decode"] = _timing(
        lambda: make_codec(BlockSpec(name, params)).decode(payload[0], ctx), repeats, min_time
    )
    avg = agg[0] / np.float32(PUSHES)
    fresh = bool(getattr(codec, "carries_residual", False))  # a server residual would grow
    down: list[Payload] = []

    def encode_down() -> None:
        srv = codec.server() if fresh else server
        down[:] = [srv.encode_down(avg, ctx)]

    out["encode_down"] = _timing(encode_down, repeats, min_time)
    out["decode_down"] = _timing(lambda: server.decode_down(down[0], ctx), repeats, min_time)
    return out


def calibrate_codecs(
    sizes: Sequence[int] = DEFAULT_SIZES,
    ratios: Sequence[float] = DEFAULT_RATIOS,
    repeats: int = 5,
    codecs: Sequence[str] | None = None,
    min_time: float = 2e-3,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Time every codec's operations at every size; the ``codec_costs`` block minus its source.

    Args:
        sizes: Vector lengths.
        ratios: Densities (ratio-dependent codecs).
        repeats: Timed runs per measurement (the median is kept) after one warm-up.
        codecs: Codec names (default: every registered codec).
        min_time: Each timed run loops the call until it lasts this long.
        log: Called with progress lines.

    Returns:
        ``{"reference", "codecs", "wrappers"}``: the memcpy curve, codec name -> entries
        (``{"ratio", <op>: curve, ...}``), wrapper name -> curve and ``inner_decode``; a curve is
        ``{"times": median seconds per size, "spread": the largest (max - min) / median of the
        repeats over the sizes}``.
    """
    ratios = tuple(sorted(set(ratios)))
    sizes = tuple(sorted(set(sizes)))
    xs = {n: np.random.default_rng(SEED).standard_normal(n, dtype=np.float32) for n in sizes}
    ref_pts = []
    for x in xs.values():
        dst = np.empty_like(x)
        ref_pts.append(_timing(lambda d=dst, x=x: np.copyto(d, x), repeats, min_time))
    table: dict[str, list[dict[str, Any]]] = {}
    for name in _codec_names(codecs):
        setup = _setup_for(name)
        variants: list[float | None] = [None] if setup == "fixed" else list(ratios)
        entries = []
        for ratio in variants:
            points: dict[str, list[tuple[float, float]]] = {}
            for x in xs.values():
                params: dict[str, Any] = {}
                data = x
                if callable(setup) and ratio is not None:
                    params, data = setup(x, ratio)
                r = ratio if ratio is not None else 1.0
                ctx = CodecContext(step=100, ratio=r, seed=1, lr=0.1)
                for op, t in _time_ops(name, params, data, ctx, repeats, min_time).items():
                    points.setdefault(op, []).append(t)
                if name == "dfs":
                    rctx = CodecContext(
                        step=100,
                        ratio=r,
                        seed=1,
                        lr=0.1,
                        extra={"dfs_report": True, "dfs_block_size": 256},
                    )
                    timed = _time_ops(name, params, data, rctx, repeats, min_time, report=True)
                    for op, t in timed.items():
                        points.setdefault(op, []).append(t)
            entry: dict[str, Any] = {"ratio": ratio}
            for op in (*OPS, *REPORT_OPS):
                if op in points:
                    entry[op] = _curve(points[op])
            entries.append(entry)
            if log:
                enc = entry["encode"]["times"]
                log(
                    f"{name:14s} ratio {'-' if ratio is None else f'{ratio:g}':6s} encode "
                    f"{1e3 * enc[0]:.4f} .. {1e3 * enc[-1]:.3f} ms (n = {sizes[0]} .. {sizes[-1]})"
                )
        table[name] = entries
    return {
        "reference": _curve(ref_pts),
        "codecs": table,
        "wrappers": _time_wrappers(tuple(sizes), repeats, min_time, log),
    }


# --------------------------------------------------------------------------- compute

MLP_WIDTHS: tuple[tuple[int, ...], ...] = ((64,), (128, 64), (256, 128))
MLP_BATCHES: tuple[int, ...] = (16, 64, 256)
LOGREG_BATCHES: tuple[int, ...] = (64, 256, 1000)
LOGREG_FEATURES = 47_236  # RCV1-v2's feature count
LOGREG_NNZ_PER_ROW = 75  # about RCV1-v2's mean non-zeros per row


def _compute_points(quick: bool) -> list[tuple[str, Any, Any, np.ndarray]]:
    """``(label, model, X, y)`` of every timed gradient computation."""
    rng = np.random.default_rng(SEED)
    out: list[tuple[str, Any, Any, np.ndarray]] = []
    widths = MLP_WIDTHS[:1] if quick else MLP_WIDTHS
    batches = MLP_BATCHES[:1] if quick else MLP_BATCHES
    for hidden in widths:
        wl = WorkloadSpec("cal", "cal", "mlp", batches[0], 0.1, 1, hidden=hidden)
        model = make_model(wl, 64, 10)
        for b in batches:
            X = rng.standard_normal((b, 64), dtype=np.float32)
            y = rng.integers(0, 10, b)
            out.append((f"mlp {list(hidden)} batch {b}", model, X, y))
    wl = WorkloadSpec("cal", "cal", "logreg", 64, 0.1, 1)
    d = 2_000 if quick else LOGREG_FEATURES
    model = make_model(wl, d, 2)
    for b in LOGREG_BATCHES[:1] if quick else LOGREG_BATCHES:
        X = sp.random(
            b, d, density=LOGREG_NNZ_PER_ROW / d, format="csr", random_state=rng, dtype=np.float32
        )
        y = rng.integers(0, 2, b)
        out.append((f"logreg d={d} batch {b}", model, X, y))
    return out


def calibrate_compute(
    repeats: int = 5,
    min_time: float = 2e-3,
    quick: bool = False,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Time ``loss_grad`` of the MLP and the sparse logistic regression; fit overhead and rate.

    Returns:
        ``{"flops_per_s", "overhead_s", "fit"}``, ``fit`` listing each point (model, FLOPs,
        measured and predicted seconds) and the fit's max relative error.
    """
    pts = []
    for label, model, X, y in _compute_points(quick):
        params = model.init_params(0)
        t = _median_time(
            lambda m=model, X=X, y=y, p=params: m.loss_grad(p, X, y), repeats, min_time
        )
        pts.append((label, float(model.flops(X)), t))
    a, b, err = _fit_linear([p[1] for p in pts], [p[2] for p in pts])
    if b <= 0:
        raise ConfigError(
            "the compute calibration found no time per FLOP; re-run on a quiet machine"
        )
    rate = 1.0 / b
    fit = {
        "points": [
            {
                "what": label,
                "flops": _sig(f),
                "measured_s": _sig(t),
                "predicted_s": _sig(a + f * b),
            }
            for label, f, t in pts
        ],
        "max_relative_error": _sig(err, 3),
    }
    if log:
        log(f"compute: {rate:.3g} FLOP/s, overhead {a * 1e6:.1f} us (max fit error {err:.0%})")
    return {"flops_per_s": _sig(rate), "overhead_s": _sig(a), "fit": fit}


# --------------------------------------------------------------------------- the file


def machine_description() -> str:
    """CPU model (from /proc/cpuinfo), logical CPUs, OS and the library versions."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{model}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}, NumPy {np.__version__}, torch {torch.__version__}"
    )


@dataclass
class Calibration:
    """The inputs of a measured device file.

    Attributes:
        device: The profile's name.
        command: The command that produced it (recorded in the source).
        sizes: Vector lengths of the codec timings.
        ratios: Densities of the codec timings.
        repeats: Timed runs per measurement.
        threads: Threads allowed (1).
        quick: Tiny settings (tests only).
        note: Extra words for the source detail (e.g. "shared machine").
        codecs: Codec names (default: all).
    """

    device: str
    command: str
    sizes: tuple[int, ...] = DEFAULT_SIZES
    ratios: tuple[float, ...] = DEFAULT_RATIOS
    repeats: int = 5
    threads: int = 1
    quick: bool = False
    note: str = ""
    codecs: tuple[str, ...] | None = None
    min_time: float = 2e-3
    log: Callable[[str], None] | None = field(default=None, repr=False)


def calibrate(cal: Calibration) -> dict[str, Any]:
    """Measure this machine: the content of a device file (see :func:`device_yaml`)."""
    restore = _set_threads(cal.threads)
    try:
        compute = calibrate_compute(cal.repeats, cal.min_time, cal.quick, cal.log)
        costs = calibrate_codecs(
            cal.sizes, cal.ratios, cal.repeats, cal.codecs, cal.min_time, cal.log
        )
    finally:
        restore()
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    where = (
        f"machine: {machine_description()}; command: `{cal.command}`; date: {today}; "
        f"threads: {cal.threads}"
    )
    note = f"; {cal.note}" if cal.note else ""
    quick = "; QUICK settings (tiny sizes, 1 repeat): for tests only" if cal.quick else ""
    compute_detail = (
        f"{where}; median of {cal.repeats} after a warm-up of Model.loss_grad on the "
        f"digits-sized MLP (input 64, hidden {', '.join(str(list(h)) for h in MLP_WIDTHS)}, "
        f"batches {list(MLP_BATCHES)}) and the sparse logistic regression "
        f"({LOGREG_FEATURES} features, ~{LOGREG_NNZ_PER_ROW} non-zeros per row, batches "
        f"{list(LOGREG_BATCHES)}); fit time = overhead_s + Model.flops / flops_per_s by "
        f"non-negative least squares on relative errors (points and residuals under fit)"
        f"{note}{quick}"
    )
    codec_detail = (
        f"{where}; median of {cal.repeats} after a warm-up, standard-normal float32 vectors, "
        f"sizes {sorted(set(cal.sizes))}, ratios {sorted(set(cal.ratios))}; the medians are "
        f"stored per codec, ratio, operation and size (times, aligned with calibration.sizes; "
        f"spread: the largest (max - min) / median of the repeats over the sizes), and "
        f"interpolated in log t against log n by the cost model{note}{quick}"
    )
    return {
        "description": f"{cal.device}: measured on {machine_description().split(',')[0]}",
        "compute": {
            "flops_per_s": compute["flops_per_s"],
            "overhead_s": compute["overhead_s"],
            "source": {"kind": "measured", "detail": compute_detail},
            "fit": compute["fit"],
        },
        "codec_costs": {
            "source": {"kind": "measured", "detail": codec_detail},
            "calibration": {
                "sizes": sorted(set(cal.sizes)),
                "ratios": sorted(set(cal.ratios)),
                "repeats": cal.repeats,
                "threads": cal.threads,
                "pushes_per_aggregate": PUSHES,
            },
            "reference": costs["reference"],
            "codecs": costs["codecs"],
            "wrappers": costs["wrappers"],
        },
    }


class _Flow(dict):  # type: ignore[type-arg]
    """A mapping written inline (``{times: [1.0e-06, 2.0e-06], spread: 0.1}``)."""


class _Dumper(yaml.SafeDumper):
    """Block style, except :class:`_Flow` mappings and lists of scalars (inline)."""


_Dumper.add_representer(
    _Flow, lambda d, data: d.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True)
)


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, bool | int | float)


def _styled(data: Any) -> Any:
    """Mark the mappings of scalars (fit points) and the cost curves for inline style."""
    if isinstance(data, dict):
        if data and all(
            _scalar(v) or (k == "what" and isinstance(v, str)) for k, v in data.items()
        ):
            return _Flow(data)
        if "times" in data and all(
            _scalar(v) or (k == "times" and isinstance(v, list)) for k, v in data.items()
        ):
            return _Flow(data)
        return {k: _styled(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_styled(v) for v in data]
    return data


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = all(_scalar(v) for v in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def device_yaml(content: dict[str, Any], header: str) -> str:
    """The device file's text: ``header`` as comments, then the YAML (cost lines inline)."""
    body = yaml.dump(
        _styled(content),
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        width=100,
        allow_unicode=True,
    )
    comments = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return comments + body


def write_device(path: str | Path, content: dict[str, Any], header: str) -> None:
    """Validate ``content`` as a device file and write it atomically."""
    device_from_dict(content, Path(path).stem, source=f"device file {str(path)!r} (to write)")
    write_text(path, device_yaml(content, header))


# --------------------------------------------------------------------------- GPU estimates

GPU_CALL_OVERHEAD_S = 20e-6
"""Per-call cost of a codec operation on a GPU [assumption]: about four kernel launches of ~5 us
(CUDA's launch latency) each; a codec op is a few element-wise kernels plus a selection."""
GPU_MEMCPY_CALL_S = 5e-6
"""Per-call cost of the GPU memcpy reference [assumption]: one launch of ~5 us."""


@dataclass(frozen=True)
class GpuSpec:
    """A GPU's cited figures.

    Attributes:
        description: The device.
        hbm_bytes_per_s: Datasheet memory bandwidth.
        hbm_citation: Where the bandwidth comes from.
        flops_per_s: Sustained training FLOP/s derived from a cited throughput.
        flops_detail: The citation and the arithmetic.
        overhead_s: Fixed per-step cost [assumption].
        overhead_detail: The assumption in words.
    """

    description: str
    hbm_bytes_per_s: float
    hbm_citation: str
    flops_per_s: float
    flops_detail: str
    overhead_s: float
    overhead_detail: str


_RN50_MACS = 4_089_184_256
"""Multiply-accumulates of one ResNet-50 v1.5 forward pass at 224x224, 1000 classes (convs and
the classifier, counted layer by layer: stem 118.0M, stages [3, 4, 6, 3] bottlenecks with the
stride on the 3x3 convolution, downsample 1x1 convolutions, fc 2.048M)."""
_FLOPS_PER_MAC_TRAIN = 6  # psml's convention (Model.flops): 2 per MAC forward, 4 backward

_OVERHEAD_DETAIL = (
    "[assumption] 1 ms per gradient computation: PyTorch dispatch plus CUDA launch, about 10 us "
    "per operator, times about 100 operators in a training step of the paper tier's models "
    "(the 2-layer MLP has ~20, psml's ResNet-18 ~300), so within a factor of about 3 for "
    "either; for scale, NVIDIA reports a 10.37 ms batch-1 FP32 ResNet-50 inference latency on "
    "V100 16GB (same README as the rate), the floor of a 50-layer network with data loading"
)

GPU_SPECS: dict[str, GpuSpec] = {
    "v100": GpuSpec(
        description="NVIDIA V100 (SXM2 16 GB), FP32",
        hbm_bytes_per_s=900e9,
        hbm_citation="NVIDIA Tesla V100 datasheet: 900 GB/s HBM2",
        flops_per_s=367 * _FLOPS_PER_MAC_TRAIN * _RN50_MACS,
        flops_detail=(
            "NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md, "
            "'Training performance: NVIDIA DGX-1 16GB (8x V100 16GB)', 1 GPU, FP32: 367 img/s "
            "(pytorch-21.03 NGC container). ResNet-50 v1.5 forward at 224x224 = 4.089e9 MAC "
            "(counted layer by layer); training = 6 FLOP per MAC (psml's Model.flops convention: "
            "2 forward, 4 backward) = 2.453e10 FLOP per image; 367 x 2.453e10 = 9.004e12 FLOP/s "
            "(57% of the 15.7 TFLOP/s FP32 datasheet peak)"
        ),
        overhead_s=1e-3,
        overhead_detail=_OVERHEAD_DETAIL,
    ),
    "a100": GpuSpec(
        description="NVIDIA A100 (80 GB), TF32 tensor cores (PyTorch's default for convolutions)",
        hbm_bytes_per_s=1555e9,
        hbm_citation="NVIDIA A100 40GB datasheet: 1,555 GB/s HBM2 (the 80GB SXM part: 2,039 GB/s)",
        flops_per_s=938 * _FLOPS_PER_MAC_TRAIN * _RN50_MACS,
        flops_detail=(
            "NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md, "
            "'Training performance: NVIDIA DGX A100 (8x A100 80GB)', 1 GPU, TF32: 938 img/s "
            "(pytorch-21.03 NGC container). 938 x 2.453e10 FLOP per image (4.089e9 MAC x 6, as "
            "for v100) = 2.301e13 FLOP/s. TF32, not strict FP32: PyTorch runs convolutions in "
            "TF32 on A100 by default (torch.backends.cudnn.allow_tf32); this exceeds the 19.5 "
            "TFLOP/s FP32 (non-tensor-core) peak, and strict-FP32 training would be slower"
        ),
        overhead_s=1e-3,
        overhead_detail=_OVERHEAD_DETAIL,
    ),
}


def estimate_gpu(cpu: dict[str, Any], gpu: str, cpu_file: str) -> dict[str, Any]:
    """A GPU device file estimated from a measured CPU device file's content.

    Point by point: at each calibrated size ``n``, an operation measured at ``t_cpu(n)`` while
    a memcpy of the same vector took ``m_cpu(n)`` (same CPU calibration) becomes ``t_gpu(n) =
    GPU_CALL_OVERHEAD_S + (t_cpu(n) / m_cpu(n)) (8 n / HBM)``: it keeps its cost relative to the
    memcpy, and a memcpy on the GPU reads and writes 4 n bytes each at the datasheet bandwidth.
    The CPU's per-call cost (Python, allocation) stays in the ratio, so small sizes are
    overestimated by a little, under the launch overhead that dominates them anyway. The GPU
    memcpy reference is ``GPU_MEMCPY_CALL_S + 8 n / HBM``.

    Args:
        cpu: The CPU file's content (measured).
        gpu: A key of :data:`GPU_SPECS`.
        cpu_file: The CPU file's name (recorded in the source).

    Raises:
        ConfigError: an unknown GPU, or CPU content that is no valid device file (e.g. one
            written before the tables held measured points).
    """
    if gpu not in GPU_SPECS:
        raise ConfigError(
            f"no cited figures for GPU {gpu!r}; known GPUs: {', '.join(sorted(GPU_SPECS))}"
        )
    device_from_dict(cpu, Path(cpu_file).stem, source=f"device file {cpu_file!r}")  # checks
    spec = GPU_SPECS[gpu]
    cc = cpu["codec_costs"]
    sizes = [int(n) for n in cc["calibration"]["sizes"]]
    memcpy = [max(float(t), TIME_FLOOR_S) for t in cc["reference"]["times"]]
    per_elem = 8.0 / spec.hbm_bytes_per_s  # seconds per element of a GPU memcpy
    gpu_copy = [per_elem * n for n in sizes]

    def scale(curve: dict[str, Any]) -> dict[str, Any]:
        return {
            "times": [
                _sig(GPU_CALL_OVERHEAD_S + float(t) / m * g)
                for t, m, g in zip(curve["times"], memcpy, gpu_copy, strict=True)
            ]
        }

    codecs = {
        name: [
            {"ratio": e["ratio"], **{op: scale(v) for op, v in e.items() if op != "ratio"}}
            for e in entries
        ]
        for name, entries in cc["codecs"].items()
    }
    wrappers = {
        name: {**scale(w), "inner_decode": w["inner_decode"]}
        | ({"note": w["note"]} if "note" in w else {})
        for name, w in cc["wrappers"].items()
    }
    calibration: dict[str, Any] = {"sizes": sizes}
    if "ratios" in cc["calibration"]:
        calibration["ratios"] = list(cc["calibration"]["ratios"])
    calibration["scaled_from"] = cpu_file
    detail = (
        f"[estimate] scaled point by point from the measured codec_costs of {cpu_file} (its "
        f"source says where and how): at each calibrated size n, each operation keeps its time "
        f"relative to a memcpy of the same vector on that CPU (t_cpu(n) / memcpy_cpu(n)), and a "
        f"GPU memcpy moves 8 B per float32 element at {spec.hbm_bytes_per_s / 1e9:g} GB/s "
        f"({spec.hbm_citation}); plus {GPU_CALL_OVERHEAD_S * 1e6:g} us per call [assumption: "
        f"about four kernel launches of ~5 us]; the memcpy reference is "
        f"{GPU_MEMCPY_CALL_S * 1e6:g} us [assumption: one launch] + 8 n bytes / bandwidth. "
        "Assumes the codecs ran as GPU kernels with the CPU code's memory-traffic profile; "
        "selection (top-k, compaction) is relatively slower on GPUs, so top-k-like encodes are "
        "likely underestimated; the CPU's per-call Python cost stays in the ratio at small n"
    )
    return {
        "description": f"{gpu}: {spec.description}",
        "compute": {
            "flops_per_s": _sig(spec.flops_per_s),
            "overhead_s": spec.overhead_s,
            "source": {"kind": "cited", "detail": spec.flops_detail},
            "overhead_source": {"kind": "estimated", "detail": spec.overhead_detail},
        },
        "codec_costs": {
            "source": {"kind": "estimated", "detail": detail},
            "calibration": calibration,
            "reference": {"times": [_sig(GPU_MEMCPY_CALL_S + g) for g in gpu_copy]},
            "codecs": codecs,
            "wrappers": wrappers,
        },
    }


# --------------------------------------------------------------------------- summary


def format_summary(content: dict[str, Any], sizes: Sequence[int] = (2**15, 2**20)) -> str:
    """A Markdown table of a device file: compute, then each codec's ops at ``sizes``.

    The costs are the cost model's (:class:`~psml_core.devices.device.CostCurve`): the measured
    times at calibrated sizes, interpolated between them.
    """
    c = content["compute"]
    lines = [
        f"compute: {c['flops_per_s']:.4g} FLOP/s, overhead {c['overhead_s'] * 1e6:.1f} us "
        f"({c['source']['kind']})",
        "",
        "| codec | ratio | op | " + " | ".join(f"n={n} (ms)" for n in sizes) + " |",
        "|---|---|---|" + "---|" * len(sizes),
    ]
    cc = content["codec_costs"]
    cal = tuple(int(n) for n in cc["calibration"]["sizes"])

    def cells(curve: dict[str, Any]) -> str:
        at = CostCurve(cal, tuple(float(t) for t in curve["times"])).at
        return " | ".join(f"{1e3 * at(n):.3f}" for n in sizes)

    lines.append("| memcpy (reference) | – | copy | " + cells(cc["reference"]) + " |")
    for name, entries in cc["codecs"].items():
        for e in entries:
            for op, v in e.items():
                if op == "ratio":
                    continue
                r = "–" if e["ratio"] is None else f"{e['ratio']:g}"
                lines.append(f"| {name} | {r} | {op} | " + cells(v) + " |")
    for name, w in cc["wrappers"].items():
        extra = " + inner decode" if w["inner_decode"] else ""
        lines.append(f"| wrapper {name} | – | encode{extra} | " + cells(w) + " |")
    return "\n".join(lines)
