"""Calibrated sweeps: a paper's parameter in its own units, mapped to ours by one fitted factor.

Some papers give a parameter in units of their own code: PF-MxNet's theta0 grid is in MXNet's
gradient scale, not ours. Instead of an arbitrary factor, one README row fixes it: the factor
``f`` is chosen so that our method at the row's value times ``f`` reproduces that row's
reduction against the baseline, on a **tuning seed** that no verdict uses. The factor is then
fixed for every other row and claim, and the calibration row is never evidence.

Where it lives:

* the paper file's ``calibrations`` entry (``config/papers/<paper>.yaml``): the method, the
  baseline, the swept paths, the row's value (``point``) and its reduction, the metric and the
  tuning seed (:class:`CalibrationSpec`);
* a tier's experiment ``sweep`` names it (``calibration: <paper>.<id>``) and lists its values in
  the paper's units; every derived recipe carries the marker ``calibrated: {id, params, value}``;
* the workflow's ``calibrate`` rule fits the factor (``psml calibrate-sweep``,
  :mod:`psml_core.engine.calibrate`) on the experiment's first workload and scenario, and every
  training run of a calibrated recipe reads it (``psml train --calibration``), which sets each
  path to ``value x factor`` (:func:`apply_calibration`) and records the factor in the spec.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from psml_core.config.experiment import Experiment
from psml_core.config.reading import load_json, load_yaml
from psml_core.config.specs import MethodRecipe, RunSpec, build
from psml_core.errors import ConfigError, DataError

__all__ = [
    "CalibrationSpec",
    "apply_calibration",
    "calibration_json",
    "calibration_runs",
    "calibration_spec",
    "marker",
    "read_factor",
]


@dataclass(frozen=True)
class CalibrationSpec:
    """One calibration: which runs fit the factor, and what they must reproduce.

    Attributes:
        key: ``<paper>.<id>``, how sweeps and files name it.
        statement: What is calibrated, in words (for the report).
        source: Where the calibration row comes from.
        method: The base recipe of the sweep.
        baseline: The recipe the reduction is measured against.
        params: The dotted paths set to ``value x factor``.
        point: The calibration row's value, in the paper's units.
        reduction: The row's reduction of ``metric`` against the baseline, in percent.
        metric: A summary metric (``bytes_total``, ``bytes_up``, ``bytes_down``).
        seed: The tuning seed (no verdict may use it).
        workload: The workload the factor is fitted on (the experiment's first).
        scenario: The scenario it is fitted under (the experiment's first).
        low: Smallest factor searched.
        high: Largest factor searched.
        tolerance: Accepted distance to ``reduction``, in percentage points.
        max_trials: Most training runs of the method the search may take.
    """

    key: str
    statement: str
    source: str
    method: str
    baseline: str
    params: tuple[str, ...]
    point: float
    reduction: float
    metric: str
    seed: int
    workload: str
    scenario: str
    low: float = 1e-4
    high: float = 10.0
    tolerance: float = 0.5
    max_trials: int = 12


def calibration_spec(
    papers: Path,
    key: str,
    sweep: dict[str, Any],
    workload: str,
    scenario: str,
    seeds: set[int],
    where: str,
) -> CalibrationSpec:
    """The calibration ``key`` of a sweep, read from its paper file and checked against it.

    Raises:
        ConfigError: an unknown paper or calibration, a sweep of another method or other paths,
            or a tuning seed that a verdict run uses.
    """
    paper, _, cid = key.partition(".")
    path = papers / f"{paper}.yaml"
    data = load_yaml(path, "paper file") if path.is_file() else None
    entries = {c.get("id"): c for c in (data or {}).get("calibrations") or []}
    if cid not in entries:
        known = [f"{paper}.{k}" for k in entries] or ["none"]
        raise ConfigError(
            f"invalid config: key '{where}.calibration': no calibration {key!r} in "
            f"{path} (known: {', '.join(known)})"
        )
    c = entries[cid]
    if c["method"] != sweep["method"] or list(c["params"]) != list(sweep["params"]):
        raise ConfigError(
            f"invalid config: key '{where}': calibration {key!r} maps {c['method']!r} at "
            f"{list(c['params'])}, but the sweep sets {sweep['method']!r} at "
            f"{list(sweep['params'])}; make them the same"
        )
    if int(c["seed"]) in seeds:
        raise ConfigError(
            f"invalid config: calibration {key!r} tunes on seed {c['seed']}, which this tier's "
            f"runs use for verdicts; change the paper file's tuning seed or the tier's seeds"
        )
    search = c.get("search") or {}
    return CalibrationSpec(
        key=key,
        statement=str(c["statement"]),
        source=str(c["source"]),
        method=str(c["method"]),
        baseline=str(c["baseline"]),
        params=tuple(c["params"]),
        point=float(c["point"]),
        reduction=float(c["reduction"]),
        metric=str(c.get("metric", "bytes_total")),
        seed=int(c["seed"]),
        workload=workload,
        scenario=scenario,
        **{k: search[k] for k in ("low", "high", "tolerance", "max_trials") if k in search},
    )


def marker(cal: CalibrationSpec, value: float) -> dict[str, Any]:
    """A derived recipe's ``calibrated`` block: its value in the paper's units."""
    return {"id": cal.key, "params": list(cal.params), "value": float(value)}


def apply_calibration(spec: RunSpec, factor: float) -> RunSpec:
    """The run with each calibrated path set to ``value x factor`` (and the factor recorded).

    Raises:
        ConfigError: the run's recipe is not calibrated, or the factor is not positive.
    """
    mark = spec.method.calibrated
    if not mark:
        raise ConfigError(f"run {spec.run_id!r}: its recipe has no calibrated parameter")
    if not factor > 0:
        raise ConfigError(f"calibration {mark['id']!r}: factor must be positive, got {factor!r}")
    data = copy.deepcopy(dataclasses.asdict(spec.method))
    value = float(mark["value"]) * float(factor)
    for path in mark["params"]:
        node = data
        *head, last = path.split(".")
        for part in head:
            node = node[part]
        node[last] = value
    data["calibrated"] = {**mark, "factor": float(factor)}
    method = build(MethodRecipe, data, spec.method.name)
    return dataclasses.replace(spec, method=method)


def read_factor(path: str | Path, key: str) -> float:
    """The factor of calibration ``key`` from its result file (``psml calibrate-sweep --out``).

    Raises:
        DataError: the file is missing, unreadable or of another calibration.
    """
    p = Path(path)
    fix = f"run `psml calibrate-sweep` again (the workflow's calibrate rule writes {p})"
    try:
        data = load_json(p, "calibration")
        got, factor = data["key"], float(data["factor"])
    except (ConfigError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{p}: not a readable calibration ({exc}); {fix}") from None
    if got != key:
        raise DataError(f"{p}: holds calibration {got!r}, not {key!r}; {fix}")
    if not factor > 0:
        raise DataError(f"{p}: factor {factor!r} is not positive; {fix}")
    return factor


def calibration_runs(exp: Experiment, key: str) -> tuple[RunSpec, RunSpec]:
    """The calibration's two runs on its tuning seed: the method at its point, the baseline.

    The method's run is a sweep recipe of the calibration renamed ``<method>__calibration``
    with ``value`` = the calibration row's point (still in the paper's units).

    Raises:
        ConfigError: no sweep recipe carries the calibration, or its baseline is not a recipe
            of the tier.
    """
    cal = exp.calibrations[key]
    swept = [r for r in exp.recipes.values() if r.calibrated and r.calibrated["id"] == key]
    if not swept or cal.baseline not in exp.recipes:
        raise ConfigError(
            f"calibration {key!r} needs a sweep of {cal.method!r} that names it and its baseline "
            f"{cal.baseline!r} in the same experiment's methods"
        )
    name = f"{cal.method}__calibration"
    recipe = dataclasses.replace(swept[0], name=name, calibrated=marker(cal, cal.point))
    run = exp.run(cal.workload, swept[0].name, cal.scenario, cal.seed)
    method = dataclasses.replace(
        run, method=recipe, run_id=exp.run_id(cal.workload, name, cal.scenario, cal.seed)
    )
    return method, exp.run(cal.workload, cal.baseline, cal.scenario, cal.seed)


def calibration_json(exp: Experiment, key: str) -> str:
    """``psml calibrate-sweep --spec``'s input: the calibration and its two runs, as JSON."""
    method, baseline = calibration_runs(exp, key)
    return json.dumps(
        {
            "calibration": dataclasses.asdict(exp.calibrations[key]),
            "method": method.to_dict(),
            "baseline": baseline.to_dict(),
        },
        sort_keys=True,
    )
