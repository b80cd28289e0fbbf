"""``psml tune``: one tune job (the workflow's rule), or a tier's whole record in one line.

* ``psml tune --spec FILE --data DIR --out FILE``: the workflow's ``tune`` rule; tunes one
  (workload, recipe) and writes its entry as JSON.
* ``psml tune --tier small --record``: tunes every (workload, recipe) of the tier that the
  record ``config/operating_points/<tier>.yaml`` lacks or holds stale (``--force``: all of
  them; ``--only KEY``: only those of them), ``--jobs N`` at a time, and writes the record
  after each, so that an interrupted command keeps what it finished.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any

from psml_core.config.reading import load_json
from psml_core.errors import ConfigError, RunError

if TYPE_CHECKING:
    from psml_core.config import Experiment, TuningSpec
    from psml_core.tuning.targets import TuneTarget

__all__ = ["cmd_tune", "tune_args"]


def _exit_with_parent(parent: int, every_s: float = 2.0) -> None:
    """Pool worker initializer: exit when ``psml tune`` is gone (killed, not shut down).

    A spawned worker runs a whole target (several full runs); without this it would go on
    training for minutes after its parent was killed, on the cores the user meant to free.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(1)

    threading.Thread(target=watch, name="psml-tune-parent-watch", daemon=True).start()


def tune_args(p: argparse.ArgumentParser, config_args: Callable[[Any], None]) -> None:
    """The arguments of ``psml tune``; ``config_args`` adds the CLI's config arguments."""
    job = p.add_argument_group("one tune job (the workflow's tune rule)")
    job.add_argument("--spec", help="the tune job's settings (JSON, from the tune_spec rule)")
    job.add_argument("--data", help="the prepared data set of the target's workload")
    job.add_argument(
        "--out", help="the entry's JSON (results/<tier>/tune/<workload>/<method>.json)"
    )
    rec = p.add_argument_group("or a tier's record, in one command")
    rec.add_argument(
        "--record",
        nargs="?",
        const="",
        metavar="FILE",
        help="tune the keys the record lacks or holds stale, and write it (default: "
        "<config dir>/operating_points/<tier>.yaml)",
    )
    rec.add_argument("--force", action="store_true", help="re-tune every key of the tier")
    rec.add_argument("--only", action="append", metavar="KEY", help="only <workload>/<method>")
    rec.add_argument("--jobs", type=int, default=1, help="targets tuned at once (processes)")
    rec.add_argument(
        "--workdir",
        default=None,
        help="where the candidates' runs go (default: results/<tier>/tune)",
    )
    config_args(rec)


def cmd_tune(args: argparse.Namespace) -> int:
    """Run one tune job, or tune a tier's record."""
    if args.record is not None:
        if args.spec or args.data or args.out:
            raise ConfigError("give --spec/--data/--out (one tune job) or --record, not both")
        return _tune_record(args)
    if not (args.spec and args.data and args.out):
        raise ConfigError("psml tune needs --spec, --data and --out, or --record (a tier)")
    return _tune_job(args)


def _tune_job(args: argparse.Namespace) -> int:
    """The workflow's tune rule: one target's sweep, its entry as JSON."""
    from psml_core.atomic import write_json
    from psml_core.config import TuningSpec, build
    from psml_core.recipes import read_run_spec
    from psml_core.tuning.objective import Objective
    from psml_core.tuning.record import check_entry
    from psml_core.tuning.sweep import tune
    from psml_core.tuning.targets import TuneTarget, fingerprint

    try:
        data = load_json(args.spec, "--spec")
        spec = read_run_spec(json.dumps(data["run"]))
        tuning = build(TuningSpec, data["tuning"], "tuning")
        objective = build(Objective, data.get("objective") or {}, "objective")
        target = TuneTarget(
            data["key"], data["scenario"], spec, bool(data["scenario_free"]), data["fingerprint"],
            objective,
        )  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"--spec {args.spec}: not a tune job's settings ({exc})") from None
    if fingerprint(spec, tuning, target.scenario_free, objective) != target.fingerprint:
        raise ConfigError(
            f"--spec {args.spec}: its fingerprint is not this psml's; the workflow and the "
            "rules' environment run different psml versions: reinstall one of them"
        )
    out = Path(args.out)
    entry = tune(target, tuning, args.data, out.with_suffix(""))
    write_json(out, check_entry(entry, f"tune job {out}"))
    return 0


