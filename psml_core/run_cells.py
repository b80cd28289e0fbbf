"""Cells of a tier by name: the run spec, default paths and summary of one run.

A *cell* is one (workload, method, scenario, seed) of a tier's grid, that is one training job
of the workflow. This module finds a cell by its names, builds exactly the run spec the workflow
writes for it (``workflow/rules/specs.smk``: :meth:`Experiment.run`, canonical JSON) and the
paths the workflow's train rule passes (``data/<tier>/...``, ``results/<tier>/...``), so that
``psml train --workload W --method M --scenario S --seed N`` reruns one cell by name, and
``psml runs`` / ``psml show RUN`` list the cells and print one run's summary.

It sits at the command-line level, beside :mod:`psml_core.cli`: no lower layer imports it, and
it imports neither engine nor report code.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from psml_core.config import Experiment, RunSpec
from psml_core.config.paths import inside
from psml_core.errors import ConfigError, DataError, did_you_mean

if TYPE_CHECKING:
    from psml_core.tuning.record import Resolution

__all__ = [
    "DEFAULT_CONFIGFILE",
    "CellPaths",
    "cell_inputs",
    "cell_paths",
    "cmd_runs",
    "cmd_show",
    "find_cell",
    "format_runs",
    "format_summary",
    "load_tier",
    "other_tiers",
    "summary_path",
    "train_spec",
    "user_config",
]

DEFAULT_CONFIGFILE = "config/config.yaml"
"""The user's config file the CLI reads by default, as the workflow does."""

_SHOWN = 8
"""At most this many cells are listed in an error line."""


@dataclass(frozen=True)
class CellPaths:
    """Where the workflow keeps one cell's inputs and outputs (relative to its directory)."""

    data: Path
    """The prepared (or, for a recipe with a hashing block, hashed) data set directory."""
    partition: Path | None
    """The placement from ``psml partition`` (``.npz``); ``None``: training computes it."""
    out: Path
    """The run's directory: ``metrics.parquet`` and ``summary.json``."""

    @property
    def summary(self) -> Path:
        """The run's ``summary.json``."""
        return self.out / "summary.json"

    @property
    def metrics(self) -> Path:
        """The run's ``metrics.parquet``."""
        return self.out / "metrics.parquet"


def load_tier(user: dict[str, Any], config_dir: str | Path) -> Experiment:
    """The experiment the workflow builds from the same config, checked as the workflow does.

    Args:
        user: The user's config (config file plus overrides), as Snakemake's ``config``.
        config_dir: The directory holding ``tiers/`` and ``methods.yaml``.

    Raises:
        ConfigError: naming the key and the allowed values, for any invalid setting.
    """
    from psml_core.capabilities import check_backend
    from psml_core.recipes import load_experiment

    exp = load_experiment(user, config_dir)
    check_backend(exp)
    return exp


def other_tiers(user: dict[str, Any], config_dir: str | Path, field: str, value: Any) -> list[str]:
    """The other tiers whose grid holds ``value`` as a cell's ``field``, with the same overrides.

    Args:
        user: The user's config (its ``tier`` is skipped).
        config_dir: The directory holding ``tiers/``.
        field: ``workload``, ``method``, ``scenario`` or ``seed``.
        value: The value looked for.
    """
    from psml_core.recipes import load_experiment

    fields = ("workload", "method", "scenario", "seed")
    here = user.get("tier", "smoke")
    found = []
    for path in sorted(Path(config_dir, "tiers").glob("*.yaml")):
        if path.stem == here:
            continue
        try:
            grid = load_experiment({**user, "tier": path.stem}, config_dir).grid()
        except ConfigError:  # the overrides do not fit that tier
            continue
        if any(cell[fields.index(field)] == value for cell in grid):
            found.append(path.stem)
    return found


def _listed(values: list[Any], limit: int | None = None) -> str:
    """Values for an error line: all, or at most ``limit`` and how many more."""
    shown = ", ".join(str(v) for v in values[:limit])
    more = len(values) - (len(values) if limit is None else limit)
    return f"{shown}, ... ({more} more)" if more > 0 else shown


