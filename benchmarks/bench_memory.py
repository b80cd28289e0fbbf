"""Peak memory of `psml train` against psml_core.footprint's estimate (SLURM's mem_mb).

Trains the smoke tier's digits MLP (topk_ef, 6 iterations, 2 shards) at several widths and
worker counts, each in a fresh process, and prints its peak RSS (``ru_maxrss``) beside the
estimate the workflow would ask for without a measured peak. The estimate's constants
(psml_core/footprint.py) were fitted to these points; a ratio far from 1 means they need
refitting on this machine.

    python benchmarks/bench_memory.py
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from psml_core.data.prepare import prepare_dataset
from psml_core.footprint import estimate_mb
from psml_core.models import make_model
from psml_core.recipes import load_experiment

POINTS = [((64,), 4), ((64,), 32), ((1024, 512), 4), ((1024, 512), 32), ((2048, 1024), 16)]
PEAK = (
    "import resource, sys; from psml_core.cli import main; rc = main(sys.argv[1:]); "
    "print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
)


def main() -> None:
    exp = load_experiment({"tier": "smoke"})
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "digits"
        prepare_dataset(exp.datasets["digits"], data)
        manifest = json.loads((data / "manifest.json").read_text())
        size = sum(f["bytes"] for f in manifest["files"].values())
        print(f"{'hidden':>12} {'workers':>7} {'params':>9} {'peak MB':>8} {'estimate':>8} ratio")
        for hidden, workers in POINTS:
            spec = exp.run("digits_mlp", "topk_ef", "dc_10g", 0)
            wl = dataclasses.replace(spec.workload, hidden=hidden, iterations=6, eval_every=3)
            spec = dataclasses.replace(spec, workload=wl, workers=workers, shards=2)
            out = Path(tmp) / f"run_{workers}_{hidden[0]}"
            cmd = [sys.executable, "-c", PEAK, "train", "--run", spec.to_json(), "--data",
                   str(data), "--out", str(out)]  # fmt: skip
            env = {**os.environ, "PSML_PROGRESS": "off"}
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
            peak = float(next(ln for ln in done.stdout.splitlines() if ln.startswith("PEAK"))[5:])
            n = make_model(spec.workload, manifest["n_features"], manifest["n_classes"]).n_params
            est = estimate_mb(spec, n, size)
            print(f"{hidden!s:>12} {workers:>7} {n:>9} {peak:>8.0f} {est:>8.0f} {peak / est:.2f}")


if __name__ == "__main__":
    main()
