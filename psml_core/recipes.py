"""Method recipes against the block registries: the check that runs whenever settings load.

:mod:`psml_core.config` parses and validates settings and imports nothing above it. A recipe
names blocks (codec, sync policy, controller, placement) that live in the layer above the
settings, so the check that every name is registered and every block builds from its params
(a ratio in (0, 1], a known rule, ...) sits here, one layer up, and every public loader goes
through it: :func:`load_methods`, :func:`load_experiment` and :func:`read_run_spec`. A bad
recipe is then one ``ConfigError`` line when the config loads, before any job runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from psml_core import plugins
from psml_core.backend_info import BACKEND_INFOS
from psml_core.codecs import CODECS, ServerCodec, make_codec
from psml_core.codecs.lossless import snappy_size
from psml_core.codecs.randomk import RandomKServer
from psml_core.config import (
    Experiment,
    MethodRecipe,
    RunSpec,
    build_experiment,
    config_root,
    parse_methods,
)
from psml_core.config import read_run_spec as _read_run_spec
from psml_core.control import CONTROLLERS
from psml_core.errors import ConfigError, DataError, did_you_mean
from psml_core.placement import PLACEMENTS
from psml_core.placement.dynamic import DynamicPlacement
from psml_core.plugins import load_plugins
from psml_core.scale import check_scale
from psml_core.sync import SYNC_POLICIES

__all__ = [
    "check_method",
    "check_movable",
    "check_recipe",
    "load_experiment",
    "load_methods",
    "read_run_spec",
    "run_from_json",
]


def check_recipe(recipe: MethodRecipe, source: str, at: str | None = None) -> None:
    """Every block's name is registered and its params build it (e.g. a ratio in (0, 1]).

    Args:
        recipe: The recipe.
        source: Where it came from: a methods file's path, or ``--run`` / ``--config KEY``.
        at: The key that holds the recipe (default: its name, as in config/methods.yaml).

    Raises:
        ConfigError: One line naming the source, the key and the problem.
    """
    load_plugins()
    blocks = [
        ("codec", recipe.codec, CODECS, make_codec),
        ("codec_down", recipe.codec_down, CODECS, make_codec),
        ("sync", recipe.sync, SYNC_POLICIES, SYNC_POLICIES.build),
        ("controller", recipe.controller, CONTROLLERS, CONTROLLERS.build),
        ("placement", recipe.placement, PLACEMENTS, PLACEMENTS.build),
    ]
    what = source if source.startswith("--") else f"methods file {source!r}"
    for key, block, registry, make in blocks:
        if block is None:
            continue
        try:
            registry.get(block.name, where=f"{at or recipe.name}.{key}.name")
        except ConfigError as exc:
            raise ConfigError(f"invalid {what}: {exc}") from None
        try:
            make(block)
        except (ConfigError, TypeError, ValueError) as exc:
            raise ConfigError(
                f"invalid {what}: key '{at or recipe.name}.{key}.params': {exc}"
            ) from None
    try:
        recipe.check_tune()
    except ConfigError as exc:
        raise ConfigError(f"invalid {what}: key '{at or recipe.name}.tune': {exc}") from None


def check_method(recipe: MethodRecipe) -> None:
    """The recipe's blocks work together: pull mode and sync policy, wrappers, placement.

    Run for every recipe a config uses when it loads (:func:`load_experiment`), and again by
    :func:`~psml_core.engine.job.build_job` for a run given as JSON.

    Raises:
        ConfigError: One line naming the method, the conflict and the fix.
    """
    load_plugins()  # a run spec built by hand reaches here without a loader
    name = recipe.name
    policy = SYNC_POLICIES.build(recipe.sync)
    if recipe.pull == "aggregate" and (not policy.barrier or policy.rounds):
        raise ConfigError(
            f"method {name!r}: pull: aggregate needs a barrier sync policy (bsp); "
            f"{recipe.sync.name!r} does not average one gradient per worker per clock — "
            f"use pull: params"
        )
    if recipe.lossless == "snappy" and snappy_size(b"") is None:
        raise ConfigError(
            f"method {name!r}: lossless: snappy needs python-snappy; install it "
            f"(pip install python-snappy) or set lossless: none"
        )
    down = recipe.codec_down
    if recipe.pull == "delta" and down is not None and down.params.get("error_feedback"):
        raise ConfigError(
            f"method {name!r}: pull: delta keeps each worker's view, which already "
            f"carries what codec_down drops; remove codec_down.params.error_feedback"
        )
    if recipe.pull == "touched" and down is not None:
        raise ConfigError(
            f"method {name!r}: pull: touched answers with PS-lite key/value entries "
            f"of the requested keys, never through codec_down; remove codec_down "
            f"({down.name!r}) or use pull: params"
        )
    if recipe.codec.params.get("momentum_correction") and policy.rounds:
        raise ConfigError(
            f"method {name!r}: momentum_correction moves the gradient momentum onto "
            f"the workers' codecs, but sync policy {recipe.sync.name!r} pushes model changes "
            f"of local optimizer steps; use error_feedback: true"
        )
    if down is not None and down.params.get("momentum_correction"):
        raise ConfigError(
            f"method {name!r}: momentum_correction belongs to the workers' up codec; "
            f"remove it from codec_down (use error_feedback: true there)"
        )
    if policy.rounds and recipe.pull != "params":
        raise ConfigError(
            f"method {name!r}: sync policy {recipe.sync.name!r} merges model "
            f"changes per round and needs pull: params, not {recipe.pull!r}"
        )
    if issubclass(PLACEMENTS.get(recipe.placement.name), DynamicPlacement):
        check_movable(recipe)


def check_movable(recipe: MethodRecipe) -> None:
    """Refuse a dynamic placement whose per-key state could not be moved (a ConfigError).

    Movable: codecs flagged ``movable`` (no per-shard state but an error-feedback residual,
    which is moved) whose server side is the plain sum, under a barrier policy.
    """
    where = f"method {recipe.name!r}: placement 'dynamic'"
    movable = [name for name in CODECS.names() if CODECS.get(name).movable]
    policy = SYNC_POLICIES.build(recipe.sync)
    if not policy.barrier or policy.rounds:
        raise ConfigError(
            f"{where} moves keys at a point where no message is in flight, which only a "
            f"barrier gives; use sync: {{name: bsp}}, not {recipe.sync.name!r}"
        )
    if recipe.pull not in ("params", "aggregate", "touched"):
        raise ConfigError(
            f"{where} supports pull: params, aggregate or touched, not {recipe.pull!r}"
        )
    if recipe.codec.params.get("momentum_correction"):
        raise ConfigError(
            f"{where}: codec {recipe.codec.name!r} with momentum_correction keeps per-shard "
            f"state (each worker's velocity and accumulation) that cannot be moved with the "
            f"keys; use one of {movable} with error_feedback, or a static placement"
        )
    server = make_codec(recipe.codec).server()
    if not CODECS.get(recipe.codec.name).movable or type(server) not in (
        ServerCodec,
        RandomKServer,
    ):
        raise ConfigError(
            f"{where}: codec {recipe.codec.name!r} (with these params) keeps per-shard "
            f"state that cannot be moved with the keys; use one of {movable} "
            f"(error_feedback allowed, no down_ratio) or a static placement"
        )
    if recipe.codec_down is not None and recipe.codec_down.name != "none":
        raise ConfigError(f"{where}: remove codec_down ({recipe.codec_down.name!r})")
    if recipe.lossless != "none":
        raise ConfigError(f"{where}: lossless: {recipe.lossless!r} is not supported")


def load_methods(path: str | Path | None = None) -> dict[str, MethodRecipe]:
    """Load config/methods.yaml: its schema, and every block against its registry."""
    load_plugins()
    p = Path(path) if path is not None else config_root() / "methods.yaml"
    recipes = parse_methods(p)
    for recipe in recipes.values():
        check_recipe(recipe, str(p))
    return recipes


def _load_all_methods(base: Path) -> dict[str, MethodRecipe]:
    """``base/methods.yaml`` and every plugin's methods file, each recipe checked.

    Raises:
        ConfigError: a file's own error; a recipe two files define, naming the package and
            version of each (psml's own file as psml itself).
    """
    files = [base / "methods.yaml", *plugins.methods_files()]
    recipes: dict[str, MethodRecipe] = {}
    origin: dict[str, Path] = {}
    for path in files:
        for name, recipe in parse_methods(path).items():
            if name in recipes:
                first, again = plugins.methods_owner(origin[name]), plugins.methods_owner(path)
                raise ConfigError(
                    f"{again}: recipe {name!r} is defined by {first} already ({origin[name]}, "
                    f"then {path}); two packages cannot define one recipe: rename it in one "
                    "of them, or uninstall one"
                )
            recipes[name], origin[name] = recipe, path
    for name, recipe in recipes.items():
        check_recipe(recipe, str(origin[name]))
    return recipes


def load_experiment(user: dict[str, Any], root: str | Path | None = None) -> Experiment:
    """Resolve the user's config into an :class:`~psml_core.config.Experiment`, fully checked.

    Every recipe of the methods file and every recipe an experiment's ``sweep`` derives is
    checked against the registries.

    Raises:
        ConfigError: naming the key and the allowed values, for any invalid setting.
    """
    load_plugins()
    base = Path(root) if root is not None else config_root()
    listed = _load_all_methods(base)
    exp = build_experiment(
        user, base, methods_files=plugins.methods_files(), paper_files=plugins.paper_files()
    )
    _check_backend_name(exp.backend)
    for name, ex in exp.experiments.items():
        for method in ex.methods:
            if ex.sweep and method not in listed and method in exp.recipes:
                check_recipe(exp.recipes[method], f"--config experiments.{name}.sweep", method)
    for recipe in exp.recipes.values():  # the blocks of each method the tier runs fit together
        check_method(recipe)
    check_scale(exp)
    _check_validation_table(exp.report.get("validation"))
    return exp


def _check_backend_name(name: str) -> None:
    """``backend`` names a registered descriptor: psml's own or a plugin's (psml.backends)."""
    if name not in BACKEND_INFOS:
        known = BACKEND_INFOS.names()
        raise ConfigError(
            f"invalid config: key 'backend': unknown backend {name!r}; "
            f"{did_you_mean(name, known)}known backends: {', '.join(known)} (a package adds "
            "one through the entry-point group psml.backends)"
        )


def _check_validation_table(path: str | None) -> None:
    """``report.validation``, where it exists, is a table of ``psml validate`` (format 1).

    Its place (a .json file under the working directory) is checked with the settings; a
    missing one is the report rule's to name, as it may lie beside the workflow's config/.
    """
    from psml_core.validate.table import read_table

    if path and Path(path).is_file():
        try:
            read_table(path)
        except DataError as err:
            raise ConfigError(f"invalid config: key 'report.validation': {err}") from None


def run_from_json(text: str) -> RunSpec:
    """:meth:`RunSpec.from_json`, with the run's method checked against the registries."""
    load_plugins()
    spec = RunSpec.from_json(text)
    check_recipe(spec.method, "--run", "method")
    return spec


def read_run_spec(text: str) -> RunSpec:
    """A run spec given as JSON text or as the path of a JSON file (``--run``), fully checked."""
    load_plugins()
    spec = _read_run_spec(text)
    check_recipe(spec.method, "--run", "method")
    return spec
