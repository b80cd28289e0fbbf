"""The record of a tier's operating points: read, check, write, and apply it to a tier.

``config/operating_points/<tier>.yaml`` (schema ``workflow/schemas/operating_points.schema.yaml``)
holds one entry per tuning key: the chosen point, every candidate's settings and outcome, and
the fingerprint of the settings it was tuned for. Tuning costs several runs per (workload,
recipe), so the record is written once (``psml tune``) and reused while its fingerprints
match; the workflow tunes only the keys it lacks or whose fingerprint is stale (tune jobs,
``results/<tier>/tune/<workload>/<method>.json``, each one entry in the same format).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from psml_core import layout
from psml_core.atomic import write_text
from psml_core.config import Experiment, OperatingPoint, load_yaml, validate
from psml_core.errors import ConfigError
from psml_core.tuning.targets import TuneTarget, tuning_targets

__all__ = [
    "Resolution",
    "check_entry",
    "collected",
    "entry_point",
    "read_record",
    "record_path",
    "require_point",
    "resolve",
    "tune_output",
    "with_operating_points",
    "write_record",
]


def record_path(config_dir: str | Path, tier: str) -> Path:
    """The tier's record: ``<config dir>/operating_points/<tier>.yaml``."""
    return Path(config_dir) / "operating_points" / f"{tier}.yaml"


def tune_output(tier: str, key: str) -> Path:
    """Where the workflow's tune job writes a key's entry (relative to the working directory)."""
    workload, method = key.split("/")
    return Path(layout.path(layout.TUNE, tier=tier, workload=workload, method=method))


def read_record(path: str | Path) -> dict[str, Any]:
    """The record at ``path``, validated; an empty record when the file does not exist.

    Raises:
        ConfigError: the file is not valid YAML or not a record (one line naming the key).
    """
    p = Path(path)
    if not p.is_file():
        return {"entries": {}}
    data = load_yaml(p, "operating-point record")
    return validate(data, "operating_points", source=f"operating-point record {str(p)!r}")


def check_entry(entry: Any, source: str) -> dict[str, Any]:
    """One entry (a tune job's output), validated as the record's entries are."""
    record = validate({"entries": {"x": entry}}, "operating_points", source=source)
    return record["entries"]["x"]


def write_record(path: str | Path, record: dict[str, Any]) -> None:
    """Write a record atomically, entries in key order, after validating it."""
    data = validate(record, "operating_points", source="operating-point record (to write)")
    data["entries"] = dict(sorted(data["entries"].items()))
    text = (
        "# Operating points chosen by `psml tune` (docs/measurement.md, Operating points); "
        "do not edit by hand:\n# an entry is used only while its fingerprint matches the "
        "settings it was tuned for.\n"
    )
    write_text(path, text + yaml.safe_dump(data, sort_keys=False, width=100))


def entry_point(entry: dict[str, Any], source: str) -> OperatingPoint:
    """The operating point an entry chose, with its source."""
    chosen = entry["chosen"]
    return OperatingPoint(
        lr=float(chosen["lr"]),
        momentum=float(chosen["momentum"]),
        warmup_iterations=int(chosen["warmup_iterations"]),
        momentum_handling=chosen["momentum_handling"],
        tuned_as=f"{entry['workload']}/{entry['method']}",
        fingerprint=entry["fingerprint"],
        source=source,
        params=dict(chosen.get("params") or {}),
    )


@dataclass(frozen=True)
class Resolution:
    """Where each tuning key of a tier gets its point.

    Attributes:
        targets: Every key's target.
        points: The keys with a point: from the record, or a finished tune job.
        pending: The keys to tune, each with why (missing, stale, re-tuning forced).
        record: The record file that was read.
        entries: The entries behind ``points``, each with its ``source``.
        notes: What could not be checked yet (a delay-variation claim whose dense baseline
            is not tuned yet; :func:`~psml_core.tuning.periods.check_periods`).
    """

    targets: dict[str, TuneTarget]
    points: dict[str, OperatingPoint] = field(default_factory=dict)
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    pending: dict[str, str] = field(default_factory=dict)
    record: Path | None = None
    notes: list[str] = field(default_factory=list)