def find_cell(
    exp: Experiment,
    workload: str,
    method: str,
    scenario: str,
    seed: int,
    elsewhere: Callable[[str, Any], list[str]] | None = None,
) -> RunSpec:
    """The run spec of one cell of the tier: the one the workflow writes for it.

    Args:
        exp: The tier's experiment (:func:`load_tier`).
        workload: The workload's name.
        method: The method's name (a recipe, or one an experiment's sweep derives).
        scenario: The scenario's name.
        seed: The seed.
        elsewhere: ``(field, value) -> tiers`` whose grid holds that value, named in the
            error line of a value this tier lacks (:func:`other_tiers`).

    Returns:
        ``exp.run(...)``, whose :meth:`RunSpec.to_json` is the workflow's spec file's line.

    Raises:
        ConfigError: one line naming the unknown field and the tier's values, or, for a
            combination the tier does not run, the cells it runs with that method.
    """
    grid = exp.grid()
    wanted = {"workload": workload, "method": method, "scenario": scenario, "seed": seed}
    for i, (field, value) in enumerate(wanted.items()):
        known = sorted({cell[i] for cell in grid})
        if value not in known:
            tiers = elsewhere(field, value) if elsewhere is not None else []
            there = f"it runs in tier {', '.join(tiers)} (add --tier {tiers[0]}); " if tiers else ""
            hint = "" if tiers else did_you_mean(value, known)
            raise ConfigError(
                f"--{field} {value!r}: not in tier {exp.tier!r}; {there}{hint}"
                f"its {field}s: {_listed(known)}"
            )
    key = (workload, method, scenario, seed)
    if key not in grid:
        same = [exp.run_id(*cell) for cell in grid if cell[1] == method]
        raise ConfigError(
            f"tier {exp.tier!r} has no run {exp.run_id(*key)}; method {method!r} runs as "
            f"{_listed(same, _SHOWN)} (`psml runs` lists every run)"
        )
    return exp.run(*key)


def cell_paths(exp: Experiment, spec: RunSpec) -> CellPaths:
    """The paths the workflow's train rule passes for a cell (``workflow/rules/common.smk``)."""
    tier, dataset = exp.tier, spec.dataset.name
    h = spec.method.hashing
    if h is None:
        data = Path("data", tier, dataset)
    else:
        data = Path("data", tier, "hashed", dataset, h.key, f"seed{spec.seed}")
    key = exp.placement_run(spec.workload.name, spec.method.name).placement_key()
    partition = Path("results", tier, "partition", spec.workload.name, f"{key}.npz")
    out = Path("results", tier, "runs", spec.run_id)
    inside([data, partition, out], what=f"run {spec.run_id!r}: path")  # a spec given as a file
    return CellPaths(data=data, partition=partition, out=out)


def cell_inputs(
    exp: Experiment,
    spec: RunSpec,
    data: str | None = None,
    out: str | None = None,
    partition: str | None = None,
) -> CellPaths:
    """What ``psml train`` reads and writes for a cell: the given paths, else the workflow's.

    The workflow's placement is used where it exists; where it does not, training computes the
    placement itself (``partition`` is ``None``).

    Raises:
        DataError: no data directory was given and the workflow's is not prepared yet.
    """
    default = cell_paths(exp, spec)
    if data is None and not (default.data / "manifest.json").is_file():
        raise DataError(
            f"{default.data}: the data set of run {spec.run_id!r} is not prepared; prepare it "
            f"with `snakemake --cores 1 {default.data}/manifest.json --config tier={exp.tier}`, "
            "or give --data"
        )
    if partition is None:
        found = default.partition is not None and default.partition.is_file()
        part = default.partition if found else None
        if not found:
            print(
                f"psml train: {default.partition} (the workflow's partition job) does not exist; "
                "this run computes its placement from its own data, which for a hashing recipe "
                "on a seed other than the tier's first differs from the workflow's",
                file=sys.stderr,
            )
    else:
        part = Path(partition)
    return CellPaths(
        data=default.data if data is None else Path(data),
        partition=part,
        out=default.out if out is None else Path(out),
    )


def format_runs(exp: Experiment) -> str:
    """Every cell of the tier, one per line, as aligned columns with a header.

    Columns: run id, workload, method, scenario, seed, backend, and ``yes`` where the
    workflow's ``summary.json`` of that run exists (relative to the current directory).
    """
    rows = [("RUN", "WORKLOAD", "METHOD", "SCENARIO", "SEED", "BACKEND", "RESULTS")]
    for w, m, s, seed in exp.grid():
        spec = exp.run(w, m, s, seed)
        done = "yes" if cell_paths(exp, spec).summary.is_file() else "no"
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
    found = cell_paths(exp, exp.run(*runs[run])).summary
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


def user_config(
    configfile: str | Path, sets: list[str] | None = None, tier: str | None = None
) -> dict[str, Any]:
    """The user's config as Snakemake reads it: the config file, then overrides.

    Args:
        configfile: The config file (``--configfile``; the workflow's is config/config.yaml).
        sets: ``KEY=VALUE`` overrides, each value as YAML (``--set``), applied in order.
        tier: The tier (``--tier``), applied last.

    Raises:
        ConfigError: the file is not a mapping, or an override is not ``KEY=VALUE``.
    """
    import yaml

    from psml_core.config.reading import load_yaml, parse_yaml, yaml_where

    user = load_yaml(configfile, empty_ok=False)
    if not isinstance(user, dict):
        raise ConfigError(
            f"config file {str(configfile)!r}: expected keys at the top level (a mapping), "
            f"got a {type(user).__name__}; write it as `key: value` lines"
        )
    for item in sets or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        try:
            user[key] = parse_yaml(value)
        except yaml.YAMLError as exc:
            why = f"the value is not valid YAML{yaml_where(exc)}"
            raise ConfigError(f"--set {item!r}: {why}") from None
    if tier is not None:
        user["tier"] = tier
    return user


