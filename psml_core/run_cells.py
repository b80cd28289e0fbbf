"""``psml runs`` and ``psml show``: a tier's runs by name, and one run's summary.

A *cell* is one (workload, method, scenario, seed) of a tier's grid, that is one training job
of the workflow. Its spec and files come from :mod:`psml_core.run_resolver` (the layout the
workflow's rules use, :mod:`psml_core.layout`), so that ``psml runs`` lists the cells with
whether each has results, and ``psml show RUN`` prints one run's summary.

It sits at the command-line level, beside :mod:`psml_core.cli`: no lower layer imports it, and
it imports neither engine nor report code.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from psml_core.config import Experiment
from psml_core.errors import ConfigError, DataError
from psml_core.run_resolver import load_tier, user_config, workflow_files

__all__ = ["cmd_runs", "cmd_show", "format_runs", "format_summary", "summary_path"]


def format_runs(exp: Experiment) -> str:
    """Every cell of the tier, one per line, as aligned columns with a header.

    Columns: run id, workload, method, scenario, seed, backend, and ``yes`` where the
    workflow's ``summary.json`` of that run exists (relative to the current directory).
    """
    rows = [("RUN", "WORKLOAD", "METHOD", "SCENARIO", "SEED", "BACKEND", "RESULTS")]
    for w, m, s, seed in exp.grid():
        spec = exp.run(w, m, s, seed)
        done = "yes" if workflow_files(exp, spec).summary.is_file() else "no"
        rows.append((spec.run_id, w, m, s, str(seed), spec.backend, done))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(n) for c, n in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(line.rstrip() for line in lines)


def summary_path(run: str, exp: Experiment | None) -> Path:
    """The ``summary.json`` of ``run``: a run id of the tier, or a summary file or run directory.

    Args:
        run: A run id (``workload/method/scenario/seedN``), a ``summary.json`` or its directory.
        exp: The tier's experiment, to resolve a run id; ``None`` when ``run`` is a path.

    Raises:
        ConfigError: ``run`` is neither an existing path nor a run id of the tier.
        DataError: the run is in the tier but its summary has not been written yet.
    """
    path = Path(run)
    if path.is_dir():
        path = path / "summary.json"
    if path.is_file():
        return path
    if exp is None or run.endswith(".json"):
        raise ConfigError(f"{run!r}: no such summary.json or run directory")
    runs = {exp.run_id(*cell): cell for cell in exp.grid()}
    if run not in runs:
        raise ConfigError(
            f"{run!r}: neither a run of tier {exp.tier!r} nor a summary.json or run directory; "
            "`psml runs` lists the runs (give --tier for another tier)"
        )
    found = workflow_files(exp, exp.run(*runs[run])).summary
    if not found.is_file():
        raise DataError(
            f"{found}: run {run!r} has no results yet; train it with `psml train "
            f"--workload {runs[run][0]} --method {runs[run][1]} --scenario {runs[run][2]} "
            f"--seed {runs[run][3]}` (or run the workflow)"
        )
    return found


def format_summary(path: Path) -> str:
    """One run's summary (its ``summary.json``) as labelled lines.

    Raises:
        DataError: the file is not a run summary (unreadable, not JSON, or fields missing).
    """
    try:
        s = json.loads(path.read_text(encoding="utf-8"))
        clock = s["clock"]
        time_label = "simulated time" if clock == "simulated" else f"{clock} time"
        loss = s.get("final_test_loss")
        lines = [
            ("run", s["run_id"]),
            ("tier / backend", f"{s['tier']} / {s['backend']}"),
            ("workload", s["workload"]),
            ("method", s["method"]),
            ("scenario", s["scenario"]),
            ("seed", str(s["seed"])),
            ("final accuracy", f"{s['final_test_accuracy']:.4f}"),
            ("final test loss", "n/a" if loss is None else f"{loss:.4g}"),
            ("final train loss", f"{s['final_train_loss']:.4g}"),
            (time_label, f"{s['total_time_s']:.4g} s"),
            (f"{time_label} to target", _to_target(s)),
            ("bytes up / down", f"{s['bytes_up']} B / {s['bytes_down']} B"),
            ("iterations", str(s["iterations"])),
        ]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{path}: not a run summary ({type(exc).__name__}: {exc})") from None
    wall = s.get("provenance", {}).get("wall_clock_s")
    if clock == "simulated" and isinstance(wall, int | float):
        lines.append(("wall-clock time", f"{wall:.4g} s (to simulate)"))
    run_dir = path.parent
    lines += [
        ("run directory", str(run_dir)),
        ("summary", str(path)),
        ("metrics", str(run_dir / "metrics.parquet")),
    ]
    width = max(len(label) for label, _ in lines)
    return "\n".join(f"{label.ljust(width)}  {value}" for label, value in lines)


def _to_target(s: dict[str, Any]) -> str:
    """When the run first reached its workload's target accuracy, or that it did not."""
    target, tts = s.get("target_accuracy"), s.get("time_to_target_s")
    goal = "no target accuracy" if target is None else f"accuracy {float(target):.4g}"
    if tts is None or s.get("target_censored"):
        return f"not reached ({goal})"
    it, sent = s.get("iteration_to_target"), s.get("bytes_to_target")
    where = f", iteration {it}" if it is not None else ""
    sent_txt = f", {sent} B sent" if sent is not None else ""
    return f"{float(tts):.4g} s ({goal}{where}{sent_txt})"


# --------------------------------------------------------------------------- sub-commands


def _tier(args: argparse.Namespace) -> Experiment:
    """The experiment of ``--configfile``, ``--set``, ``--tier`` and ``--config-dir``.

    At its operating points, as the workflow runs it: the record's, or a finished tune job's
    (:func:`psml_core.tuning.record.with_operating_points`).
    """
    from psml_core.config import deployment_config_dir
    from psml_core.tuning.record import with_operating_points

    config_dir = args.config_dir or deployment_config_dir()
    exp = load_tier(user_config(args.configfile, args.set, args.tier), config_dir)
    return with_operating_points(exp, config_dir, tune_jobs=True)[0]


def cmd_runs(args: argparse.Namespace) -> int:
    """``psml runs``: list the tier's runs (cells), with whether each has results."""
    print(format_runs(_tier(args)))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """``psml show``: one run's summary, by run id of the tier, summary.json or run directory."""
    is_path = Path(args.run).exists() or args.run.endswith(".json")
    print(format_summary(summary_path(args.run, None if is_path else _tier(args))))
    return 0
