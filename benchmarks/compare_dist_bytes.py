"""Two versions of the dist backend, record by record: the bytes each worker sent and received.

The dist backend's times are wall-clock and vary from run to run, but its bytes do not: every
byte handed to gloo is its codec's wire format or the protocol header. A change to how the
ranks move messages (the shard's service, the wire) must leave each record's bytes as they
were. This script runs small dist runs of the smoke tier's recipes (2 workers, 2 shards,
digits MLP, a few iterations) under two source trees and compares, per record (iteration,
worker), the bytes up and down, per shard, and the remote part.

Usage:
    python benchmarks/compare_dist_bytes.py --old SRC_A --new SRC_B
        [--methods dense_bsp,topk_ef,...] [--iterations 8]

``SRC_A`` and ``SRC_B`` are checkouts whose ``psml_core`` each side imports (``PYTHONPATH``);
each side reads the smoke tier from its own ``config/``. ``touched`` is ``dense_bsp`` with
``pull: touched``. Recipes whose round count depends on measured time (PCP, DC2's controller)
have no deterministic record count and are not in the default list. Prints one line per recipe
and exits 1 if any differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT = "dense_bsp,topk_ef,ssp_2,touched,dfs,ratatouille,omnireduce,topk_mc,snappy_bsp"

# Runs under the side's own psml_core; prints {method: [record tuples]} as JSON.
SIDE = r"""
import dataclasses, json, sys
from pathlib import Path
from psml_core.recipes import load_experiment
from psml_core.data.prepare import prepare_dataset
from psml_core.data.store import load_prepared
from psml_core.engine import DistBackend, staged_job

src, scratch, methods, iterations = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
smoke = load_experiment({"tier": "smoke"}, Path(src) / "config")
data = scratch / "digits"
if not data.exists():
    prepare_dataset(smoke.datasets["digits"], data)
ds = load_prepared(data)
out = {}
for method in methods.split(","):
    run = smoke.run("digits_mlp", "dense_bsp" if method == "touched" else method, "dc_10g",
                    smoke.seeds[0])
    if method == "touched":
        run = dataclasses.replace(run, method=dataclasses.replace(run.method, pull="touched"))
    wl = dataclasses.replace(run.workload, iterations=iterations)
    spec = dataclasses.replace(run, workload=wl, workers=2, shards=2, backend="dist")
    recs = DistBackend().run(staged_job(spec, ds))
    out[method] = sorted(
        (r.iteration, r.worker, r.bytes_up, r.bytes_down, list(r.shard_bytes_up),
         list(r.shard_bytes_down), r.remote_bytes_up, r.remote_bytes_down) for r in recs)
print(json.dumps(out))
"""


def side(src: Path, scratch: Path, methods: str, iterations: int) -> dict[str, list]:
    """The records' bytes of every recipe under ``src``'s psml_core."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, "-P", "-c", SIDE, str(src), str(scratch), methods, str(iterations)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"{src}: failed: {last}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--new", type=Path, required=True)
    ap.add_argument("--methods", default=DEFAULT)
    ap.add_argument("--iterations", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="psml-dist-bytes-") as tmp:
        scratch = Path(tmp)
        old = side(args.old.resolve(), scratch, args.methods, args.iterations)
        new = side(args.new.resolve(), scratch, args.methods, args.iterations)
    differ = 0
    for method in args.methods.split(","):
        a, b = old[method], new[method]
        same = a == b
        differ += not same
        total = sum(r[2] + r[3] for r in a)
        verdict = "identical" if same else "DIFFERENT"
        print(f"{method:<12} {len(a):>3} records, {total:>9} B: {verdict}")
    print(f"{len(old) - differ} of {len(old)} recipes: every record's bytes identical")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
