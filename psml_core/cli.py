"""The ``psml`` command line: one sub-command per workflow step.

``psml prepare|analyze|partition|train|compare|report|config|bench|validate``. Each Snakemake
rule calls exactly one of them. Errors caused by input (config, data, a crashed run) print one
line naming the culprit and the fix, and exit non-zero without a traceback.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import yaml

from psml_core import __version__
from psml_core.bench.command import bench_args, cmd_bench
from psml_core.calibrate_command import calibrate_args, cmd_calibrate
from psml_core.capabilities import backend_info
from psml_core.cli_args import (
    _analyze_args,
    _compare_args,
    _config_args,
    _config_command_args,
    _hash_args,
    _partition_args,
    _prepare_args,
    _report_args,
    _show_args,
    _train_args,
    json_arg,
)
from psml_core.config import RunSpec
from psml_core.deploy import cmd_deploy, deploy_args
from psml_core.errors import ConfigError, PsmlError, RunError
from psml_core.heap import configure_heap
from psml_core.heartbeat import stage_lines
from psml_core.recipes import read_run_spec
from psml_core.results_command import cmd_compare, cmd_report
from psml_core.run_cells import cmd_runs, cmd_show
from psml_core.run_resolver import ResolvedRun
from psml_core.tune_command import cmd_tune, tune_args
from psml_core.validate_command import cmd_validate, validate_args

__all__ = ["main"]


# --------------------------------------------------------------------------- sub-commands


def cmd_config(args: argparse.Namespace) -> int:
    """Validate a config and print the effective configuration (or one error line)."""
    from psml_core.config import deployment_config_dir, effective_config
    from psml_core.run_resolver import load_tier, user_config

    if args.readme:
        from psml_core.config.readme import config_readme

        print(config_readme(), end="")
        return 0
    user = user_config(args.configfile, args.set, args.tier)
    config_dir = args.config_dir or deployment_config_dir()
    exp = load_tier(user, config_dir)  # cross-references, the backend
    from psml_core.plugins import describe_plugins
    from psml_core.tuning.record import with_operating_points

    # The record and what the claims ask of the tier's scenarios, as the workflow checks them.
    _exp, res = with_operating_points(exp, config_dir)
    # As YAML comments: the output stays the effective configuration, parseable as it is.
    plugins = describe_plugins()
    print(f"# plugins: {len(plugins) or 'none'}" + "".join(f"\n#   {p}" for p in plugins))
    for note in res.notes:
        print(f"# {note}")
    print(yaml.safe_dump(effective_config(user, config_dir), sort_keys=True), end="")
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    """Build a data set and write it with its SHA-256 manifest."""
    from psml_core.config import DatasetSpec, build, check_part
    from psml_core.data.prepare import prepare_dataset

    data = json_arg(args.spec, "--spec")
    check_part(data, "dataset", source="--spec")
    spec = build(DatasetSpec, data, "dataset")
    manifest = prepare_dataset(spec, args.out)
    print(f"prepared {spec.name} -> {manifest}")
    return 0


def cmd_hash(args: argparse.Namespace) -> int:
    """Hash a prepared data set's features as a recipe's ``hashing`` block says (jpdc)."""
    from psml_core.config import HashingSpec, build
    from psml_core.data.hashing import hashed_dataset
    from psml_core.data.store import load_prepared, save_prepared

    spec = build(HashingSpec, json_arg(args.hashing, "--hashing"), "hashing")
    with stage_lines("hash", f"hashing {args.data} (seed {args.seed})"):
        raw = load_prepared(args.data)
        if "hashing" in raw.meta:
            raise ConfigError(
                f"--data {args.data}: the data set is hashed already ({raw.meta['hashing']}); "
                "give the prepared, raw data set"
            )
        ds = hashed_dataset(raw, spec, args.seed)
        manifest = save_prepared(ds, args.out)
    print(f"hashed {ds.name} to m = {ds.n_features} features (seed {args.seed}) -> {manifest}")
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    """Sparsity statistics of a prepared data set (and of its hashed versions, jpdc)."""
    from psml_core.config import HashingSpec, build
    from psml_core.data.store import load_prepared
    from psml_core.placement.sparsity import analyze, write_analysis

    hashing = [
        build(HashingSpec, json_arg(text, "--hashing"), "hashing") for text in args.hashing or []
    ]
    with stage_lines("analyze", f"sparsity statistics of {args.data}"):
        ds = load_prepared(args.data)
        stats = analyze(ds, workers=args.workers, seed=args.seed, hashing=hashing)
        write_analysis(stats, args.out)
    return 0


def cmd_partition(args: argparse.Namespace) -> int:
    """Compute a run's placement once, with its predicted traffic."""
    spec = read_run_spec(args.run)
    what = (
        f"placing {spec.workload.name}'s samples and keys for {spec.method.name} (placement "
        f"{spec.method.placement.name}, {spec.workers} workers, {spec.shards} shards)"
    )
    with stage_lines("partition", what):
        _partition(spec, args)
    return 0


