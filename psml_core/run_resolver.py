"""From a run's name to the run: its spec, data, placement, operating point and calibration.

``psml train --workload W --method M --scenario S --seed N`` and the workflow's train rule
must train the same run from the same files. :func:`resolve_run` finds a cell of the tier by
its names and gives back a :class:`ResolvedRun`: exactly the spec the workflow writes for it
(:meth:`Experiment.run` at its operating point, its calibrated parameter resolved) and the
paths the train rule passes, all from :mod:`psml_core.layout`, which the workflow's rules use
too. :func:`resolve_spec` does the same for a spec given as JSON (``psml train --run``).

It sits at the command-line level, beside :mod:`psml_core.cli`, and takes no argparse
Namespace: the commands read their arguments and call it once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from psml_core import layout
from psml_core.config import Experiment, RunSpec
from psml_core.config.paths import inside
from psml_core.config.points import OperatingPoint
from psml_core.errors import ConfigError, DataError, did_you_mean

__all__ = [
    "DEFAULT_CONFIGFILE",
    "ResolvedRun",
    "calibrated",
    "calibration_path",
    "data_path",
    "find_cell",
    "load_tier",
    "other_tiers",
    "partition_path",
    "resolve_run",
    "resolve_spec",
    "run_path",
    "user_config",
    "workflow_files",
]

DEFAULT_CONFIGFILE = "config/config.yaml"
"""The user's config file the CLI reads by default, as the workflow does."""

_SHOWN = 8
"""At most this many cells are listed in an error line."""


@dataclass(frozen=True)
class ResolvedRun:
    """One run, resolved: what ``psml train`` trains, reads and writes."""

    spec: RunSpec
    """The run's settings, at its operating point, its calibrated parameter resolved."""
    data: Path
    """The prepared (or, for a recipe with a hashing block, hashed) data set directory."""
    partition: Path | None
    """The placement from ``psml partition`` (``.npz``); ``None``: training computes it."""
    out: Path
    """The run's directory: ``metrics.parquet`` and ``summary.json``."""
    calibration: Path | None = None
    """The calibration file its calibrated parameter came from; ``None``: it has none."""
    point: OperatingPoint | None = None
    """The operating point of its tuning key in use (record or tune job); ``None``: declared."""

    @property
    def summary(self) -> Path:
        """The run's ``summary.json``."""
        return self.out / "summary.json"

    @property
    def metrics(self) -> Path:
        """The run's ``metrics.parquet``."""
        return self.out / "metrics.parquet"


# --------------------------------------------------------------------------- the layout


def data_path(tier: str, dataset: str, hashing: str | None = None, seed: int = 0) -> Path:
    """A data set's directory: prepared, or hashed by a hashing block (its key) for a seed."""
    if hashing is None:
        return Path(layout.path(layout.DATA, tier=tier, dataset=dataset))
    where = layout.path(layout.HASHED, tier=tier, dataset=dataset, hashing=hashing, seed=seed)
    return Path(where)


def partition_path(exp: Experiment, workload: str, method: str, ext: str = "npz") -> Path:
    """A (workload, recipe)'s placement file: its assignment (``npz``) or traffic (``json``)."""
    key = exp.placement_run(workload, method).placement_key()
    return Path(
        layout.path(layout.PARTITION, tier=exp.tier, workload=workload, placement=key, ext=ext)
    )


def run_path(tier: str, spec: RunSpec) -> Path:
    """A run's directory (its id names it)."""
    return Path(layout.path(layout.RUN, tier=tier, run_id=spec.run_id))


def calibration_path(tier: str, calibration: str) -> Path:
    """A calibration's fitted factor."""
    return Path(layout.path(layout.CALIBRATION, tier=tier, calibration=calibration))


# --------------------------------------------------------------------------- the tier


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
    from psml_core.config.renames import renamed_config_keys

    user = load_yaml(configfile, empty_ok=False)
    if not isinstance(user, dict):
        raise ConfigError(
            f"config file {str(configfile)!r}: expected keys at the top level (a mapping), "
            f"got a {type(user).__name__}; write it as `key: value` lines"
        )
    said: set[str] = set()  # a renamed key's deprecation, told once, naming where it was set
    renamed_config_keys(user, str(configfile), said)
    for item in sets or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        try:
            user[key] = parse_yaml(value)
        except yaml.YAMLError as exc:
            why = f"the value is not valid YAML{yaml_where(exc)}"
            raise ConfigError(f"--set {item!r}: {why}") from None
    if sets:
        renamed_config_keys(user, "--set", said)
    if tier is not None:
        user["tier"] = tier
    return user


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


# --------------------------------------------------------------------------- the run


