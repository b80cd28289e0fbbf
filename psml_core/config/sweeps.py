"""Experiment sweeps, each derived entry named ``<base>__<label>``.

A parameter sweep derives recipes; an axis sweep derives scenarios or workloads.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from psml_core.config.calibration import CalibrationSpec, marker
from psml_core.config.paths import set_paths
from psml_core.config.specs import MethodRecipe, build
from psml_core.errors import ConfigError, did_you_mean

__all__ = ["sweep_entries", "sweep_label", "sweep_recipes"]


def sweep_label(param: str, value: float) -> str:
    """A sweep value's default recipe-name suffix: the path's last part and the value.

    ``sweep_label("codec.params.ratio", 0.01) == "ratio_0p01"``.
    """
    text = f"{value:g}".replace("-", "m").replace(".", "p").replace("+", "")
    return f"{param.rsplit('.', 1)[-1]}_{text.lower()}"


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
            f"{did_you_mean(base_name, table)}known {kind}: {', '.join(sorted(table))}"
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
        set_paths(data, sweep["params"], value, where, f"{kind[:-1]} {base_name!r}")
        shown = f"{sweep['params'][0].rsplit('.', 1)[-1]} = {value}"
        if "description" in data or kind == "scenarios":
            data["description"] = f"{data.get('description', '')} [sweep: {shown}]".strip()
        out[f"{base_name}__{label}"] = data
    return out


def sweep_recipes(
    recipes: dict[str, MethodRecipe],
    sweep: dict[str, Any],
    where: str,
    cal: CalibrationSpec | None = None,
) -> dict[str, MethodRecipe]:
    """The recipes of an experiment's parameter sweep: one per value, ``<method>__<label>``.

    Each is the swept recipe with every path of ``sweep["params"]`` set to the value (and the
    value named in its description); its blocks are checked like any recipe's. With a
    calibration ``cal``, the values are in the paper's units and each recipe carries the
    ``calibrated`` marker that training resolves (:mod:`psml_core.config.calibration`).

    Raises:
        ConfigError: an unknown method, a path the recipe does not have, labels that do not
            match the values, or a value its block rejects (naming the key).
    """
    method = sweep["method"]
    if method not in recipes:
        raise ConfigError(
            f"invalid config: key '{where}.method': unknown method {method!r}; "
            f"{did_you_mean(method, recipes)}known methods (config/methods.yaml): "
            + ", ".join(sorted(recipes))
        )
    free = recipes[method].tune
    if free is not None and set(free.params) & set(sweep["params"]):
        raise ConfigError(
            f"invalid config: key '{where}.params': recipe {method!r} chooses "
            f"{', '.join(sorted(set(free.params) & set(sweep['params'])))} on the tuning seed (its "
            "tune block), and every recipe a sweep derives inherits its base's point; sweep a "
            "copy of the recipe without a tune block"
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
        set_paths(data, sweep["params"], value, where, f"recipe {method!r}")
        name = f"{method}__{label}"
        shown = ", ".join(f"{p.rsplit('.', 1)[-1]} = {value:g}" for p in sweep["params"][:1])
        data.update(
            name=name,
            description=f"{data['description']} [sweep: {shown}, in place of the base recipe's "
            f"value that the text above names]",
        )
        if cal is not None:
            data["calibrated"] = marker(cal, value)
            data["description"] += f" [{shown} in the paper's units, x the factor of {cal.key}]"
        try:
            recipe = build(MethodRecipe, data, name)
        except ConfigError as exc:
            raise ConfigError(f"invalid config: key '{where}': {exc}") from None
        out[name] = recipe
    return out