def _tier_points(args: argparse.Namespace) -> tuple[Experiment, Resolution]:
    """The experiment of ``--configfile``, ``--set``, ``--tier`` and ``--config-dir``.

    At its operating points, as the workflow runs it: the record's, or a finished tune job's
    (:func:`psml_core.tuning.record.with_operating_points`); with where each key's comes from.
    """
    from psml_core.config import deployment_config_dir
    from psml_core.tuning.record import with_operating_points

    config_dir = args.config_dir or deployment_config_dir()
    exp = load_tier(user_config(args.configfile, args.set, args.tier), config_dir)
    return with_operating_points(exp, config_dir, tune_jobs=True)


def _tier(args: argparse.Namespace) -> Experiment:
    """The experiment of the config arguments, at its operating points (:func:`_tier_points`)."""
    return _tier_points(args)[0]


def cmd_runs(args: argparse.Namespace) -> int:
    """``psml runs``: list the tier's runs (cells), with whether each has results."""
    print(format_runs(_tier(args)))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """``psml show``: one run's summary, by run id of the tier, summary.json or run directory."""
    is_path = Path(args.run).exists() or args.run.endswith(".json")
    print(format_summary(summary_path(args.run, None if is_path else _tier(args))))
    return 0


def train_spec(args: argparse.Namespace) -> RunSpec:
    """The run ``psml train`` trains: ``--run``, or a cell by name with the workflow's paths.

    For a cell by name, fills in ``args.run`` (the spec's JSON, which a dist run's ranks read),
    and ``args.data``, ``args.out`` and ``args.partition`` where they were not given.

    Raises:
        ConfigError: both or neither form given, a name missing, or a cell not in the tier.
    """
    from psml_core.recipes import read_run_spec

    cell = ("workload", "method", "scenario", "seed")
    given = [f"--{f}" for f in cell if getattr(args, f) is not None]
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
        return calibrated(read_run_spec(args.run), args)
    if len(given) < len(cell):
        missing = ", ".join(f"--{f}" for f in cell if f"--{f}" not in given)
        raise ConfigError(
            f"give the run as --workload, --method, --scenario and --seed (missing {missing}), "
            "or as --run JSON; `psml runs` lists the runs"
        )
    from psml_core.config import deployment_config_dir
    from psml_core.tuning.record import require_point

    exp, res = _tier_points(args)
    user = user_config(args.configfile, args.set, args.tier)
    config_dir = args.config_dir or deployment_config_dir()
    spec = find_cell(
        exp,
        args.workload,
        args.method,
        args.scenario,
        args.seed,
        elsewhere=lambda field, value: other_tiers(user, config_dir, field, value),
    )
    require_point(exp, res, args.workload, args.method)  # as the workflow, which tunes first
    paths = cell_inputs(exp, spec, args.data, args.out, args.partition)
    args.run, args.data, args.out = spec.to_json(), str(paths.data), str(paths.out)
    args.partition = None if paths.partition is None else str(paths.partition)
    return calibrated(spec, args)


def calibrated(spec: RunSpec, args: argparse.Namespace) -> RunSpec:
    """The run with its calibrated parameters resolved (a calibrated sweep's recipe), else as is.

    The factor comes from ``--calibration``, else from the workflow's
    ``results/<tier>/calibration/<key>.json``; ``args.run`` becomes the resolved spec's JSON
    (what a dist run's ranks read).

    Raises:
        DataError: the calibration file is missing or unreadable.
    """
    from psml_core.config.calibration import apply_calibration, read_factor

    mark = spec.method.calibrated
    if not mark or "factor" in mark:
        return spec
    path = getattr(args, "calibration", None)
    if not path:
        path = str(Path("results") / spec.tier / "calibration" / f"{mark['id']}.json")
        inside([path], what=f"run {spec.run_id!r}: calibration file")
    if not Path(path).is_file():
        raise DataError(
            f"{path}: run {spec.run_id!r} takes {mark['params'][0]} from calibration "
            f"{mark['id']!r}, which is not fitted yet; run `snakemake --cores 1 {path} "
            f"--config tier={spec.tier}` or give --calibration"
        )
    spec = apply_calibration(spec, read_factor(path, mark["id"]))
    args.run = spec.to_json()
    return spec
