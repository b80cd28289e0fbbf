"""Peak memory of the sparsity analysis (`psml analyze`) on dense, image-like data (README.md).

The `analyze` rule asks for 4 GB. A dense data set such as CIFAR-10 (50,000 x 3,072 float32,
150M non-zeros) is analysed through a boolean mask of its non-zeros; as CSR its index arrays
alone would take twice the data's own size. This benchmark draws a CIFAR-shaped matrix
(pixels uniform in (0, 1], so every entry is non-zero, as in real images) and prints the peak
of Python-tracked memory (NumPy and SciPy buffers, via tracemalloc) during
:func:`psml_core.placement.sparsity.analyze` as a ratio to the data's own bytes, measured in the
same run, next to the same statistics computed from the CSR form of the same matrix.

Usage: python benchmarks/bench_analyze.py [--rows 50000] [--features 3072] [--workers 8]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from psml_core.data.base import Dataset
from psml_core.placement.sparsity import analyze


def _peak(fn: Callable[[], Any]) -> tuple[Any, int, float]:
    """``fn()``, the peak of traced memory above the start while it ran, and its wall time."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return out, peak, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--features", type=int, default=3_072)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--skip-csr", action="store_true", help="leave out the CSR comparison")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    X = rng.random((args.rows, args.features), dtype=np.float32)
    np.add(X, np.float32(1e-3), out=X)  # no exact zeros: every pixel counts, as in CIFAR-10
    y = np.zeros(args.rows, np.int64)

    def ds(m: Any) -> Dataset:
        return Dataset("bench", m, y, m[:1], y[:1], 10, {})

    data = X.nbytes
    print(f"data: {args.rows} x {args.features} float32 = {data / 2**20:,.0f} MiB")
    print("| form | peak traced MiB | peak / data bytes | wall s |")
    print("|---|---|---|---|")
    dense, peak, wall = _peak(lambda: analyze(ds(X), args.workers, 0))
    print(f"| dense (boolean mask) | {peak / 2**20:,.0f} | {peak / data:.2f} | {wall:.1f} |")
    if not args.skip_csr:
        as_csr, peak, wall = _peak(lambda: analyze(ds(sp.csr_matrix(X)), args.workers, 0))
        assert as_csr == dense, "dense and CSR statistics differ"
        print(f"| CSR of the same data | {peak / 2**20:,.0f} | {peak / data:.2f} | {wall:.1f} |")


if __name__ == "__main__":
    main()
