"""Two versions of the sim backend on every run of a finished tier, metric by metric.

The event core changes results at the level of event order: messages that end at one
simulated instant, pushes applied in another order under ASP. This script re-runs every
``train`` job of a finished tier (its command as Snakemake recorded it) under two source
trees, at a scenario ``rate_window`` of your choice (default 0, the exact fluid model), and
reports per metric column the largest relative difference between the two.

Usage:
    python benchmarks/compare_cores.py --tier-dir DIR --old SRC_A --new SRC_B
        [--rate-window 0|keep] [--out FILE.csv] [--jobs 2] [--one-per-method]
        [--env-old KEY=VALUE ...] [--env-new KEY=VALUE ...] [--old-names]

``DIR`` is the working directory of a finished ``snakemake --config tier=...`` run (its
``.snakemake/metadata`` names each train job's command); ``SRC_A`` and ``SRC_B`` are checkouts
(``git clone``, with their ``config/``) whose ``psml_core`` each run imports (``PYTHONPATH``).
Runs go to a scratch directory. ``--rate-window keep`` runs each spec as the tier ran it;
``--env-old``/``--env-new`` set environment variables for one side (one tree under two
settings: ``--old SRC --new SRC --env-old PSML_SIM_BATCH=off --env-new PSML_SIM_BATCH=loop``
compares the batched engine's machinery with the unbatched engine). The column
``identical`` is 1 where the two metrics files are byte-identical. ``--old-names`` hands the old
tree each spec with its keys under their names before issue 47 (``device``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from psml_core.config.renames import hashed_names

# Columns compared: time and its parts (relative difference), the learning curve (absolute),
# bytes (exact by construction: a codec's wire format does not depend on event order, except
# where the controller's ratio does).
TIME_COLUMNS = ("time_s", "compute_s", "comm_s", "wait_s", "codec_s")


def train_commands(tier_dir: Path) -> list[list[str]]:
    """Every train job's ``psml train`` argument list, from Snakemake's metadata."""
    out = []
    for meta in sorted((tier_dir / ".snakemake" / "metadata").iterdir()):
        record = json.loads(meta.read_text())
        if record.get("rule") != "train" or not record.get("shellcmd"):
            continue
        cmd = shlex.split(record["shellcmd"].split(">", 1)[0])
        # A spec no longer there is a run of an older config.
        if (
            cmd[:2] == ["psml", "train"]
            and cmd not in out
            and (tier_dir / _arg(cmd, "--run")).is_file()
        ):
            out.append(cmd)
    return out


def _arg(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


def run_one(
    cmd: list[str],
    src: Path,
    tier_dir: Path,
    scratch: Path,
    window: float | None,
    extra_env: dict[str, str] | None = None,
    old_names: bool = False,
) -> Path:
    """Run one train job under ``src`` at ``window`` (None: the spec's); return its metrics.

    ``old_names``: the spec under its keys' names before issue 47 (``device`` for
    ``torch_device`` and ``cost_profile``), for a version older than the rename.
    """
    spec = json.loads((tier_dir / _arg(cmd, "--run")).read_text())
    if old_names:
        spec = hashed_names(spec)
    if window is not None:
        spec["scenario"]["rate_window"] = window
    out = scratch / _arg(cmd, "--out")
    out.mkdir(parents=True, exist_ok=True)
    spec_file = out / "spec.json"
    spec_file.write_text(json.dumps(spec, sort_keys=True))
    # `psml train ...` as `python -P -m psml_core train ...`: this interpreter, whatever PATH
    # holds; -P keeps the tier's directory (a checkout of its own) off sys.path, so that
    # PYTHONPATH decides which psml_core runs.
    args = [sys.executable, "-P", "-m", "psml_core", *cmd[1:]]
    args[args.index("--run") + 1] = str(spec_file)
    args[args.index("--out") + 1] = str(out)
    for flag in ("--data", "--partition"):
        if flag in args:
            args[args.index(flag) + 1] = str(tier_dir / _arg(cmd, flag))
    env = {**os.environ, **(extra_env or {}), "PYTHONPATH": str(src)}
    proc = subprocess.run(args, env=env, capture_output=True, text=True, cwd=tier_dir)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"{src}: {' '.join(args[:4])} failed: {last}")
    return out / "metrics.parquet"


def compare(a: Path, b: Path) -> dict[str, float]:
    """Per column: the largest relative (times) or absolute (others) difference.

    A column whose values differ in kind (NaN or infinity at different rows, another set of
    strings) counts as ``inf``; so does a column that only one side has.
    """
    x, y = pd.read_parquet(a), pd.read_parquet(b)
    if len(x) != len(y):
        return {"rows": float(abs(len(x) - len(y)))}
    diff: dict[str, float] = {c: np.inf for c in set(x.columns) ^ set(y.columns)}
    for col in x.columns.intersection(y.columns):
        if not pd.api.types.is_numeric_dtype(x[col]):
            same = x[col].astype(str).tolist() == y[col].astype(str).tolist()
            diff[col] = 0.0 if same else np.inf
            continue
        u, v = x[col].to_numpy(float), y[col].to_numpy(float)
        finite = np.isfinite(u) & np.isfinite(v)
        if not np.array_equal(u[~finite], v[~finite], equal_nan=True) or not np.array_equal(
            np.isfinite(u), np.isfinite(v)
        ):
            diff[col] = np.inf
            continue
        d = np.abs(u[finite] - v[finite])
        if col in TIME_COLUMNS:
            d = d / np.maximum(np.abs(u[finite]), 1e-12)
        diff[col] = float(d.max()) if d.size else 0.0
    last_time = x["time_s"].max(), y["time_s"].max()
    diff["end_time_rel"] = abs(last_time[1] - last_time[0]) / max(last_time[0], 1e-12)
    return diff


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tier-dir", type=Path, required=True)
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--new", type=Path, required=True)
    ap.add_argument("--rate-window", default="0", help="seconds, or keep (the spec's)")
    ap.add_argument("--env-old", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--env-new", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument(
        "--old-names",
        action="store_true",
        help="hand --old the specs under their keys' pre-rename names (device, issue 47)",
    )
    ap.add_argument(
        "--one-per-method",
        action="store_true",
        help="only the first run (by path) of each workload and method: a sample of a big tier",
    )
    args = ap.parse_args()
    window = None if args.rate_window == "keep" else float(args.rate_window)
    env_old = dict(kv.split("=", 1) for kv in args.env_old)
    env_new = dict(kv.split("=", 1) for kv in args.env_new)
    cmds = train_commands(args.tier_dir.resolve())
    if args.one_per_method:
        first: dict[tuple[str, ...], list[str]] = {}
        for cmd in sorted(cmds, key=lambda c: _arg(c, "--out")):
            first.setdefault(tuple(Path(_arg(cmd, "--out")).parts[3:5]), cmd)
        cmds = list(first.values())
    if not cmds:
        print(f"{args.tier_dir}: no train job in .snakemake/metadata", file=sys.stderr)
        return 1
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)

        def both(cmd: list[str]) -> dict[str, object]:
            tier = args.tier_dir.resolve()
            a = run_one(
                cmd, args.old.resolve(), tier, scratch / "old", window, env_old, args.old_names
            )
            b = run_one(cmd, args.new.resolve(), tier, scratch / "new", window, env_new)
            same = float(a.read_bytes() == b.read_bytes())
            return {"run": _arg(cmd, "--out"), "identical": same, **compare(a, b)}

        with ThreadPoolExecutor(args.jobs) as pool:
            rows = list(pool.map(both, cmds))
    table = pd.DataFrame(rows).set_index("run").sort_index()
    if args.out is not None:
        table.to_csv(args.out)
    pd.set_option("display.width", 200)
    print(table.drop(columns="identical").max().to_string())
    print(f"{len(table)} runs; largest difference per column above (times relative)")
    print(f"{int(table['identical'].sum())} of {len(table)} metrics files byte-identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
