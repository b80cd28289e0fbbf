"""What the payloads' CRC-32 trailer costs (psml_core.codecs.integrity), as ratios (README.md).

Every variable-length codec payload ends in a 4-byte CRC-32 of its body, computed by the
encoder and checked by the decoder. For payload sizes from 64 KB to 100 MB (a top-k payload at
ratio 0.01 of a 25M-element vector is 2 MB) this prints the time of sealing and of checking a
body against a memcpy of the same bytes measured in the same run, and the trailer's share of
the payload's bytes. The codec benchmark's encode and decode throughputs include it.

Usage: python benchmarks/bench_integrity.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from psml_core.codecs.integrity import CHECKSUM_BYTES, seal, unseal


def _best(fn: Callable[[], object], repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print(
        f"{'payload':>10} {'memcpy GB/s':>12} {'seal x memcpy':>14} {'check x memcpy':>15} "
        f"{'trailer share':>14}"
    )
    rng = np.random.default_rng(0)
    for size in (64 * 2**10, 2**20, 2 * 2**20, 16 * 2**20, 100 * 2**20):
        body = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        dst = np.empty(size, dtype=np.uint8)
        src = np.frombuffer(body, dtype=np.uint8)
        memcpy = _best(lambda s=src, d=dst: np.copyto(d, s), args.repeats)
        sealed = seal(body, n=size)  # the count bound is the one the check is told
        t_seal = _best(lambda b=body, n=size: seal(b, n=n), args.repeats)
        t_check = _best(lambda b=sealed, n=size: unseal(b, "bench", n), args.repeats)
        print(
            f"{size / 2**20:>8.2f}MB {size / memcpy / 1e9:>12.2f} {t_seal / memcpy:>14.2f} "
            f"{t_check / memcpy:>15.2f} {CHECKSUM_BYTES / (size + CHECKSUM_BYTES):>14.2e}"
        )


if __name__ == "__main__":
    main()
