"""Codec encode/decode throughput vs memcpy and torch.topk (see benchmarks/README.md).

Usage: python benchmarks/bench_codecs.py [--n 25000000] [--threads 1,all] [--codecs topk,dfs]
Equivalent to `psml bench codecs ...`.
"""

from __future__ import annotations

import sys

from psml_core.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["bench", "codecs", *sys.argv[1:]]))
