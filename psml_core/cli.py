"""The ``psml`` command line: one sub-command per workflow step.

``psml prepare|analyze|partition|train|compare|report|config|bench``. Each Snakemake rule calls
exactly one of them. Errors caused by input (config, data, a crashed run) print one line naming the
culprit and the fix, and exit non-zero without a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from psml_core import __version__
from psml_core.config import RunSpec
from psml_core.errors import ConfigError, DataError, PsmlError
from psml_core.recipes import read_run_spec

__all__ = ["main"]


def _json_arg(text: str, what: str) -> Any:
    """JSON given inline or as the path of a JSON file (the workflow passes files)."""
    if not text.lstrip().startswith(("{", "[")):
        try:
            text = Path(text).read_text(encoding="utf-8")
        except OSError as exc:
            why = f"neither JSON nor a readable file ({exc})"
            raise ConfigError(f"{what} {text!r}: {why}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what} is not valid JSON: {exc}") from None


def _paths_arg(paths: Sequence[str]) -> list[Path]:
    """Paths given one by one, or ``@list``: a file holding one path per line."""
    out: list[Path] = []
    for item in paths:
        if item.startswith("@"):
            try:
                lines = Path(item[1:]).read_text(encoding="utf-8").splitlines()
            except OSError as exc:
                raise ConfigError(f"{item!r}: cannot read the list of paths ({exc})") from None
            out += [Path(line) for line in lines if line.strip()]
        else:
            out.append(Path(item))
    return out


# --------------------------------------------------------------------------- sub-commands


def cmd_config(args: argparse.Namespace) -> int:
    """Validate a config and print the effective configuration (or one error line)."""
    from psml_core.config import effective_config, load_yaml
    from psml_core.recipes import load_experiment

    user = load_yaml(args.configfile) or {}
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        user[key] = yaml.safe_load(value)
    load_experiment(user, args.config_dir)  # cross-reference checks
    print(yaml.safe_dump(effective_config(user, args.config_dir), sort_keys=True), end="")
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    """Build a data set and write it with its SHA-256 manifest."""
    from psml_core.config import DatasetSpec, build, check_part
    from psml_core.data.prepare import prepare_dataset

    data = _json_arg(args.spec, "--spec")
    check_part(data, "dataset", source="--spec")
    spec = build(DatasetSpec, data, "dataset")
    manifest = prepare_dataset(spec, args.out)
    print(f"prepared {spec.name} -> {manifest}")
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    """Sparsity statistics of a prepared data set (and of its hashed versions, jpdc)."""
    from psml_core.config import HashingSpec, build
    from psml_core.data.store import load_prepared
    from psml_core.placement.sparsity import analyze, write_analysis

    hashing = [
        build(HashingSpec, _json_arg(text, "--hashing"), "hashing") for text in args.hashing or []
    ]
    ds = load_prepared(args.data)
    stats = analyze(ds, workers=args.workers, seed=args.seed, hashing=hashing)
    write_analysis(stats, args.out)
    return 0


def cmd_partition(args: argparse.Namespace) -> int:
    """Compute a run's placement once, with its predicted traffic."""
    from psml_core.atomic import write_bytes, write_json
    from psml_core.data.hashing import hashed_dataset
    from psml_core.data.store import load_prepared, npz_bytes
    from psml_core.models import make_model
    from psml_core.placement import PLACEMENTS, PlacementProblem, predicted_traffic

    spec = read_run_spec(args.run)
    # Same data as build_job: hashed first for a recipe with a hashing block (jpdc).
    ds = hashed_dataset(load_prepared(args.data), spec.method.hashing, spec.seed)
    model = make_model(spec.workload, ds.n_features, ds.n_classes)
    problem = PlacementProblem(
        n_samples=len(ds.y_train),
        n_keys=model.n_params,
        incidence=model.incidence(ds.X_train),
        seed=spec.seed,
    )
    t0 = time.perf_counter()
    assignment = PLACEMENTS.build(spec.method.placement).assign(problem, spec.workers, spec.shards)
    seconds = time.perf_counter() - t0
    traffic = predicted_traffic(
        problem,
        assignment,
        spec.workers,
        spec.shards,
        spec.colocated,
        batch_size=spec.workload.batch_size,
    )
    traffic.update(
        placement=spec.method.placement.name,
        workload=spec.workload.name,
        method=spec.method.name,
        partition_wall_clock_s=seconds,
    )
    if "hashing" in ds.meta:
        traffic["hashing"] = ds.meta["hashing"]
    write_bytes(
        args.out,
        npz_bytes({"sample_owner": assignment.sample_owner, "key_owner": assignment.key_owner}),
    )
    write_json(args.traffic, traffic)
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    """Train one run; writes metrics.parquet and summary.json."""
    from psml_core.engine.training import train

    spec = read_run_spec(args.run)
    if spec.backend == "dist" and args.launcher != "local":
        return _launch_dist(spec, args)
    summary = train(spec, args.data, args.out, assignment_path=args.partition)
    acc = summary["final_test_accuracy"]
    print(
        f"{spec.run_id}: accuracy {acc:.4f}, {summary['total_time_s']:.4g} s "
        f"({summary['clock']}), {summary['bytes_up']} B up, {summary['bytes_down']} B down"
    )
    return 0