def _oracle_of(spec: RunSpec, ds: Any, model: Any, per_step: Any) -> dict[str, Any]:
    """The data's oracle bound and this placement's share of it (placement/oracle.py).

    Only where it is defined: planted groups, one colocated shard per worker, a sparse model
    (its keys have an incidence). Elsewhere {} (the report then prints no bound).
    """
    from psml_core.errors import ConfigError
    from psml_core.placement.oracle import dataset_oracle

    if ds.groups_train is None or not spec.colocated or spec.shards != spec.workers:
        return {}
    if not isinstance(per_step, dict):
        return {}
    try:
        bound = dataset_oracle(ds, model, spec.workers, spec.workload.batch_size, spec.seed)
    except ConfigError as exc:  # a dense model, or fewer groups than workers
        return {"unavailable": str(exc)}
    remote = float(per_step["remote_bytes_up"]) + float(per_step["remote_bytes_down"])
    return {**bound.to_dict(), "share": bound.share_of(remote)}


def _partition(spec: RunSpec, args: argparse.Namespace) -> None:
    """``psml partition``'s work: the assignment and its predicted traffic, written."""
    from psml_core.atomic import write_bytes, write_json
    from psml_core.data.store import load_prepared, npz_bytes
    from psml_core.engine.stages import hash_stage, place_stage
    from psml_core.placement import predicted_traffic

    # Same data as build_job: the hash stage's output, or hashed here (jpdc's hashing block).
    ds = hash_stage(spec, load_prepared(args.data), "--run")
    placed = place_stage(spec, ds)
    placement, model, problem = placed.placement, placed.model, placed.problem
    assignment = placed.assignment
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
        partition_wall_clock_s=placed.seconds,
    )
    if "hashing" in ds.meta:
        traffic["hashing"] = ds.meta["hashing"]
    if problem.incidence is None and not placement.needs_incidence:
        traffic["incidence"] = "not built (the placement does not read it): all keys counted"
    oracle = _oracle_of(spec, ds, model, traffic.get("per_step"))
    if oracle:
        traffic["oracle"] = oracle
    write_bytes(
        args.out,
        npz_bytes({"sample_owner": assignment.sample_owner, "key_owner": assignment.key_owner}),
    )
    write_json(args.traffic, traffic)


def cmd_train(args: argparse.Namespace) -> int:
    """Train one run; writes metrics.parquet and summary.json."""
    run = _train_run(args)
    if backend_info(run.spec.backend).launch_module and args.launcher != "local":
        return _launch_ranks(run, args.launcher)
    summary = _train_here(run)
    acc = summary["final_test_accuracy"]
    print(
        f"{run.spec.run_id}: accuracy {acc:.4f}, {summary['total_time_s']:.4g} s "
        f"({summary['clock']}), {summary['bytes_up']} B up, {summary['bytes_down']} B down"
    )
    return 0


