"""How long `psml runs` and `psml show` take to answer, against a bare Python start.

    python benchmarks/bench_cli_start.py [--tier smoke] [--repeats 5]

Run from the repository root (the commands read config/config.yaml). Prints the median
wall-clock seconds of each command and its ratio to `python -c pass` measured in the same run;
`psml show` is timed on the tier's first run id, whether or not it has results (its error line
comes after the tier is loaded, as its summary would). The goal (issue 45): under 1 s on the
2-vCPU VM, that is no engine, analysis or report import on that path.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def _median_s(cmd: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=False, timeout=120)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    """Time the commands; print one line each."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tier", default="smoke", help="the tier the commands read (default smoke)")
    ap.add_argument("--repeats", type=int, default=5, help="runs of each command (median)")
    args = ap.parse_args()
    psml = [sys.executable, "-m", "psml_core.cli"]
    listing = subprocess.run(
        [*psml, "runs", "--tier", args.tier], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    first_run = listing[1].split()[0]
    reference = _median_s([sys.executable, "-c", "pass"], args.repeats)
    print(f"python -c pass: {reference:.3f} s (the reference)")
    for name, cmd in (
        ("psml --version", [*psml, "--version"]),
        ("psml runs", [*psml, "runs", "--tier", args.tier]),
        ("psml show", [*psml, "show", first_run, "--tier", args.tier]),
    ):
        took = _median_s(cmd, args.repeats)
        print(f"{name}: {took:.3f} s wall-clock, {took / reference:.1f}x the reference")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
