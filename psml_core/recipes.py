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

from psml_core.codecs import CODECS, make_codec
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
from psml_core.errors import ConfigError
from psml_core.placement import PLACEMENTS
from psml_core.sync import SYNC_POLICIES

__all__ = ["check_recipe", "load_experiment", "load_methods", "read_run_spec", "run_from_json"]


def check_recipe(recipe: MethodRecipe, source: str, at: str | None = None) -> None:
    """Every block's name is registered and its params build it (e.g. a ratio in (0, 1]).

    Args:
        recipe: The recipe.
        source: Where it came from: a methods file's path, or ``--run`` / ``--config KEY``.
        at: The key that holds the recipe (default: its name, as in config/methods.yaml).

    Raises:
        ConfigError: One line naming the source, the key and the problem.
    """
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


def load_methods(path: str | Path | None = None) -> dict[str, MethodRecipe]:
    """Load config/methods.yaml: its schema, and every block against its registry."""
    p = Path(path) if path is not None else config_root() / "methods.yaml"
    recipes = parse_methods(p)
    for recipe in recipes.values():
        check_recipe(recipe, str(p))
    return recipes


def load_experiment(user: dict[str, Any], root: str | Path | None = None) -> Experiment:
    """Resolve the user's config into an :class:`~psml_core.config.Experiment`, fully checked.

    Every recipe of the methods file and every recipe an experiment's ``sweep`` derives is
    checked against the registries.

    Raises:
        ConfigError: naming the key and the allowed values, for any invalid setting.
    """
    base = Path(root) if root is not None else config_root()
    listed = load_methods(base / "methods.yaml")
    exp = build_experiment(user, base)
    for name, ex in exp.experiments.items():
        for method in ex.methods:
            if ex.sweep and method not in listed and method in exp.recipes:
                check_recipe(exp.recipes[method], f"--config experiments.{name}.sweep", method)
    return exp


def run_from_json(text: str) -> RunSpec:
    """:meth:`RunSpec.from_json`, with the run's method checked against the registries."""
    spec = RunSpec.from_json(text)
    check_recipe(spec.method, "--run", "method")
    return spec


def read_run_spec(text: str) -> RunSpec:
    """A run spec given as JSON text or as the path of a JSON file (``--run``), fully checked."""
    spec = _read_run_spec(text)
    check_recipe(spec.method, "--run", "method")
    return spec