def _train_run(args: argparse.Namespace) -> ResolvedRun:
    """The run ``psml train`` trains: ``--run``, or a cell by name with the workflow's files.

    The only place ``psml train``'s arguments are read; the resolver does the rest.

    Raises:
        ConfigError: both or neither form given, a name missing, or a cell not in the tier.
    """
    from psml_core.run_resolver import DEFAULT_CONFIGFILE, resolve_run, resolve_spec, user_config

    cell = ("workload", "method", "scenario", "seed")
    given = [f"--{f}" for f in cell if getattr(args, f) is not None]
    files = {"data": args.data, "partition": args.partition, "calibration": args.calibration}
    if args.run is not None:
        # The config flags select a cell too; with --run they would be silently ignored.
        given += [
            f"--{f.replace('_', '-')}" for f in ("set", "tier", "config_dir") if getattr(args, f)
        ]
        if args.configfile != DEFAULT_CONFIGFILE:
            given.append("--configfile")
        if given:
            raise ConfigError(f"give --run or {', '.join(given)} (a run by name), not both")
        if args.data is None or args.out is None:
            raise ConfigError("--run needs --data and --out")
        return resolve_spec(read_run_spec(args.run), out=args.out, **files)
    if len(given) < len(cell):
        missing = ", ".join(f"--{f}" for f in cell if f"--{f}" not in given)
        raise ConfigError(
            f"give the run as --workload, --method, --scenario and --seed (missing {missing}), "
            "or as --run JSON; `psml runs` lists the runs"
        )
    user = user_config(args.configfile, args.set, args.tier)
    return resolve_run(
        user, args.workload, args.method, args.scenario, args.seed,
        config_dir=args.config_dir, out=args.out, **files,
    )  # fmt: skip


def _train_here(run: ResolvedRun) -> dict[str, Any]:
    """:func:`~psml_core.engine.training.train` in this process (a launched backend: its ranks)."""
    from psml_core.engine.training import train

    return train(run.spec, run.data, run.out, assignment_path=run.partition)


def _launch_ranks(run: ResolvedRun, launcher: str) -> int:
    """Start a launched backend's processes (dist: P + S ranks) with srun or torchrun.

    Inside a SLURM allocation (srun) or here (torchrun), each runs the descriptor's
    ``launch_module``.
    """
    import shutil
    import subprocess

    spec = run.spec
    info = backend_info(spec.backend)
    n = info.processes(spec.workers, spec.shards)
    # The ranks read the resolved spec (at its point, calibrated), not the one given.
    rank_args = ["--run", spec.to_json(), "--data", str(run.data), "--out", str(run.out)]
    if run.partition is not None:
        rank_args += ["--partition", str(run.partition)]
    module = ["-m", str(info.launch_module)]
    if launcher == "srun":
        cmd = ["srun", "-n", str(n), sys.executable, *module, *rank_args]
        if shutil.which(cmd[0]) is None:
            raise ConfigError(f"--launcher {launcher}: {cmd[0]!r} is not on PATH")
        return subprocess.run(cmd, check=False).returncode
    if shutil.which("torchrun") is None:
        raise ConfigError(f"--launcher {launcher}: 'torchrun' is not on PATH")
    return _torchrun(spec, n, [*module, "--", *rank_args], run.out)