def _launch_dist(spec: RunSpec, args: argparse.Namespace) -> int:
    """Start the P + S ranks of a dist run with srun (inside a SLURM allocation) or torchrun."""
    import shutil
    import subprocess

    n = spec.workers + spec.shards
    rank_args = ["--run", args.run, "--data", args.data, "--out", args.out]
    if args.partition:
        rank_args += ["--partition", args.partition]
    module = ["-m", "psml_core.engine.torchdist.launch"]
    if args.launcher == "srun":
        cmd = ["srun", "-n", str(n), sys.executable, *module, *rank_args]
    else:  # torchrun: "--" keeps it from reading --run as its own --run-path
        cmd = ["torchrun", "--standalone", f"--nproc-per-node={n}", *module, "--", *rank_args]
    if shutil.which(cmd[0]) is None:
        raise ConfigError(f"--launcher {args.launcher}: {cmd[0]!r} is not on PATH")
    return subprocess.run(cmd, check=False).returncode


def cmd_compare(args: argparse.Namespace) -> int:
    """Collect run summaries into runs.csv and aggregate.csv."""
    from psml_core.analysis.aggregate import aggregate_experiments, collect_runs, write_runs_csv

    runs = collect_runs(_paths_arg(args.summaries))
    write_runs_csv(runs, args.out)
    config = _json_arg(args.experiment, "--experiment") if args.experiment else None
    write_runs_csv(aggregate_experiments(runs, config), args.aggregate)
    if args.claims:
        import pandas as pd

        from psml_core.analysis.claims import evaluate_claims, load_papers

        if not args.papers or not args.experiment:
            raise ConfigError("psml compare --claims needs --papers and --experiment")
        from psml_core.analysis.regime_map import map_rows, map_statements

        exp = _json_arg(args.experiment, "--experiment")
        papers = load_papers(args.papers)
        results = evaluate_claims(
            papers,
            runs,
            exp.get("experiments", {}),
            sorted(exp.get("scenarios", {})),
            config=exp,
        )
        rmap = map_rows(papers, runs, exp)
        said = map_statements(rmap)
        for res in results:
            res.regime_map = said.get(res.claim, "")
        table = pd.DataFrame([r.row() for r in results])
        write_runs_csv(table, args.claims)
        if args.regime_map:
            from psml_core.atomic import atomic_path

            with atomic_path(args.regime_map) as tmp:
                rmap.to_parquet(tmp, index=False)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Build the PDF report from the results."""
    from psml_core.report import build_report

    metrics = {}
    for path in _paths_arg(args.metrics):
        summary = path.with_name("summary.json")
        if not summary.is_file():
            raise DataError(f"{summary}: missing next to {path}; re-run its training job")
        metrics[json.loads(summary.read_text())["run_id"]] = path
    build_report(
        runs_csv=Path(args.runs),
        aggregate_csv=Path(args.aggregate),
        metrics=metrics,
        sparsity=[Path(p) for p in args.sparsity],
        partition=_paths_arg(args.partition),
        experiment=_json_arg(args.experiment, "--experiment"),
        claims_csv=Path(args.claims),
        papers_dir=Path(args.papers),
        out_pdf=Path(args.out),
        workdir=Path(args.workdir),
        regime_map=Path(args.regime_map) if args.regime_map else None,
    )
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Run a performance benchmark and print its table, or calibrate a device profile."""
    if args.what == "calibrate":
        return _bench_calibrate(args)
    from psml_core.atomic import write_json
    from psml_core.bench.codecs import bench_codecs, format_table, rows_as_dicts

    threads = tuple(0 if t == "all" else int(t) for t in args.threads.split(","))
    print(format_table([], header=True))
    rows = bench_codecs(
        n=args.n,
        ratios=tuple(float(r) for r in (args.ratios or "0.1,0.01,0.001").split(",")),
        threads=threads,
        codecs=tuple(args.codecs.split(",")) if args.codecs else None,
        repeats=args.repeats or 3,
        log=lambda line: print(line, flush=True),
    )
    if args.json:
        write_json(args.json, rows_as_dicts(rows))
    return 0


