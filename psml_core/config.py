"""Load and validate configuration; typed settings for experiments and single runs.

The JSON schemas in ``workflow/schemas/`` are the single source of truth: Snakemake's
``validate()`` (in ``workflow/rules/common.smk``) and this module read the same files. This module
adds what a schema cannot say (a method name must be a key of ``config/methods.yaml``, a workload
must name a defined dataset) and turns every violation into one :class:`ConfigError` that names
the key and the allowed values.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import types
import typing
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import jsonschema
import yaml

from psml_core.errors import ConfigError

__all__ = [
    "BandwidthStep",
    "BlockSpec",
    "ComputeSpec",
    "DatasetSpec",
    "Experiment",
    "HashingSpec",
    "HeterogeneitySpec",
    "MethodRecipe",
    "NicOverride",
    "RunSpec",
    "ScenarioSpec",
    "WorkloadSpec",
    "check_part",
    "config_root",
    "format_error",
    "build_experiment",
    "parse_methods",
    "load_yaml",
    "read_run_spec",
    "schema_dir",
    "sweep_entries",
    "sweep_label",
    "sweep_recipes",
    "validate",
]

_PKG = Path(__file__).resolve().parent
_REPO = _PKG.parent


def schema_dir() -> Path:
    """Where the JSON schemas live: the repository's workflow/schemas, or the wheel's copy."""
    for cand in (_REPO / "workflow" / "schemas", _PKG / "_schemas"):
        if cand.is_dir():
            return cand
    raise ConfigError("cannot find the psml JSON schemas (workflow/schemas); reinstall psml-core")


def config_root() -> Path:
    """The default config directory: the repository's config/, or the wheel's copy."""
    for cand in (_REPO / "config", _PKG / "_config"):
        if cand.is_dir():
            return cand
    raise ConfigError("cannot find the psml config directory; pass --config-dir")


@cache
def _schema(name: str) -> dict[str, Any]:
    with open(schema_dir() / f"{name}.schema.yaml", encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def load_yaml(path: str | Path, what: str = "config file") -> Any:
    """Read a YAML file; a missing or malformed file is a ConfigError naming it."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{what} {str(p)!r} does not exist")
    try:
        with open(p, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{what} {str(p)!r} is not valid YAML{where}: {exc}") from None


def _key(path: typing.Iterable[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def format_error(err: jsonschema.ValidationError) -> str:
    """Turn a jsonschema error into one line naming the key and what is allowed."""
    key = _key(err.absolute_path)
    v, val, inst = err.validator, err.validator_value, err.instance
    if v == "enum":
        return f"key {key!r}: {inst!r} is not allowed; allowed values: " + ", ".join(
            str(x) for x in val
        )
    if v == "const":
        return f"key {key!r}: must be {val!r}, got {inst!r}"
    if v == "additionalProperties" and isinstance(inst, dict):
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(k for k in inst if k not in err.schema.get("properties", {}))
        return (
            f"unknown key {', '.join(repr(e) for e in extra)} in {key!r}; "
            f"allowed keys: {', '.join(allowed)}"
        )
    if v == "type" and isinstance(inst, float) and not math.isfinite(inst):
        return f"key {key!r}: expected a finite {val}, got {inst!r}"
    if v == "type":
        return f"key {key!r}: expected {val}, got {inst!r} ({type(inst).__name__})"
    if v == "required":
        missing = [r for r in val if r not in inst]
        return f"key {key!r}: missing required key(s) {', '.join(missing)}"
    if v in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
        return f"key {key!r}: {inst!r} is out of range; must be {op[v]} {val}"
    if v in ("minItems", "minProperties"):
        return f"key {key!r}: needs at least {val} entr{'y' if val == 1 else 'ies'}"
    if v == "oneOf" and all(set(b) == {"required"} for b in val):
        # "exactly one of these keys" (e.g. hashing: buckets | ratio)
        names = [r for b in val for r in b["required"]]
        given = [n for n in names if isinstance(inst, dict) and n in inst]
        return (
            f"key {key!r}: give exactly one of the keys {', '.join(names)}; "
            f"got {', '.join(given) if given else 'none'}"
        )
    if v == "anyOf" and all(set(b) == {"required"} for b in val):
        # "at least one of these keys" (e.g. libsvm: path | url)
        names = [r for b in val for r in b["required"]]
        return f"key {key!r}: needs one of the keys {' or '.join(names)}; got neither"
    if v == "dependentRequired":
        needs = {k: [r for r in req if r not in inst] for k, req in val.items() if k in inst}
        k, missing = next((k, m) for k, m in needs.items() if m)
        named = k if key == "(top level)" else f"{key}.{k}"  # the key that was given
        return f"key {named!r}: needs {', '.join(missing)} too"
    if v == "uniqueItems":
        return f"key {key!r}: entries must be unique, got {inst!r}"
    if v == "pattern":
        return f"key {key!r}: {inst!r} does not match the pattern {val!r}"
    return f"key {key!r}: {err.message}"


def _extend_with_defaults(cls: type[jsonschema.protocols.Validator]) -> Any:
    """A validator class that also fills ``default`` values, as Snakemake's validate() does."""
    validate_properties = cls.VALIDATORS["properties"]

    def set_defaults(validator: Any, properties: Any, instance: Any, schema: Any) -> Any:
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if "default" in sub and prop not in instance:
                    instance[prop] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(cls, {"properties": set_defaults})


_Validator = _extend_with_defaults(jsonschema.Draft202012Validator)


def _strict_integer(checker: Any, instance: Any) -> bool:
    """JSON Schema counts 2.0 as an integer; a setting written 2.0 would break ``range(2.0)``."""
    return isinstance(instance, int) and not isinstance(instance, bool)


def _finite_number(checker: Any, instance: Any) -> bool:
    """A number, but not NaN or infinity (``.nan`` would pass every range check unnoticed)."""
    return (
        isinstance(instance, int | float)
        and not isinstance(instance, bool)
        and math.isfinite(instance)
    )


_StrictValidator = jsonschema.validators.extend(
    _Validator,
    type_checker=_Validator.TYPE_CHECKER.redefine_many(
        {"integer": _strict_integer, "number": _finite_number}
    ),
)
_STRICT = ("config", "methods")
"""Schemas of files people write: integers written as integers, numbers finite."""


def validate(instance: Any, schema_name: str, *, source: str) -> Any:
    """Validate ``instance`` against ``workflow/schemas/<schema_name>.schema.yaml``.

    Returns a deep copy with schema defaults filled in. The first violation (by jsonschema's
    relevance order) becomes a ConfigError naming ``source``, the key and the allowed values.
    """
    inst = copy.deepcopy(instance)
    cls = _StrictValidator if schema_name in _STRICT else _Validator
    err = jsonschema.exceptions.best_match(cls(_schema(schema_name)).iter_errors(inst))
    if err is not None:
        raise ConfigError(f"invalid {source}: {format_error(err)}")
    return inst


@cache
def _part_schema(part: str) -> dict[str, Any]:
    """The schema of one part of a run's JSON (``run``, or a ``$defs`` entry such as dataset)."""
    cfg, methods = _schema("config"), _schema("methods")
    defs = {**cfg["$defs"], **methods["$defs"]}
    if part != "run":
        return {"$defs": defs, "$ref": f"#/$defs/{part}"}
    top = cfg["properties"]
    props: dict[str, Any] = {
        "run_id": {"type": "string", "minLength": 1},
        "seed": {"type": "integer", "minimum": 0},
        "colocated": {"type": "boolean"},
        **{
            k: top[k]
            for k in ("tier", "backend", "workers", "shards", "checkpoint_every", "device")
        },
        **{k: {"$ref": f"#/$defs/{k}"} for k in ("dataset", "workload", "scenario", "compute")},
        "method": {"$ref": "#/$defs/recipe"},
    }
    optional = ("checkpoint_every", "device")
    required = [f.name for f in dataclasses.fields(RunSpec) if f.name not in optional]
    return {
        "$defs": defs,
        "type": "object",
        "additionalProperties": False,
        "required": required,
        "properties": props,
    }


def _unset(data: Any) -> Any:
    """``data`` without None values: the JSON form of unset optional fields."""
    if isinstance(data, dict):
        return {k: _unset(v) for k, v in data.items() if v is not None}
    if isinstance(data, list):
        return [_unset(v) for v in data]
    return data


def _unnamed(data: Any, where: str, source: str) -> Any:
    """A named part (dataset, workload, ...) without its ``name``, which the config holds as key."""
    if not isinstance(data, dict):
        return data  # the schema says what is wrong
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(
            f"invalid {source}: key {where + '.name'!r}: expected a name, got {name!r}"
        )
    return {k: v for k, v in data.items() if k != "name"}


def check_part(data: Any, part: str, *, source: str) -> None:
    """Validate a dataclass's JSON form (``RunSpec`` as ``run``, ``DatasetSpec`` as ``dataset``).

    The JSON of a run, or of a dataset given to ``psml prepare``, is built from the validated
    config, but anybody can also write one by hand: it gets the config's checks (strict types,
    ranges, allowed values), each violation one ConfigError naming ``source`` and the key.
    """
    inst = _unset(data)
    if part != "run":
        inst = _unnamed(inst, part, source)
    elif isinstance(inst, dict):
        for key in ("dataset", "workload", "scenario", "method"):
            if key in inst:
                inst[key] = _unnamed(inst[key], key, source)
    validator = _StrictValidator(_part_schema(part))
    err = jsonschema.exceptions.best_match(validator.iter_errors(inst))
    if err is not None:
        raise ConfigError(f"invalid {source}: {format_error(err)}")


# --------------------------------------------------------------------------- typed settings


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset entry (``datasets.<name>``); field meanings in config.schema.yaml."""

    name: str
    source: str
    seed: int = 0
    test_fraction: float = 0.2
    rows: int | None = None
    calibration: str | None = None
    features: int | None = None
    nnz_per_row: float | None = None
    zipf_exponent: float | None = None
    positive_rate: float | None = None
    path: str | None = None
    test_path: str | None = None
    sha256: str | None = None
    n_features: int | None = None
    url: str | None = None
    test_url: str | None = None
    test_sha256: str | None = None


@dataclass(frozen=True)
class WorkloadSpec:
    """A dataset, a model and its training hyper-parameters (``workloads.<name>``)."""

    name: str
    dataset: str
    model: str
    batch_size: int
    lr: float
    iterations: int
    hidden: tuple[int, ...] = (64,)
    optimizer: str = "sgd"
    momentum: float = 0.0
    l2: float = 0.0
    eval_every: int = 10
    target_accuracy: float = 0.9
    target_window: int | None = None
    workers: int | None = None


@dataclass(frozen=True)
class BandwidthStep:
    """From ``at_s`` simulated seconds on, every NIC runs at ``gbps``."""

    at_s: float
    gbps: float


@dataclass(frozen=True)
class NicOverride:
    """NIC settings of some machines (``scenarios.<name>.nics``); None keeps the default."""

    machines: Any
    bandwidth_gbps: float | None = None
    latency_us: float | None = None


@dataclass(frozen=True)
class ScenarioSpec:
    """A network scenario (``scenarios.<name>``)."""

    name: str
    bandwidth_gbps: float
    latency_us: float = 50.0
    message_overhead_us: float = 10.0
    overlap: bool = True
    header_bytes: int = 0
    rate_window: float = 0.02
    description: str = ""
    delay: dict[str, Any] | None = None
    cross_traffic: dict[str, Any] | None = None
    bandwidth_steps: tuple[BandwidthStep, ...] = ()
    nics: tuple[NicOverride, ...] = ()
    heterogeneity: HeterogeneitySpec | None = None


@dataclass(frozen=True)
class HeterogeneitySpec:
    """Worker speed differences (``compute.heterogeneity``)."""

    multipliers: tuple[float, ...] | None = None
    draw_from: tuple[float, ...] | None = None
    redraw_every: int | None = None
    straggler_prob: float = 0.0
    straggler_slowdown: float = 1.0


@dataclass(frozen=True)
class ComputeSpec:
    """The compute-time model (``compute``)."""

    model: str
    device: str = "cpu-core"
    threads: int = 1
    codec_costs: bool = True
    heterogeneity: HeterogeneitySpec | None = None


@dataclass(frozen=True)
class BlockSpec:
    """A building block chosen by registry name, with its keyword parameters."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HashingSpec:
    """Feature hashing of a sparse data set (``<method>.hashing``; see methods.schema.yaml).

    Exactly one of ``buckets`` (m) and ``ratio`` (m = max(1, round(ratio * d)) for d raw
    features) is set. The schema says so too; the check is repeated here because a run's JSON
    (``psml train --run``) is built without the schema.

    Attributes:
        buckets: Number of hash buckets m >= 1.
        ratio: Bucket count as a fraction of the raw feature count, in (0, 1].
        signed: Whether each feature also gets a random sign xi(j) in {+1, -1}.
    """

    buckets: int | None = None
    ratio: float | None = None
    signed: bool = True

    def __post_init__(self) -> None:
        if (self.buckets is None) == (self.ratio is None):
            raise ConfigError(
                "key 'hashing': give exactly one of 'buckets' (an integer >= 1) or 'ratio' "
                f"(a number in (0, 1]), got buckets={self.buckets!r}, ratio={self.ratio!r}"
            )
        if self.buckets is not None and (
            isinstance(self.buckets, bool) or not isinstance(self.buckets, int) or self.buckets < 1
        ):
            raise ConfigError(
                f"key 'hashing.buckets': must be an integer >= 1, got {self.buckets!r}"
            )
        if self.ratio is not None and (
            isinstance(self.ratio, bool)
            or not isinstance(self.ratio, int | float)
            or not 0.0 < self.ratio <= 1.0
        ):
            raise ConfigError(
                f"key 'hashing.ratio': must be a number in (0, 1], got {self.ratio!r}"
            )
        if not isinstance(self.signed, bool):
            raise ConfigError(f"key 'hashing.signed': must be true or false, got {self.signed!r}")

    def buckets_for(self, features: int) -> int:
        """The bucket count m for a data set of ``features`` raw features."""
        if self.buckets is not None:
            return int(self.buckets)
        return max(1, round(float(self.ratio) * features))  # type: ignore[arg-type]


@dataclass(frozen=True)
class MethodRecipe:
    """A method or baseline: codec, sync policy, controller and placement (config/methods.yaml)."""

    name: str
    description: str
    codec: BlockSpec
    sync: BlockSpec
    controller: BlockSpec
    placement: BlockSpec
    codec_down: BlockSpec | None = None
    pull: str = "params"
    lossless: str = "none"
    paper: str | None = None
    role: str = "baseline"
    deviations: tuple[str, ...] = ()
    hashing: HashingSpec | None = None


@dataclass(frozen=True)
class RunSpec:
    """Everything one training run needs; its JSON form is what the train rule passes."""

    run_id: str
    tier: str
    backend: str
    seed: int
    workers: int
    shards: int
    colocated: bool
    dataset: DatasetSpec
    workload: WorkloadSpec
    method: MethodRecipe
    scenario: ScenarioSpec
    compute: ComputeSpec
    checkpoint_every: int = 0
    device: str = "cpu"

    def to_dict(self) -> dict[str, Any]:
        """A plain, JSON-serialisable dict.

        ``device`` is left out when it is the default ``cpu``: a CPU run keeps the config hash
        it had before the setting existed (its results and checkpoints stay valid).
        """
        out = _plain(dataclasses.asdict(self))
        if out.get("device") == "cpu":
            del out["device"]
        return out

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, no spaces): stable across runs, used for hashing."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        """Parse :meth:`to_json` output; a malformed or invalid run is a ConfigError.

        The run is checked against the same schema definitions as the config, so a
        hand-written ``--run`` fails here, with one line naming the key, and not deep inside
        training. Its blocks are checked against the registries one layer up
        (:func:`psml_core.recipes.read_run_spec`).
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--run is not valid JSON: {exc}") from None
        check_part(data, "run", source="--run")
        return build(cls, data, "run")

    def config_hash(self) -> str:
        """SHA-256 of the canonical JSON: two runs with the same hash had the same settings."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()


def read_run_spec(text: str) -> RunSpec:
    """A run spec given as JSON text or as the path of a JSON file (``--run``)."""
    if not text.lstrip().startswith("{"):
        try:
            text = Path(text).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--run {text!r}: neither JSON nor a readable file ({exc})") from None
    return RunSpec.from_json(text)


@dataclass(frozen=True)
class ExperimentSpec:
    """A grid of its own inside a tier: some methods on some workloads and scenarios."""

    name: str
    methods: tuple[str, ...]
    workloads: tuple[str, ...] = ()
    scenarios: tuple[str, ...] = ()
    seeds: tuple[int, ...] = ()
    description: str = ""
    paper: str | None = None
    sweep: dict[str, Any] | None = None
    scenario_sweep: dict[str, Any] | None = None
    workload_sweep: dict[str, Any] | None = None
    regime_map: dict[str, Any] | None = None


@dataclass(frozen=True)
class Experiment:
    """The validated effective configuration of one workflow invocation."""

    tier: str
    backend: str
    seeds: tuple[int, ...]
    workers: int
    shards: int
    colocated: bool
    methods: tuple[str, ...]
    datasets: dict[str, DatasetSpec]
    workloads: dict[str, WorkloadSpec]
    scenarios: dict[str, ScenarioSpec]
    compute: ComputeSpec
    recipes: dict[str, MethodRecipe]
    description: str = ""
    report: dict[str, Any] = field(default_factory=dict)
    experiments: dict[str, ExperimentSpec] = field(default_factory=dict)
    checkpoint_every: int = 0
    device: str = "cpu"
    slurm_gpu_partition: str = "gpu"
    derived: frozenset[str] = frozenset()
    """Scenarios and workloads an experiment's axis sweep derived (only its own grid runs them)."""

    @property
    def all_methods(self) -> tuple[str, ...]:
        """Every method of the main grid and of the experiments, main grid first."""
        out = list(self.methods)
        for ex in self.experiments.values():
            out += [m for m in ex.methods if m not in out]
        return tuple(out)

    def run_id(self, workload: str, method: str, scenario: str, seed: int) -> str:
        """The run's id, which is also its directory under ``results/<tier>/runs/``."""
        return f"{workload}/{method}/{scenario}/seed{seed}"

    def run(self, workload: str, method: str, scenario: str, seed: int) -> RunSpec:
        """The settings of one run of the grid."""
        wl = self.workloads[workload]
        workers, shards = self.cluster(workload)
        return RunSpec(
            run_id=self.run_id(workload, method, scenario, seed),
            tier=self.tier,
            backend=self.backend,
            seed=seed,
            workers=workers,
            shards=shards,
            colocated=self.colocated,
            dataset=self.datasets[wl.dataset],
            workload=wl,
            method=self.recipes[method],
            scenario=self.scenarios[scenario],
            compute=self.compute_for(scenario),
            checkpoint_every=self.checkpoint_every,
            device=self.device,
        )

    def cluster(self, workload: str) -> tuple[int, int]:
        """(workers, shards) of the workload's runs: its own ``workers`` or the tier's.

        A workload with its own worker count (a regime map's workers axis) keeps the tier's
        layout: one colocated shard per worker when the tier has as many shards as workers,
        else the tier's shard count (at most one per worker when colocated).
        """
        own = self.workloads[workload].workers
        if own is None or own == self.workers:
            return self.workers, self.shards
        if self.shards == self.workers:
            return own, own
        return own, min(self.shards, own) if self.colocated else self.shards

    def compute_for(self, scenario: str) -> ComputeSpec:
        """The compute settings under ``scenario``: its heterogeneity replaces the tier's."""
        het = self.scenarios[scenario].heterogeneity
        return self.compute if het is None else dataclasses.replace(self.compute, heterogeneity=het)

    def grid(self) -> list[tuple[str, str, str, int]]:
        """All (workload, method, scenario, seed) tuples, in a stable order, each once.

        The main grid (``methods`` x every workload x every scenario x ``seeds``), then each
        experiment's grid in name order.
        """
        out: dict[tuple[str, str, str, int], None] = {}
        workloads = sorted(set(self.workloads) - self.derived)
        scenarios = sorted(set(self.scenarios) - self.derived)
        grids = [(self.methods, workloads, scenarios, self.seeds)]
        for name in sorted(self.experiments):
            ex = self.experiments[name]
            grids.append(
                (
                    ex.methods,
                    list(ex.workloads or workloads),
                    list(ex.scenarios or scenarios),
                    ex.seeds or self.seeds,
                )
            )
        for methods, workloads, scenarios, seeds in grids:
            for w in workloads:
                for m in methods:
                    for s in scenarios:
                        for seed in seeds:
                            out[(w, m, s, seed)] = None
        return list(out)

    def runs(self) -> list[RunSpec]:
        """The settings of every run of the grid."""
        return [self.run(*key) for key in self.grid()]


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj


T = TypeVar("T")


def build(cls: type[T], data: Any, where: str) -> T:
    """Build dataclass ``cls`` from plain data, recursively, following its type hints."""
    return typing.cast(T, _build(cls, data, where))


def _build(tp: Any, data: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise ConfigError(f"key {where!r}: expected a mapping, got {data!r}")
        hints = typing.get_type_hints(tp)
        names = {f.name for f in dataclasses.fields(tp)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(
                f"unknown key {', '.join(map(repr, unknown))} in {where!r}; "
                f"allowed keys: {', '.join(sorted(names))}"
            )
        return tp(**{k: _build(hints[k], v, f"{where}.{k}") for k, v in data.items()})
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return None if data is None else _build(args[0], data, where)
    if origin is tuple:
        (item, *_rest) = typing.get_args(tp)
        return tuple(_build(item, v, where) for v in data)
    if origin is dict:
        _, vt = typing.get_args(tp)
        return {k: _build(vt, v, f"{where}.{k}") for k, v in data.items()}
    return data


# --------------------------------------------------------------------------- loading


def parse_methods(path: str | Path | None = None) -> dict[str, MethodRecipe]:
    """Load config/methods.yaml against its schema only.

    :func:`psml_core.recipes.load_methods` also checks every block against its registry.
    """
    p = Path(path) if path is not None else config_root() / "methods.yaml"
    raw = load_yaml(p, "methods file")
    data = validate(raw, "methods", source=f"methods file {str(p)!r}")
    recipes = {}
    for name, rec in data.items():
        recipes[name] = build(MethodRecipe, {"name": name, **rec}, name)
    return recipes


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def effective_config(user: dict[str, Any], root: str | Path | None = None) -> dict[str, Any]:
    """Overlay the user's config (config.yaml + --config) on its tier file; validate; fill defaults.

    Args:
        user: The user's config mapping; must hold ``tier``.
        root: The config directory (holding ``tiers/`` and ``methods.yaml``).

    Returns:
        The effective configuration as a plain dict, defaults filled in.
    """
    root = Path(root) if root is not None else config_root()
    if not isinstance(user, dict):
        raise ConfigError(f"invalid config: expected a mapping at the top level, got {user!r}")
    tiers = _schema("config")["properties"]["tier"]["enum"]
    tier = user.get("tier", "smoke")
    if tier not in tiers:
        raise ConfigError(
            f"invalid config: key 'tier': {tier!r} is not allowed; allowed values: "
            + ", ".join(tiers)
        )
    tier_file = root / "tiers" / f"{tier}.yaml"
    base = load_yaml(tier_file, "tier file") or {}
    merged = _deep_merge(base, user)
    merged["tier"] = tier
    return validate(merged, "config", source=f"config ({_shown(tier_file)} + overrides)")


def build_experiment(user: dict[str, Any], root: str | Path | None = None) -> Experiment:
    """Resolve the user's config into an :class:`Experiment`, checking cross-references.

    The method recipes' blocks are not checked against their registries here (settings import
    nothing above them): :func:`psml_core.recipes.load_experiment` does both.

    Raises:
        ConfigError: naming the key and the allowed values, for any invalid setting.
    """
    root = Path(root) if root is not None else config_root()
    cfg = effective_config(user, root)
    recipes = parse_methods(root / "methods.yaml")
    _check_names("methods", cfg["methods"], recipes, "method", "methods (config/methods.yaml)")
    for name, ex in cfg.get("experiments", {}).items():
        where = f"experiments.{name}"
        _check_names(
            f"{where}.methods", ex["methods"], recipes, "method", "methods (config/methods.yaml)"
        )
        wls, scs = ex.get("workloads", []), ex.get("scenarios", [])
        _check_names(f"{where}.workloads", wls, cfg["workloads"], "workload", "workloads")
        _check_names(f"{where}.scenarios", scs, cfg["scenarios"], "scenario", "scenarios")
    for w, wl in cfg["workloads"].items():
        if wl["dataset"] not in cfg["datasets"]:
            raise ConfigError(
                f"invalid config: key 'workloads.{w}.dataset': unknown dataset "
                f"{wl['dataset']!r}; defined datasets: {', '.join(sorted(cfg['datasets']))}"
            )
    if cfg["colocated"] and cfg["shards"] > cfg["workers"]:
        raise ConfigError(
            f"invalid config: key 'shards': {cfg['shards']} shards cannot be colocated with "
            f"{cfg['workers']} workers; set shards <= workers or colocated: false"
        )
    _schedule_claims(cfg, recipes, root / "papers")
    made: set[str] = set()
    for name, ex in cfg.get("experiments", {}).items():
        for key, table in (("scenario_sweep", "scenarios"), ("workload_sweep", "workloads")):
            if ex.get(key):
                where = f"experiments.{name}.{key}"
                derived = sweep_entries(cfg[table], ex[key], where, table)
                made.update(derived)
                cfg[table].update(derived)
                listed = ex.get(table) or []
                ex[table] = [*listed, *(d for d in derived if d not in listed)]
        if ex.get("sweep"):
            derived = sweep_recipes(recipes, ex["sweep"], f"experiments.{name}.sweep")
            recipes.update(derived)
            ex["methods"] = [*ex["methods"], *(m for m in derived if m not in ex["methods"])]
    exp = Experiment(
        tier=cfg["tier"],
        backend=cfg["backend"],
        seeds=tuple(cfg["seeds"]),
        workers=cfg["workers"],
        shards=cfg["shards"],
        colocated=cfg["colocated"],
        methods=tuple(cfg["methods"]),
        datasets={
            k: build(DatasetSpec, {"name": k, **v}, f"datasets.{k}")
            for k, v in cfg["datasets"].items()
        },
        workloads={
            k: build(WorkloadSpec, {"name": k, **v}, f"workloads.{k}")
            for k, v in cfg["workloads"].items()
        },
        scenarios={
            k: build(ScenarioSpec, {"name": k, **v}, f"scenarios.{k}")
            for k, v in cfg["scenarios"].items()
        },
        compute=build(ComputeSpec, cfg["compute"], "compute"),
        recipes={m: recipes[m] for m in _used_methods(cfg)},
        description=cfg.get("description", "").strip(),
        report=cfg.get("report", {}),
        experiments={
            k: build(ExperimentSpec, {"name": k, **v}, f"experiments.{k}")
            for k, v in cfg.get("experiments", {}).items()
        },
        checkpoint_every=cfg.get("checkpoint_every", 0),
        device=cfg.get("device", "cpu"),
        slurm_gpu_partition=cfg.get("slurm_gpu_partition", "gpu"),
        derived=frozenset(made),
    )
    if not exp.grid():
        raise ConfigError(
            "invalid config: no runs; list methods (the main grid) or define experiments"
        )
    _check_runs(exp)
    return exp


def _schedule_claims(cfg: dict[str, Any], recipes: dict[str, Any], papers: Path) -> None:
    """Add to each experiment every run its paper claims need (method, baselines, scenarios).

    A tier that includes a claim's experiment runs the claim: its method and fixed baselines
    join the experiment's methods, and its fixed scenarios join the experiment's scenarios
    where the tier defines them (a scenario the tier lacks leaves the claim NOT RUN, with the
    missing runs named). Regime maps are left as they are: they run what they list.
    """
    experiments = cfg.get("experiments", {})
    if not experiments or not papers.is_dir():
        return
    for path in sorted(papers.glob("*.yaml")):
        paper = load_yaml(path, "paper file") or {}
        for claim in paper.get("claims") or []:
            meas = claim.get("measure") or {}
            ex = experiments.get(meas.get("experiment"))
            if ex is None or ex.get("regime_map"):
                continue
            base = meas.get("baseline")
            wanted = [meas.get("method"), *([base] if isinstance(base, str) else base or [])]
            ex["methods"] = [
                *ex["methods"],
                *(m for m in wanted if m in recipes and m not in ex["methods"]),
            ]
            if ex.get("scenarios"):
                ex["scenarios"] = [
                    *ex["scenarios"],
                    *(
                        s
                        for s in meas.get("scenarios") or []
                        if s in cfg["scenarios"] and s not in ex["scenarios"]
                    ),
                ]


def sweep_label(param: str, value: float) -> str:
    """A sweep value's default recipe-name suffix: the path's last part and the value.

    ``sweep_label("codec.params.ratio", 0.01) == "ratio_0p01"``.
    """
    text = f"{value:g}".replace("-", "m").replace(".", "p").replace("+", "")
    return f"{param.rsplit('.', 1)[-1]}_{text.lower()}"


def _set_paths(data: dict[str, Any], paths: list[str], value: Any, where: str, owner: str) -> None:
    """Set every dotted path of a sweep to ``value`` in ``data`` (a recipe, scenario, workload).

    Raises:
        ConfigError: ``owner`` has no block on the way to a path.
    """
    for path in paths:
        node: Any = data
        parts = path.split(".")
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                raise ConfigError(
                    f"invalid config: key '{where}.params': {owner} has no {path!r} "
                    f"(no {part!r} block)"
                )
            node = node[part]
        node[parts[-1]] = value


def sweep_entries(
    table: dict[str, Any], sweep: dict[str, Any], where: str, kind: str
) -> dict[str, dict[str, Any]]:
    """The scenarios (or workloads) of an experiment's axis sweep: ``<base>__<label>``.

    Each is the base entry of ``table`` with every dotted path of ``sweep["params"]`` set to
    the value (a number, or a list such as a Markov chain's flow counts), and the value named
    in its description. A regime map sweeps a link's bandwidth (a scenario), the number of
    workers (a workload's ``workers``) or the delay variation (a scenario's cross-traffic).

    Raises:
        ConfigError: an unknown base, a path the base does not have, or labels that do not
            match the values.
    """
    base_name = sweep["base"]
    if base_name not in table:
        raise ConfigError(
            f"invalid config: key '{where}.base': unknown {kind[:-1]} {base_name!r}; "
            f"known {kind}: {', '.join(sorted(table))}"
        )
    values = list(sweep["values"])
    labels = list(sweep.get("labels") or [])
    if len(labels) != len(values):
        if labels or not all(isinstance(v, int | float) for v in values):
            raise ConfigError(
                f"invalid config: key '{where}.labels': {len(labels)} labels for {len(values)} "
                "values; give one per value (labels may be left out for numeric values only)"
            )
        labels = [sweep_label(sweep["params"][0], v) for v in values]
    out: dict[str, dict[str, Any]] = {}
    for value, label in zip(values, labels, strict=True):
        data = copy.deepcopy(table[base_name])
        _set_paths(data, sweep["params"], value, where, f"{kind[:-1]} {base_name!r}")
        shown = f"{sweep['params'][0].rsplit('.', 1)[-1]} = {value}"
        if "description" in data or kind == "scenarios":
            data["description"] = f"{data.get('description', '')} [sweep: {shown}]".strip()
        out[f"{base_name}__{label}"] = data
    return out


def sweep_recipes(
    recipes: dict[str, MethodRecipe], sweep: dict[str, Any], where: str
) -> dict[str, MethodRecipe]:
    """The recipes of an experiment's parameter sweep: one per value, ``<method>__<label>``.

    Each is the swept recipe with every path of ``sweep["params"]`` set to the value (and the
    value named in its description); its blocks are checked like any recipe's.

    Raises:
        ConfigError: an unknown method, a path the recipe does not have, labels that do not
            match the values, or a value its block rejects (naming the key).
    """
    method = sweep["method"]
    if method not in recipes:
        raise ConfigError(
            f"invalid config: key '{where}.method': unknown method {method!r}; known methods "
            f"(config/methods.yaml): {', '.join(sorted(recipes))}"
        )
    values = list(sweep["values"])
    labels = list(sweep.get("labels") or [])
    if labels and len(labels) != len(values):
        raise ConfigError(
            f"invalid config: key '{where}.labels': {len(labels)} labels for {len(values)} "
            "values; give one per value or none"
        )
    labels = labels or [sweep_label(sweep["params"][0], v) for v in values]
    base = dataclasses.asdict(recipes[method])
    out: dict[str, MethodRecipe] = {}
    for value, label in zip(values, labels, strict=True):
        data = copy.deepcopy(base)
        _set_paths(data, sweep["params"], value, where, f"recipe {method!r}")
        name = f"{method}__{label}"
        shown = ", ".join(f"{p.rsplit('.', 1)[-1]} = {value:g}" for p in sweep["params"][:1])
        data.update(
            name=name,
            description=f"{data['description']} [sweep: {shown}, in place of the base recipe's "
            f"value that the text above names]",
        )
        try:
            recipe = build(MethodRecipe, data, name)
        except ConfigError as exc:
            raise ConfigError(f"invalid config: key '{where}': {exc}") from None
        out[name] = recipe
    return out


def _used_methods(cfg: dict[str, Any]) -> list[str]:
    out = list(cfg["methods"])
    for ex in cfg.get("experiments", {}).values():
        out += [m for m in ex["methods"] if m not in out]
    return out


def _check_names(where: str, names: list[str], known: Any, kind: str, what: str) -> None:
    for i, name in enumerate(names):
        if name not in known:
            raise ConfigError(
                f"invalid config: key '{where}[{i}]': unknown {kind} {name!r}; "
                f"known {what}: {', '.join(sorted(known))}"
            )


SPARSE_SOURCES = ("zipf_sparse", "libsvm")
"""Data sources whose features are sparse (feature hashing applies to them only)."""

IMAGE_MODELS = {"resnet18": ("cifar10", "synthetic_images")}
"""Models that take images, and the data sources whose rows are images of the right layout."""


def _check_runs(exp: Experiment) -> None:
    """Combinations that cannot run: image models on non-image data, hashing on dense data."""
    for w, wl in exp.workloads.items():
        sources = IMAGE_MODELS.get(wl.model)
        ds = exp.datasets[wl.dataset]
        if sources is not None and ds.source not in sources:
            raise ConfigError(
                f"invalid config: key 'workloads.{w}.model': {wl.model!r} takes images, but "
                f"data set {ds.name!r} has source {ds.source!r}; allowed sources: "
                + ", ".join(sources)
            )
    for w, m, _s, _seed in exp.grid():
        recipe, ds = exp.recipes[m], exp.datasets[exp.workloads[w].dataset]
        if recipe.hashing is not None and ds.source not in SPARSE_SOURCES:
            raise ConfigError(
                f"invalid config: method {m!r} hashes sparse features but workload {w!r} uses "
                f"the dense data set {ds.name!r}; run it on a sparse workload (an experiment's "
                f"workloads: list)"
            )