def resolve_run(
    user: dict[str, Any],
    workload: str,
    method: str,
    scenario: str,
    seed: int,
    *,
    config_dir: str | Path | None = None,
    data: str | Path | None = None,
    partition: str | Path | None = None,
    out: str | Path | None = None,
    calibration: str | Path | None = None,
) -> ResolvedRun:
    """One cell of the tier by its names, as the workflow's train job runs it.

    Args:
        user: The user's config (:func:`user_config`); its ``tier`` names the tier.
        workload: The run's workload.
        method: The run's method.
        scenario: The run's scenario.
        seed: The run's seed.
        config_dir: The directory holding ``tiers/`` (default: the deployment's).
        data: The data set directory, else the workflow's (which must be prepared).
        partition: The assignment, else the workflow's where it exists (else computed).
        out: The output directory, else the workflow's.
        calibration: A calibrated recipe's factor file, else the workflow's.

    Raises:
        ConfigError: a name the tier lacks, or a tuning key with no operating point yet.
        DataError: the workflow's data set or calibration is not there yet.
    """
    from psml_core.config import deployment_config_dir
    from psml_core.tuning.record import require_point, with_operating_points

    config_dir = config_dir or deployment_config_dir()
    exp, res = with_operating_points(load_tier(user, config_dir), config_dir, tune_jobs=True)
    spec = find_cell(
        exp,
        workload,
        method,
        scenario,
        seed,
        elsewhere=lambda field, value: other_tiers(user, config_dir, field, value),
    )
    require_point(exp, res, workload, method)  # as the workflow, which tunes first
    data_dir, part = _given_or_workflow(exp, spec, data, partition)
    own = run_path(exp.tier, spec)
    spec, cal = calibrated(spec, calibration)
    return ResolvedRun(
        spec=spec,
        data=data_dir,
        partition=part,
        out=own if out is None else Path(out),
        calibration=cal,
        point=exp.operating_points.get(exp.tuning_key(workload, method)),
    )


def resolve_spec(
    spec: RunSpec,
    data: str | Path,
    out: str | Path,
    partition: str | Path | None = None,
    calibration: str | Path | None = None,
) -> ResolvedRun:
    """A run given as its spec (``psml train --run``), with its calibration resolved.

    Raises:
        DataError: the run's calibration file is missing or unreadable.
    """
    spec, cal = calibrated(spec, calibration)
    return ResolvedRun(
        spec=spec,
        data=Path(data),
        partition=None if partition is None else Path(partition),
        out=Path(out),
        calibration=cal,
    )


def workflow_files(exp: Experiment, spec: RunSpec) -> ResolvedRun:
    """The files the workflow's train rule passes for a run of the tier (none need exist).

    Raises:
        ConfigError: a path leaves the working directory (a spec given as a file).
    """
    hashing = None if spec.method.hashing is None else spec.method.hashing.key
    found = ResolvedRun(
        spec=spec,
        data=data_path(exp.tier, spec.dataset.name, hashing, spec.seed),
        partition=partition_path(exp, spec.workload.name, spec.method.name),
        out=run_path(exp.tier, spec),
    )
    inside([found.data, found.partition, found.out], what=f"run {spec.run_id!r}: path")
    return found


def _given_or_workflow(
    exp: Experiment, spec: RunSpec, data: str | Path | None, partition: str | Path | None
) -> tuple[Path, Path | None]:
    """The data set and placement a cell reads: the given ones, else the workflow's.

    The workflow's placement is used where it exists; where it does not, training computes the
    placement itself (``None``).

    Raises:
        DataError: no data directory was given and the workflow's is not prepared yet.
    """
    import sys

    default = workflow_files(exp, spec)
    if data is None and not (default.data / "manifest.json").is_file():
        raise DataError(
            f"{default.data}: the data set of run {spec.run_id!r} is not prepared; prepare it "
            f"with `snakemake --cores 1 {default.data}/manifest.json --config tier={exp.tier}`, "
            "or give --data"
        )
    if partition is not None:
        part: Path | None = Path(partition)
    elif default.partition is not None and default.partition.is_file():
        part = default.partition
    else:
        part = None
        print(
            f"psml train: {default.partition} (the workflow's partition job) does not exist; "
            "this run computes its placement from its own data, which for a hashing recipe "
            "on a seed other than the tier's first differs from the workflow's",
            file=sys.stderr,
        )
    return (default.data if data is None else Path(data)), part


def calibrated(spec: RunSpec, given: str | Path | None) -> tuple[RunSpec, Path | None]:
    """The run with its calibrated parameter resolved (a calibrated sweep's recipe), else as is.

    The factor comes from ``given``, else from the workflow's calibration file.

    Raises:
        DataError: the calibration file is missing or unreadable.
    """
    from psml_core.config.calibration import apply_calibration, read_factor

    mark = spec.method.calibrated
    if not mark or "factor" in mark:
        return spec, None
    path = Path(given) if given else calibration_path(spec.tier, mark["id"])
    if not given:
        inside([path], what=f"run {spec.run_id!r}: calibration file")
    if not path.is_file():
        raise DataError(
            f"{path}: run {spec.run_id!r} takes {mark['params'][0]} from calibration "
            f"{mark['id']!r}, which is not fitted yet; run `snakemake --cores 1 {path} "
            f"--config tier={spec.tier}` or give --calibration"
        )
    return apply_calibration(spec, read_factor(str(path), mark["id"])), path