def _bench_calibrate(args: argparse.Namespace) -> int:
    """``psml bench calibrate``: measure this machine into a device file; estimate GPU files."""
    from psml_core.bench import calibrate as cal
    from psml_core.config import load_yaml

    gpus = [g for g in (args.estimate_gpu or "").split(",") if g]
    if args.source and args.out:
        raise ConfigError("give --out (measure this machine) or --from (reuse a file), not both")
    if not (args.source or args.out):
        raise ConfigError("psml bench calibrate needs --out FILE (or --from FILE --estimate-gpu)")
    if args.source and not gpus:
        raise ConfigError("--from only feeds --estimate-gpu; name the GPUs (e.g. v100,a100)")
    unknown = [g for g in gpus if g not in cal.GPU_SPECS]
    if unknown:
        raise ConfigError(
            f"--estimate-gpu: no cited figures for {', '.join(unknown)}; known GPUs: "
            + ", ".join(sorted(cal.GPU_SPECS))
        )
    if args.out:
        device = args.device or Path(args.out).stem
        command = f"psml bench calibrate --device {device} --out {args.out}"
        settings: dict[str, Any] = {}
        if args.quick:
            command += " --quick"
            q = cal.QUICK
            settings = {"sizes": q.sizes, "ratios": q.ratios, "repeats": q.repeats}
            settings["min_time"] = q.min_time
        if args.sizes:
            command += f" --sizes {args.sizes}"
            settings["sizes"] = tuple(int(n) for n in args.sizes.split(","))
        if args.ratios:
            command += f" --ratios {args.ratios}"
            settings["ratios"] = tuple(float(r) for r in args.ratios.split(","))
        if args.repeats:
            command += f" --repeats {args.repeats}"
            settings["repeats"] = args.repeats
        if args.codecs:
            command += f" --codecs {args.codecs}"
            settings["codecs"] = tuple(args.codecs.split(","))
        spec = cal.Calibration(
            device=device,
            command=command,
            quick=args.quick,
            note=args.note or "",
            log=lambda line: print(line, flush=True),
            **settings,
        )
        content = cal.calibrate(spec)
        header = (
            f"Device profile {device!r}, measured by `{command}`.\n"
            "Do not edit by hand: re-run the command (see benchmarks/README.md, Calibration)."
        )
        cal.write_device(args.out, content, header)
        print(cal.format_summary(content))
        print(f"wrote {args.out}")
        source_path, cpu = Path(args.out), content
    else:
        source_path = Path(args.source)
        cpu = load_yaml(source_path, what="device file")
        if not isinstance(cpu, dict) or not isinstance(cpu.get("codec_costs"), dict):
            raise ConfigError(f"device file {str(source_path)!r} has no codec_costs table")
    for gpu in gpus:
        out = source_path.parent / f"{gpu}.yaml"
        content = cal.estimate_gpu(cpu, gpu, source_path.name)
        header = (
            f"Device profile {gpu!r}: compute cited, codec costs estimated from "
            f"{source_path.name} by\n`psml bench calibrate --from {source_path} "
            f"--estimate-gpu {gpu}` (regenerated, never edited by hand)."
        )
        cal.write_device(out, content, header)
        print(f"wrote {out}")
    return 0