def _prepare_all(
    exp: Experiment, keys: list[str], targets: dict[str, TuneTarget], root: Path
) -> dict[str, Path]:
    """Each data set the keys train on, prepared into ``root`` (a fresh copy, never stale)."""
    from psml_core.data.prepare import prepare_dataset

    out: dict[str, Path] = {}
    for key in keys:
        name = targets[key].spec.dataset.name
        if name not in out:
            out[name] = root / name
            prepare_dataset(exp.datasets[name], out[name])
    return out


def _one(
    target: TuneTarget, tuning: TuningSpec, data: Path, workdir: Path
) -> tuple[str, dict[str, Any]]:
    """Tune one target (in a worker process)."""
    from psml_core.tuning.sweep import tune

    return target.key, tune(target, tuning, data, workdir / target.key)


def _tune_record(args: argparse.Namespace) -> int:
    """Tune the tier's missing or stale keys (or all, or some) into its record."""
    from psml_core.config import deployment_config_dir
    from psml_core.run_resolver import load_tier, user_config
    from psml_core.tuning.record import read_record, record_path, resolve, write_record

    config_dir = args.config_dir or deployment_config_dir()
    exp = load_tier(user_config(args.configfile, args.set, args.tier), config_dir)
    if args.jobs < 1:
        raise ConfigError(f"--jobs {args.jobs}: give 1 or more")
    if not exp.tuning.enabled:
        raise ConfigError(f"tier {exp.tier!r} does not tune (tuning.enabled: false)")
    path = Path(args.record) if args.record else record_path(config_dir, exp.tier)
    res = resolve(exp, path)
    if args.force:
        res.pending.update({k: "re-tuning forced (--force)" for k in res.targets})
    keys = list(res.pending)
    if args.only:
        unknown = sorted(set(args.only) - set(res.targets))
        if unknown:
            raise ConfigError(
                f"--only {', '.join(unknown)}: not a key of tier {exp.tier!r}; its keys: "
                + ", ".join(res.targets)
            )
        keys = [k for k in keys if k in args.only]
    print(
        f"tune {exp.tier}: {len(keys)} of {len(res.targets)} (workload, recipe) to tune -> {path}"
    )
    record = read_record(path)
    workdir = Path(args.workdir or Path("results", exp.tier, "tune"))
    t0 = time.perf_counter()
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="psml-tune-") as tmp:
        data = _prepare_all(exp, keys, res.targets, Path(tmp))
        jobs = [(res.targets[k], data[res.targets[k].spec.dataset.name]) for k in keys]
        with ProcessPoolExecutor(
            args.jobs, mp_context=get_context("spawn"), initializer=_exit_with_parent,
            initargs=(os.getpid(),),
        ) as pool:  # fmt: skip
            futures = {pool.submit(_one, t, exp.tuning, d, workdir): t.key for t, d in jobs}
            for fut in as_completed(futures):
                try:
                    key, entry = fut.result()
                except Exception as exc:  # noqa: BLE001 - one target's failure, named below
                    failed.append(f"{futures[fut]} ({type(exc).__name__}: {exc})")
                    print(f"tune {futures[fut]}: failed: {exc}", file=sys.stderr, flush=True)
                    continue
                record["entries"][key] = entry
                write_record(path, record)
    wall = time.perf_counter() - t0
    per = f", {wall / len(keys):.0f} s per (workload, recipe)" if keys else ""
    print(
        f"tune {exp.tier}: done in {wall:.0f} s wall-clock with {args.jobs} job(s){per} -> {path}"
    )
    if failed:
        raise RunError(
            f"{len(failed)} of {len(keys)} tunings failed (the others are in {path}): "
            + "; ".join(failed)
        )
    return 0
