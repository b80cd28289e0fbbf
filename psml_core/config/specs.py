"""Typed settings: frozen dataclasses for every part of a run and of an experiment."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from psml_core.config.build import build, plain
from psml_core.config.paths import get_path, set_paths
from psml_core.config.points import OperatingPoint
from psml_core.config.reading import parse_json
from psml_core.config.renames import hashed_names, renamed_run_keys
from psml_core.config.schema import StrictValidator, first_error, format_error, read_schema
from psml_core.errors import ConfigError


@cache
def _part_schema(part: str) -> dict[str, Any]:
    """The schema of one part of a run's JSON (``run``, or a ``$defs`` entry such as dataset)."""
    cfg, methods = read_schema("config"), read_schema("methods")
    defs = {**cfg["$defs"], **methods["$defs"], **read_schema("operating_points")["$defs"]}
    if part != "run":
        return {"$defs": defs, "$ref": f"#/$defs/{part}"}
    top = cfg["properties"]
    props: dict[str, Any] = {
        "run_id": {"type": "string", "minLength": 1},
        "seed": {"type": "integer", "minimum": 0},
        "colocated": {"type": "boolean"},
        **{
            k: top[k]
            for k in ("tier", "backend", "workers", "shards", "checkpoint_every", "torch_device")
        },
        **{k: {"$ref": f"#/$defs/{k}"} for k in ("dataset", "workload", "scenario", "compute")},
        "method": {"$ref": "#/$defs/recipe"},
        "operating_point": {"$ref": "#/$defs/operating_point"},
    }
    optional = ("checkpoint_every", "torch_device", "operating_point")
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
    err = first_error(StrictValidator(_part_schema(part)), inst)
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
    communities: int | None = None
    locality: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A plain dict, the community keys only where set (older specs keep their hash)."""
        out = plain(dataclasses.asdict(self))
        return {k: v for k, v in out.items() if v is not None or k not in _LATER_KEYS}


_LATER_KEYS = ("communities", "locality")


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
    warmup_iterations: int = 0
    cost_profile: str | None = None


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


TCP_IPV4_MTU1500 = 1448 / 1500
"""TCP payload per byte of a 1500-byte IPv4 packet (20 B IPv4 + 20 B TCP + 12 B timestamps)."""


@dataclass(frozen=True)
class ScenarioSpec:
    """A network scenario (``scenarios.<name>``)."""

    name: str
    bandwidth_gbps: float
    latency_us: float = 50.0
    message_overhead_us: float = 10.0
    overlap: bool = True
    header_bytes: int = 0
    wire_efficiency: float = TCP_IPV4_MTU1500
    rate_window: float = 0.02
    description: str = ""
    delay: dict[str, Any] | None = None
    cross_traffic: dict[str, Any] | None = None
    bandwidth_steps: tuple[BandwidthStep, ...] = ()
    nics: tuple[NicOverride, ...] = ()
    heterogeneity: HeterogeneitySpec | None = None
    codec_costs: bool | None = None


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
    cost_profile: str = "cpu-core"
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

    @property
    def key(self) -> str:
        """The block's directory name under ``data/<tier>/hashed/<dataset>/`` (r0p0625, b4096u).

        Its size rule, and ``u`` when unsigned; the workflow's hash rule and ``psml train``
        by name both use it.
        """
        ratio = f"r{float(self.ratio or 0)!r}".replace(".", "p")
        size = f"b{self.buckets}" if self.buckets else ratio
        return f"{size}{'' if self.signed else 'u'}"

    def buckets_for(self, features: int) -> int:
        """The bucket count m for a data set of ``features`` raw features."""
        if self.buckets is not None:
            return int(self.buckets)
        return max(1, round(float(self.ratio) * features))  # type: ignore[arg-type]


@dataclass(frozen=True)
class FreeParameter:
    """A recipe's free parameter: chosen on the tuning seed like its learning rate (``tune``).

    A baseline whose paper leaves a setting free (OmniReduce's block size, a uniform
    compression ratio) or a method constant of ours (DC2's target ratio of delay to compute)
    gets it from the tuning sweep, by the same rule as the learning rate, so that no verdict
    hinges on a value we picked. The recipe's own value at the paths must be one of ``values``:
    it is the declared point.

    Attributes:
        params: Dotted paths in the recipe (``codec.params.block_size``), all set to the value.
        values: The values tried.
        why: Where the values come from, in one sentence (printed in the report).
    """

    params: tuple[str, ...]
    values: tuple[Any, ...]
    why: str = ""

    def declared(self, recipe: dict[str, Any]) -> Any:
        """The recipe's own value (at the first path) of its plain dict form."""
        return get_path(recipe, self.params[0])


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
    calibrated: dict[str, Any] | None = None
    tune: FreeParameter | None = None

    def check_tune(self) -> None:
        """The free parameter's declared value is set, the same at every path, and a value.

        Called once the recipe's blocks are known to build
        (:func:`psml_core.recipes.check_recipe`), so that a broken block is named as such.

        Raises:
            ConfigError: The problem, without the key (the caller names the file and key).
        """
        if self.tune is None:
            return
        data = dataclasses.asdict(self)
        values = [get_path(data, p) for p in self.tune.params]
        if values[0] is None or values[0] not in self.tune.values or len(set(values)) != 1:
            raise ConfigError(
                f"its value at {', '.join(self.tune.params)} ({', '.join(map(repr, values))}) "
                f"must be set, the same at every path, and one of tune.values "
                f"{list(self.tune.values)} (it is the declared point)"
            )

    def with_values(self, values: dict[str, Any]) -> MethodRecipe:
        """This recipe with the value at each dotted path of ``values`` replaced."""
        if not values:
            return self
        data = dataclasses.asdict(self)
        for path, value in values.items():
            set_paths(data, [path], value, "operating_point", f"recipe {self.name!r}")
        return build(MethodRecipe, data, self.name)


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
    torch_device: str = "cpu"
    operating_point: OperatingPoint | None = None

    def to_dict(self) -> dict[str, Any]:
        """A plain, JSON-serialisable dict.

        ``torch_device`` (the default ``cpu``), ``operating_point`` (None) and the workload's
        ``warmup_iterations`` (0) are left out at their defaults: a run keeps the config hash it
        had before the setting existed (its results and checkpoints stay valid).
        """
        out = plain(dataclasses.asdict(self))
        if out.get("torch_device") == "cpu":
            del out["torch_device"]
        if out.get("operating_point") is None:
            out.pop("operating_point", None)
        if out["workload"].get("warmup_iterations") == 0:
            del out["workload"]["warmup_iterations"]
        for part, key in (("workload", "cost_profile"), ("scenario", "codec_costs")):
            if out[part].get(key) is None:  # unset: older specs keep their hash
                out[part].pop(key, None)
        out["dataset"] = self.dataset.to_dict()
        for key in ("calibrated", "tune"):
            if out["method"].get(key) is None:  # older specs keep their hash
                out["method"].pop(key, None)
        if out.get("operating_point") and not out["operating_point"].get("params"):
            out["operating_point"].pop("params", None)
        return out

    def at_point(self, point: OperatingPoint) -> RunSpec:
        """This run at ``point``, and the point itself.

        Its workload's lr, momentum and warm-up are the point's, and its recipe's free
        parameters (``tune``) take the point's values.
        """
        wl = dataclasses.replace(
            self.workload,
            lr=point.lr,
            momentum=point.momentum,
            warmup_iterations=point.warmup_iterations,
        )
        method = self.method.with_values(point.params)
        return dataclasses.replace(self, workload=wl, method=method, operating_point=point)

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, no spaces): stable across runs."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        """Parse :meth:`to_json` output; a malformed or invalid run is a ConfigError.

        The run is checked against the same schema definitions as the config, so a
        hand-written ``--run`` fails here, with one line naming the key, and not deep inside
        training. Its blocks are checked against the registries one layer up
        (:func:`psml_core.recipes.read_run_spec`).
        """
        data = parse_json(text, "--run")
        if isinstance(data, dict):
            data = renamed_run_keys(data, "--run")
        check_part(data, "run", source="--run")
        return build(cls, data, "run")

    def config_hash(self) -> str:
        """SHA-256 of the canonical JSON: two runs with the same hash had the same settings."""
        # Hashed under the keys' names before issue 47 (device, compute's and workload's device):
        # a run keeps the hash, so the results and checkpoints, it had before the rename.
        text = json.dumps(hashed_names(self.to_dict()), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def placement_key(self) -> str:
        """The name of this run's placement: its placement's name and a digest of its inputs.

        ``psml partition`` reads the data set (hashed by the recipe's hashing block), the
        workload's model and batch size, the placement's settings, the cluster's layout and
        the seed, nothing else. Runs with the same key get the same assignment, so the
        workflow computes it once for all of them.
        """
        d = hashed_names(self.to_dict())  # the names before issue 47, as config_hash
        inputs = {k: d[k] for k in _PLACEMENT_INPUTS}
        inputs["workload"] = {k: v for k, v in d["workload"].items() if k not in _TRAINING_ONLY}
        inputs.update(placement=d["method"]["placement"], hashing=d["method"]["hashing"])
        text = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
        return f"{self.method.placement.name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


# What a placement depends on besides the recipe's placement and hashing blocks.
_PLACEMENT_INPUTS = ("colocated", "dataset", "seed", "shards", "workers", "workload")
# A workload's fields that only training reads (its model and batch size are the placement's).
_TRAINING_ONLY = frozenset(
    ("eval_every", "iterations", "l2", "lr", "momentum", "optimizer", "target_accuracy",
     "target_window", "warmup_iterations")
)  # fmt: skip


def read_run_spec(text: str) -> RunSpec:
    """A run spec given as JSON text or as the path of a JSON file (``--run``)."""
    if not text.lstrip().startswith("{"):
        try:
            text = Path(text).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--run {text!r}: neither JSON nor a readable file ({exc})") from None
    return RunSpec.from_json(text)
