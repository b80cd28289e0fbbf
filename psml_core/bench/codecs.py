"""Codec throughput against memcpy and a naive ``torch.topk``, measured in the same run.

For each registered codec and each ratio, on one float32 vector (25M elements by default):

* **encode GB/s** and **decode GB/s** count the dense input's bytes (4n) per second;
* **x memcpy**: the same divided by a memcpy of that vector measured in this run (``np.copyto``
  into a preallocated buffer: one read and one write of 4n bytes, the physical limit, 1.0x);
* **x torch.topk**: encode throughput over ``torch.topk(|x|, k)`` at the same k (the naive
  baseline; for codecs that keep about k elements).

Timings are wall-clock, best of ``repeats`` after one warm-up, with torch and the BLAS pools
limited to the requested threads. Codecs whose cost does not depend on the ratio run once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from psml_core.codecs import CODECS, CodecContext, Payload, make_codec
from psml_core.config import BlockSpec

__all__ = ["BenchRow", "bench_codecs", "format_table", "memcpy_gbps", "rows_as_dicts"]

# How each codec is driven at a target density. "ratio": the controller's ctx.ratio;
# "fixed": no ratio (runs once); a callable: params computed from (x, ratio).
Setup = Callable[[np.ndarray, float], tuple[dict[str, Any], np.ndarray]]


def _quantile_threshold(x: np.ndarray, ratio: float) -> float:
    sample = np.abs(x[:: max(1, x.size // 1_000_000)])
    return float(np.quantile(sample, 1.0 - ratio))


def _threshold_setup(x: np.ndarray, ratio: float) -> tuple[dict[str, Any], np.ndarray]:
    return {"threshold": _quantile_threshold(x, ratio)}, x


def _blocky(x: np.ndarray, ratio: float, block: int = 256) -> np.ndarray:
    """The vector with all but a ``ratio`` fraction of its blocks zeroed (as OmniReduce tests)."""
    nblk = -(-x.size // block)
    keep = np.random.default_rng(0).random(nblk) < ratio
    out = x.copy()
    mask = np.repeat(keep, block)[: x.size]
    out[~mask] = 0.0
    return out


def _omnireduce_setup(x: np.ndarray, ratio: float) -> tuple[dict[str, Any], np.ndarray]:
    return {}, _blocky(x, ratio)


def _value_bounded_setup(x: np.ndarray, ratio: float) -> tuple[dict[str, Any], np.ndarray]:
    return {"schedule": "fixed", "theta0": _quantile_threshold(x, ratio), "warmup": 0}, x


def _matched_setup(x: np.ndarray, ratio: float) -> tuple[dict[str, Any], np.ndarray]:
    """``topk_matched``'s shadow filter with the bound that keeps the ratio (as value_bounded)."""
    return {"schedule": "fixed", "theta0": _quantile_threshold(x, ratio), "warmup": 0}, x


# How each registered codec is driven: "fixed" (no ratio), "ratio" (params {"ratio": r}) or a
# setup function. tests/unit/test_registry.py fails when a registered codec has no entry.
SETUPS: dict[str, str | Setup] = {
    "none": "fixed",
    "fp16": "fixed",
    "qsgd": "fixed",
    "signsgd": "fixed",
    "efsignsgd": "fixed",
    "topk": "ratio",
    "randomk": "ratio",
    "dgc": "ratio",
    "dfs": "ratio",
    "threshold": _threshold_setup,
    "omnireduce": _omnireduce_setup,
    "value_bounded": _value_bounded_setup,
    "topk_matched": _matched_setup,
    "kv": "fixed",
}


@dataclass(frozen=True)
class BenchRow:
    """One measurement.

    Attributes:
        codec: Registered codec name.
        ratio: Target density (None for ratio-independent codecs).
        threads: Threads allowed.
        encode_gbps: Dense input bytes encoded per second (GB/s, 1e9 B).
        decode_gbps: Dense bytes decoded per second.
        encode_x_memcpy: encode_gbps / memcpy_gbps.
        decode_x_memcpy: decode_gbps / memcpy_gbps.
        encode_x_torch_topk: encode_gbps / torch.topk GB/s at the same k (None if no ratio).
        wire_bytes: Payload size.
        memcpy_gbps: The memcpy reference of this run.
    """

    codec: str
    ratio: float | None
    threads: int
    encode_gbps: float
    decode_gbps: float
    encode_x_memcpy: float
    decode_x_memcpy: float
    encode_x_torch_topk: float | None
    wire_bytes: int
    memcpy_gbps: float