def _torchrun(spec: RunSpec, n: int, rank_cmd: list[str], out: Path) -> int:
    """Torchrun with every rank's output and torchrun's own in ``<out>.ranks/``.

    torch's store traces and torchrun's failure report (tens of lines per rank) stay in those
    files; psml's own lines (``psml ...``, one per rank when a run fails) are printed here, and
    a failed run ends in one error line naming the files.
    """
    import shutil
    import subprocess

    logs = out.with_name(out.name + ".ranks")
    shutil.rmtree(logs, ignore_errors=True)  # torchrun adds a folder per launch: keep this one's
    logs.mkdir(parents=True)
    # "--" keeps torchrun from reading --run as its own --run-path; -r 3 redirects both streams.
    cmd = ["torchrun", "--standalone", f"--nproc-per-node={n}", "--log-dir", str(logs), "-r", "3"]
    with open(logs / "torchrun.log", "w", encoding="utf-8") as agent:
        code = subprocess.run([*cmd, *rank_cmd], check=False, stdout=agent, stderr=agent).returncode
    for path in sorted(logs.rglob("std*.log")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("psml "):
                print(line, file=sys.stderr if "error" in line or "stops" in line else sys.stdout)
    if code != 0:
        raise RunError(
            f"dist run {spec.run_id!r} failed (torchrun exited with code {code}); each rank's "
            f"output and torchrun's report are in {logs}/"
        )
    return 0


_COMMANDS: tuple[
    tuple[str, Callable[[argparse.Namespace], int], Callable[[Any], None], str], ...
] = (
    (
        "config",
        cmd_config,
        _config_command_args,
        "validate a config and print the effective configuration",
    ),
    ("prepare", cmd_prepare, _prepare_args, "build a data set and its SHA-256 manifest"),
    ("analyze", cmd_analyze, _analyze_args, "sparsity statistics of a prepared data set"),
    ("hash", cmd_hash, _hash_args, "hash a prepared data set's features (a recipe's hashing)"),
    (
        "partition",
        cmd_partition,
        _partition_args,
        "compute a run's placement and predicted traffic",
    ),
    (
        "calibrate-sweep",
        cmd_calibrate,
        calibrate_args,
        "fit a calibrated sweep's factor on its tuning seed (a workflow step; to measure this "
        "machine into a device profile: `psml bench calibrate`)",
    ),
    ("train", cmd_train, _train_args, "train one run; writes metrics.parquet and summary.json"),
    (
        "tune",
        cmd_tune,
        lambda p: tune_args(p, _config_args),
        "choose operating points (lr, momentum, warm-up): one tune job, or a tier's record",
    ),
    ("runs", cmd_runs, _config_args, "list the tier's runs and whether each has results"),
    ("show", cmd_show, _show_args, "print one run's summary (accuracy, time, bytes, paths)"),
    ("compare", cmd_compare, _compare_args, "collect run summaries into tables"),
    ("report", cmd_report, _report_args, "build the PDF report"),
    ("deploy", cmd_deploy, deploy_args, "a directory running this checkout's workflow as a module"),
    (
        "bench",
        cmd_bench,
        bench_args,
        "performance benchmark (prints ratios to same-run references), or `calibrate`: measure "
        "this machine into a device profile (config/devices/<name>.yaml)",
    ),
    ("validate", cmd_validate, validate_args, "real processes on shaped links against the sim"),
)
"""Each subcommand: its name, its function, its arguments and its help line."""


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose "invalid choice" error suggests the closest choice.

    Python 3.14's ``suggest_on_error`` does this; psml supports 3.11 and 3.12.
    """

    def error(self, message: str) -> NoReturn:
        """Print usage and the one error line (with "did you mean ...?"), exit with status 2."""
        import difflib

        found = re.search(r"invalid choice: '?([^' ]*)'? \(choose from (.*)\)$", message)
        if found:
            choices = [c.strip(" '") for c in found.group(2).split(",")]
            close = difflib.get_close_matches(found.group(1), choices, n=1)
            if close:
                message = message.replace(
                    f" (choose from {found.group(2)})", f"; did you mean {close[0]!r}?"
                )
        super().error(message)


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="psml", description=__doc__.splitlines()[0].replace("``", ""))
    ap.add_argument("--version", action="version", version=f"psml {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, fn, add_args, help_ in _COMMANDS:
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(fn=fn)
        add_args(p)
    return ap


def _pipe_closed() -> int:
    """``psml runs | head -1``: the reader left; stop quietly, as ``cat`` does (status 141)."""
    # What is still buffered for stdout would fail again when Python flushes it at exit.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + 13  # killed by SIGPIPE, as a shell reports it


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``psml`` console script."""
    configure_heap()
    args = _parser().parse_args(argv)
    try:
        code = int(args.fn(args))
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        return _pipe_closed()
    except PsmlError as exc:
        print(f"psml {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"psml {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