def resolve(exp: Experiment, record: str | Path, tune_jobs: bool = False) -> Resolution:
    """Which keys the record covers, and which must be tuned.

    Args:
        exp: The tier.
        record: The tier's record file (:func:`record_path`); a missing file is empty.
        tune_jobs: Also take points from the workflow's finished tune jobs (relative to the
            working directory) where the record lacks them (``psml train`` by name).
    """
    targets = tuning_targets(exp)
    path = Path(record)
    shown = f"record {path.parent.name}/{path.name}"
    entries = read_record(path)["entries"] if targets else {}
    out = Resolution(targets, record=path)
    for key, target in targets.items():
        entry = entries.get(key)
        if not exp.tuning.use_record:
            out.pending[key] = "re-tuning forced (tuning.use_record: false)"
        elif entry is None:
            out.pending[key] = "missing from the record"
        elif entry["fingerprint"] != target.fingerprint:
            out.pending[key] = "stale: its settings changed since it was tuned"
        else:
            out.points[key] = entry_point(entry, shown)
            out.entries[key] = {**entry, "source": shown}
    if tune_jobs:
        for key in list(out.pending):
            job = tune_output(exp.tier, key)
            if job.is_file():
                entry = check_entry(json.loads(job.read_text(encoding="utf-8")), str(job))
                if entry["fingerprint"] == targets[key].fingerprint:
                    out.points[key] = entry_point(entry, f"tune job {job}")
                    out.entries[key] = {**entry, "source": f"tune job {job}"}
                    del out.pending[key]
    return out


def with_operating_points(
    exp: Experiment, config_dir: str | Path, tune_jobs: bool = False
) -> tuple[Experiment, Resolution]:
    """The tier with every known point applied (:meth:`Experiment.run` uses them).

    A delay-variation claim whose scenario holds too few periods before its dense baseline
    reaches the target is refused here (:func:`~psml_core.tuning.periods.check_periods`).

    Raises:
        ConfigError: a bad record, or a claim's scenario that does not vary enough.
    """
    from psml_core.tuning.periods import check_periods

    path = record_path(config_dir, exp.tier)
    res = resolve(exp, path, tune_jobs)
    res.notes.extend(check_periods(exp, res.entries, f"record {path.parent.name}/{path.name}"))
    return dataclasses.replace(exp, operating_points=dict(res.points)), res


def require_point(exp: Experiment, res: Resolution, workload: str, method: str) -> None:
    """Refuse a run of a tuning key that has no point yet, naming the fix.

    Raises:
        ConfigError: the key is pending (missing or stale).
    """
    key = exp.tuning_key(workload, method)
    if key in res.pending:
        raise ConfigError(
            f"no operating point for {key} ({res.pending[key]}; {res.record}); tune it with "
            f"`psml tune --tier {exp.tier} --record` or run the workflow, which tunes it first"
        )


def collected(exp: Experiment, res: Resolution, tuned: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The points a tier's runs use, for its report and to copy into the record.

    Args:
        exp: The tier.
        res: Its resolution against the record.
        tuned: The tune jobs' entries of the pending keys, by key (each with its ``source``).

    Returns:
        A record (schema ``operating_points``) of every key in use, with each entry's source,
        the tuning settings, and the runs' (workload, method) pairs that inherit a base's point.
    """
    entries = {**res.entries, **tuned}
    pairs = {(w, m) for w, m, _s, _seed in exp.grid()} if exp.tuning.enabled else set()
    inherited = {
        f"{w}/{m}": exp.tuning_key(w, m)
        for w, m in sorted(pairs)
        if exp.tuning_key(w, m) != f"{w}/{m}"
    }
    return {
        "tuning": {**dataclasses.asdict(exp.tuning), "lr_factors": list(exp.tuning.lr_factors)},
        "entries": dict(sorted(entries.items())),
        "inherited": inherited,
    }