def _best(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm-up: page faults, lazy allocations
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def memcpy_gbps(x: np.ndarray, repeats: int) -> float:
    """GB/s of copying ``x`` into a preallocated buffer (counting its 4n bytes once)."""
    dst = np.empty_like(x)
    return x.nbytes / _best(lambda: np.copyto(dst, x), repeats) / 1e9


def _torch_topk_gbps(x: np.ndarray, k: int, repeats: int) -> float:
    t = torch.from_numpy(x)
    return x.nbytes / _best(lambda: torch.topk(t.abs(), k, sorted=False), repeats) / 1e9


def set_threads(threads: int) -> None:
    torch.set_num_threads(threads)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(threads)
    except ImportError:  # scikit-learn brings threadpoolctl; without it numpy keeps its pool
        pass


def bench_codecs(
    n: int = 25_000_000,
    ratios: tuple[float, ...] = (0.1, 0.01, 0.001),
    threads: tuple[int, ...] = (1, 0),
    codecs: tuple[str, ...] | None = None,
    repeats: int = 3,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> list[BenchRow]:
    """Measure every codec (or ``codecs``) at every ratio and thread count.

    Args:
        n: Vector length.
        ratios: Target densities.
        threads: Thread counts; 0 means all cores.
        codecs: Names to run (default: every registered codec).
        repeats: Timed repetitions (best is kept) after one warm-up.
        seed: Seed of the standard-normal input.
        log: Called with one line per measurement (progress).
    """
    x = np.random.default_rng(seed).standard_normal(n, dtype=np.float32)
    names = list(codecs) if codecs else CODECS.names()  # every one: see SETUPS
    rows = []
    for th in threads:
        nthreads = th or os.cpu_count() or 1
        set_threads(nthreads)
        ref = memcpy_gbps(x, repeats)
        topk_ref = {r: _torch_topk_gbps(x, max(1, int(n * r)), repeats) for r in ratios}
        for name in names:
            setup = SETUPS.get(name, "ratio")
            for ratio in ratios if setup != "fixed" else (None,):
                row = _bench_one(name, setup, x, ratio, nthreads, ref, topk_ref, repeats)
                rows.append(row)
                if log:
                    log(format_table([row], header=False))
    return rows


def _bench_one(
    name: str,
    setup: str | Setup,
    x: np.ndarray,
    ratio: float | None,
    threads: int,
    ref: float,
    topk_ref: dict[float, float],
    repeats: int,
) -> BenchRow:
    params: dict[str, Any] = {}
    data = x
    if callable(setup) and ratio is not None:
        params, data = setup(x, ratio)
    ctx = CodecContext(step=100, ratio=ratio if ratio is not None else 1.0, seed=1, lr=0.1)
    codec = make_codec(BlockSpec(name, params))
    payload: list[Payload] = []

    def enc() -> None:
        # One instance across repetitions (its buffers are reused, as in training), but with
        # its residual cleared: encoding the same vector again would otherwise feed the value
        # filter's residual back into the measurement.
        if hasattr(codec, "reset"):
            codec.reset()
        payload[:] = [codec.encode(data, ctx)]

    enc_s = _best(enc, repeats)
    # A fresh instance per decode: no state from encoding (random-k's index cache) helps it.
    dec_s = _best(lambda: make_codec(BlockSpec(name, params)).decode(payload[0], ctx), repeats)
    enc_gbps = x.nbytes / enc_s / 1e9
    dec_gbps = x.nbytes / dec_s / 1e9
    return BenchRow(
        codec=name,
        ratio=ratio,
        threads=threads,
        encode_gbps=enc_gbps,
        decode_gbps=dec_gbps,
        encode_x_memcpy=enc_gbps / ref,
        decode_x_memcpy=dec_gbps / ref,
        encode_x_torch_topk=enc_gbps / topk_ref[ratio] if ratio is not None else None,
        wire_bytes=payload[0].wire_bytes,
        memcpy_gbps=ref,
    )


def format_table(rows: list[BenchRow], header: bool = True) -> str:
    """A Markdown table of the rows."""
    cols = (
        "codec",
        "ratio",
        "threads",
        "encode GB/s",
        "x memcpy",
        "x torch.topk",
        "decode GB/s",
        "x memcpy",
        "wire bytes",
        "memcpy GB/s",
    )
    lines = []
    if header:
        lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [
            r.codec,
            "–" if r.ratio is None else f"{r.ratio:g}",
            str(r.threads),
            f"{r.encode_gbps:.3f}",
            f"{r.encode_x_memcpy:.3f}",
            "–" if r.encode_x_torch_topk is None else f"{r.encode_x_torch_topk:.2f}",
            f"{r.decode_gbps:.3f}",
            f"{r.decode_x_memcpy:.3f}",
            f"{r.wire_bytes:,}",
            f"{r.memcpy_gbps:.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def rows_as_dicts(rows: list[BenchRow]) -> list[dict[str, Any]]:
    """The rows as plain dicts (for JSON)."""
    return [asdict(r) for r in rows]
