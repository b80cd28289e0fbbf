"""What the payloads' CRC-32C trailer costs (psml_core.codecs.integrity), as ratios (README.md).

Every variable-length codec payload ends in a 4-byte CRC-32C of its body, computed by the
encoder and checked by the decoder. For payload sizes from 64 KB to 100 MB (a top-k payload at
ratio 0.01 of a 25M-element vector is 2 MB) this prints the time of sealing and of checking a
body against a memcpy of the same bytes measured in the same run, and the trailer's share of
the payload's bytes. The codec benchmark's encode and decode throughputs include it.

``--candidates`` first prints the checksums the trailer was chosen from (issue 46), in GB/s on
one core, on the same bytes: zlib's CRC-32 (the trailer before), CRC-32C from ``google-crc32c``
(the trailer now) and from ``crc32c`` (if installed), and the CRC-32C of
:mod:`psml_core.codecs.torch_crc` on ``--device``.

Usage: python benchmarks/bench_integrity.py [--repeats 5] [--candidates] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import importlib
import time
import zlib
from collections.abc import Callable

import numpy as np

from psml_core.codecs.integrity import CHECKSUM_BYTES, crc32c, seal, unseal


def _best(
    fn: Callable[[], object], repeats: int, sync: Callable[[], object] = lambda: None
) -> float:
    fn()
    times = []
    for _ in range(repeats):
        sync()
        t = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t)
    return min(times)


def candidates(repeats: int, device: str) -> None:
    """GB/s of each candidate checksum over 1 MB and 44.8 MB (a dense ResNet-18 gradient)."""
    import torch

    from psml_core.codecs.torch_crc import crc32c as device_crc32c

    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else lambda: None
    print(f"{'checksum':>34} {'1 MB GB/s':>10} {'44.8 MB GB/s':>13}")
    bodies = [
        np.random.default_rng(s).integers(0, 256, s, dtype=np.uint8) for s in (2**20, 44_800_000)
    ]
    funcs: dict[str, Callable[[np.ndarray], Callable[[], object]]] = {
        "zlib CRC-32 (host)": lambda b: lambda: zlib.crc32(b, 7),
        "google-crc32c CRC-32C (host)": lambda b: lambda: crc32c(b, 7),
    }
    try:
        ext = importlib.import_module("crc32c")
        funcs["crc32c CRC-32C (host)"] = lambda b: lambda: ext.crc32c(b, 7)
    except ImportError:
        pass
    on_dev = {b.size: torch.from_numpy(b).to(dev) for b in bodies}
    funcs[f"torch_crc CRC-32C ({dev.type})"] = lambda b: lambda: device_crc32c(on_dev[b.size], 7)
    for name, make in funcs.items():
        rates = [b.size / _best(make(b), repeats, sync) / 1e9 for b in bodies]
        print(f"{name:>34} {rates[0]:>10.2f} {rates[1]:>13.2f}")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--candidates", action="store_true", help="time the candidate checksums")
    ap.add_argument("--device", default="cpu", help="the torch device of the device CRC")
    args = ap.parse_args()
    if args.candidates:
        candidates(args.repeats, args.device)
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
