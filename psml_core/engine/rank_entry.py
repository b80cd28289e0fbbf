"""What every multi-process launcher shares: its command line, the run spec, env flags."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from psml_core.config import RunSpec
from psml_core.errors import ConfigError, PsmlError
from psml_core.heap import configure_heap
from psml_core.recipes import read_run_spec

__all__ = [
    "env_flag",
    "launched_rank",
    "launched_spec",
    "launcher_parser",
    "read_run_spec",
    "run_launcher",
]


def launcher_parser(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """The options every rank's entry point takes (``--run --data --out --partition``)."""
    ap = argparse.ArgumentParser(
        prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--run", help="the run's settings: JSON text or a path to a JSON file")
    ap.add_argument("--data", help="prepared data directory")
    ap.add_argument("--out", help="output directory (written by rank 0 only)")
    ap.add_argument("--partition", help="assignment from `psml partition` (else computed)")
    ap.add_argument("--spawned", help=argparse.SUPPRESS)
    return ap


def launched_spec(args: argparse.Namespace, backend: str) -> RunSpec:
    """The run of a launched rank: the required options present, and the backend it runs."""
    if not (args.run and args.data and args.out):
        raise ConfigError("--run, --data and --out are required")
    spec = read_run_spec(args.run)
    if spec.backend != backend:
        raise ConfigError(
            f"run {spec.run_id!r} has backend {spec.backend!r}; this launcher runs {backend!r}"
        )
    return spec


def launched_rank(
    spec: RunSpec, args: argparse.Namespace, rank0: bool, run_job: Callable[[Any], object]
) -> None:
    """What a launched rank does once it has joined its run (torchrun, srun, horovodrun).

    Rank 0 trains through :func:`~psml_core.engine.training.train`, which builds the job, runs the
    backend's rank-0 part and writes the results, and prints one line. Every other rank builds
    the same job from the same spec, data and placement and hands it to ``run_job``.
    """
    from psml_core.data.store import load_prepared
    from psml_core.engine.stages import staged_job
    from psml_core.engine.training import configure_torch, load_assignment, train

    if rank0:
        summary = train(spec, args.data, args.out, assignment_path=args.partition)
        print(
            f"{spec.run_id}: accuracy {summary['final_test_accuracy']:.4f}, "
            f"{summary['total_time_s']:.4g} s ({summary['clock']})",
            flush=True,
        )
        return
    configure_torch(spec)
    assignment = load_assignment(args.partition) if args.partition else None
    run_job(staged_job(spec, load_prepared(args.data), assignment))


def env_flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    """A boolean environment variable (1/0, true/false, yes/no, on/off; unset = default)."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}={raw!r}: expected 1/0, true/false, yes/no or on/off")


def run_launcher(
    backend: str,
    module: str,
    doc: str | None,
    argv: Sequence[str] | None,
    spawned: Callable[[Path], None],
    launched: Callable[[argparse.Namespace], None],
) -> int:
    """A rank's entry point: parse, run as a spawned child or a launched rank, report errors.

    Args:
        backend: The backend's name, for messages.
        module: The launcher's module (``python -m <module>``), for the usage line.
        doc: The launcher's help text.
        argv: The arguments (None: ``sys.argv``).
        spawned: What a child of the local spawner runs, given its exchange directory.
        launched: What a rank started by a launcher runs.

    Returns:
        0, or the :class:`PsmlError`'s exit status after one line on stderr.
    """
    configure_heap()  # the codec cost table's allocator regime (psml_core.heap)
    args = launcher_parser(f"python -m {module}", doc).parse_args(argv)
    try:
        if args.spawned:
            spawned(Path(args.spawned))
        else:
            launched(args)
    except PsmlError as exc:
        print(f"psml {backend} launch: error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    return 0