# --------------------------------------------------------------------------- parser


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="psml", description=__doc__.splitlines()[0].replace("``", ""))
    ap.add_argument("--version", action="version", version=f"psml {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, fn: Callable[[argparse.Namespace], int], help_: str) -> Any:
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(fn=fn)
        return p

    p = add("config", cmd_config, "validate a config and print the effective configuration")
    p.add_argument(
        "--configfile",
        default="config/config.yaml",
        help="your config (its tier plus overrides; default: config/config.yaml)",
    )
    p.add_argument("--config-dir", default="config", help="directory with tiers/ and methods.yaml")
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a key, value as YAML; repeatable (e.g. --set tier=small --set 'seeds=[0]')",
    )

    p = add("prepare", cmd_prepare, "build a data set and its SHA-256 manifest")
    p.add_argument("--spec", required=True, help="the dataset's settings as JSON")
    p.add_argument("--out", required=True, help="output directory")

    p = add("analyze", cmd_analyze, "sparsity statistics of a prepared data set")
    p.add_argument("--data", required=True, help="prepared data directory")
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--hashing",
        action="append",
        metavar="JSON",
        help="a recipe's hashing block, e.g. '{\"ratio\": 0.0625}' (repeatable): adds hashed stats",
    )
    p.add_argument("--out", required=True, help="output JSON")

    p = add("partition", cmd_partition, "compute a run's placement and predicted traffic")
    p.add_argument(
        "--run", required=True, help="the run's settings: JSON text or a JSON file's path"
    )
    p.add_argument("--data", required=True, help="prepared data directory")
    p.add_argument("--out", required=True, help="output assignment (.npz)")
    p.add_argument("--traffic", required=True, help="output predicted traffic (.json)")

    p = add("train", cmd_train, "train one run; writes metrics.parquet and summary.json")
    p.add_argument(
        "--run", required=True, help="the run's settings: JSON text or a JSON file's path"
    )
    p.add_argument("--data", required=True, help="prepared data directory")
    p.add_argument("--partition", help="assignment from `psml partition` (else computed)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--launcher",
        choices=["local", "srun", "torchrun"],
        default="local",
        help="how a dist run starts its P+S ranks: spawn locally, srun (SLURM), torchrun",
    )

    p = add("compare", cmd_compare, "collect run summaries into tables")
    p.add_argument(
        "--summaries", nargs="+", required=True, help="summary.json files, or @FILE listing them"
    )
    p.add_argument("--out", required=True, help="runs.csv")
    p.add_argument(
        "--aggregate",
        required=True,
        help="aggregate.csv: means over seeds, over every run and per experiment",
    )
    p.add_argument("--papers", help="directory of config/papers/*.yaml (reported results)")
    p.add_argument("--experiment", help="the effective config as JSON (its experiments)")
    p.add_argument("--claims", help="claims.csv: every claim measured, with its verdict")
    p.add_argument(
        "--regime-map", help="regime_map.parquet: each mapped claim's effect along its axis"
    )

    p = add("report", cmd_report, "build the PDF report")
    p.add_argument("--runs", required=True, help="runs.csv from `psml compare`")
    p.add_argument("--aggregate", required=True, help="aggregate.csv from `psml compare`")
    p.add_argument(
        "--metrics", nargs="+", required=True, help="metrics.parquet files, or @FILE listing them"
    )
    p.add_argument("--sparsity", nargs="*", default=[])
    p.add_argument(
        "--partition", nargs="*", default=[], help="predicted-traffic JSON files, or @FILE"
    )
    p.add_argument("--experiment", required=True, help="the effective config as JSON")
    p.add_argument(
        "--claims", required=True, help="claims.csv from `psml compare --claims` (verdicts)"
    )
    p.add_argument(
        "--papers", required=True, help="directory of the paper files (config/papers/*.yaml)"
    )
    p.add_argument("--regime-map", help="regime_map.parquet from `psml compare --regime-map`")
    p.add_argument("--workdir", required=True, help="directory for figures and tables")
    p.add_argument("--out", required=True, help="output PDF")
    p = add(
        "bench",
        cmd_bench,
        "performance benchmark (prints ratios to same-run references), or `calibrate`: measure "
        "this machine into a device profile (config/devices/<name>.yaml)",
    )
    p.add_argument("what", choices=["codecs", "calibrate"], help="which benchmark")
    p.add_argument("--n", type=int, default=25_000_000, help="codecs: vector length (float32)")
    p.add_argument(
        "--ratios", help="comma list (codecs: 0.1,0.01,0.001; calibrate: 0.001,0.01,0.1,0.3,1)"
    )
    p.add_argument("--threads", default="1,all", help="codecs: comma list; 'all' = every core")
    p.add_argument("--codecs", default="", help="comma list (default: all registered)")
    p.add_argument("--repeats", type=int, help="timed repetitions (codecs: 3, calibrate: 5)")
    p.add_argument("--json", help="codecs: also write the rows as JSON here")
    p.add_argument("--device", help="calibrate: the profile's name (default: --out's stem)")
    p.add_argument("--out", help="calibrate: the device file to write (measured on this machine)")
    p.add_argument(
        "--sizes", help="calibrate: comma list of vector lengths (default 2^10 ... 2^24)"
    )
    p.add_argument(
        "--quick", action="store_true", help="calibrate: tiny sizes, 1 repeat (tests only)"
    )
    p.add_argument("--note", help="calibrate: words added to the measured source's detail")
    p.add_argument(
        "--estimate-gpu",
        metavar="GPUS",
        help="calibrate: comma list (v100,a100): also write <GPU>.yaml next to the CPU file, "
        "codec costs scaled from it, compute cited",
    )
    p.add_argument(
        "--from",
        dest="source",
        metavar="FILE",
        help="calibrate: take the CPU table from this device file instead of measuring",
    )
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``psml`` console script."""
    args = _parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except PsmlError as exc:
        print(f"psml {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"psml {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
