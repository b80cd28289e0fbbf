"""Config keys renamed, read under their old names with a one-line deprecation (issue 47).

"device" meant three settings: the torch device (now ``torch_device``), the cost profile the
simulated clock charges (``compute.cost_profile``) and a workload's override of that profile
(``workloads.<w>.cost_profile``). The loader renames the old keys here, before the schema sees
them, so the schema knows the new names only. A run's config hash is still computed under the
old names (:func:`hashed_names`), so its results and checkpoints keep their paths.
"""

from __future__ import annotations

import sys
from typing import Any

from psml_core.errors import ConfigError

__all__ = ["hashed_names", "renamed_config_keys", "renamed_run_keys"]

# (where the key sits, its old name, its new name); "*" is every entry of a mapping.
_CONFIG = (
    ((), "device", "torch_device"),
    (("compute",), "device", "cost_profile"),
    (("workloads", "*"), "device", "cost_profile"),
)
_RUN = (
    ((), "device", "torch_device"),
    (("compute",), "device", "cost_profile"),
    (("workload",), "device", "cost_profile"),
)


def _parents(data: dict[str, Any], where: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
    """The mappings at ``where`` in ``data``, each with its dotted path."""
    found: list[tuple[str, dict[str, Any]]] = [("", data)]
    for part in where:
        nxt: list[tuple[str, dict[str, Any]]] = []
        for path, node in found:
            items = node.items() if part == "*" else [(part, node.get(part))]
            nxt += [(f"{path}{k}.", v) for k, v in items if isinstance(v, dict)]
        found = nxt
    return found


def _say(line: str, key: str, said: set[str] | None) -> None:
    """Print a deprecation line, unless ``said`` holds ``key`` (told already, naming its file)."""
    if said is not None:
        if key in said:
            return
        said.add(key)
    print(line, file=sys.stderr)


def _rename(
    data: dict[str, Any], table: tuple, source: str, said: set[str] | None = None
) -> dict[str, Any]:
    for where, old, new in table:
        for path, node in _parents(data, where):
            if old not in node:
                continue
            if new in node:
                raise ConfigError(
                    f"{source}: both '{path}{old}' (its old name) and '{path}{new}' are set; "
                    f"keep '{path}{new}' only"
                )
            line = f"psml: {source}: '{path}{old}' is deprecated, renamed '{path}{new}'"
            _say(line, f"{path}{old}", said)
            node[new] = node.pop(old)
    return data


def _rename_swept(cfg: dict[str, Any], source: str, said: set[str] | None) -> None:
    """An experiment's workload_sweep that sets a workload's old ``device``: its new name."""
    for path, sweep in _parents(cfg, ("experiments", "*", "workload_sweep")):
        params = sweep.get("params")
        if isinstance(params, list) and "device" in params:
            line = (
                f"psml: {source}: '{path}params' names 'device', deprecated, renamed 'cost_profile'"
            )
            _say(line, f"{path}params", said)
            sweep["params"] = ["cost_profile" if x == "device" else x for x in params]


def renamed_config_keys(
    cfg: dict[str, Any], source: str, said: set[str] | None = None
) -> dict[str, Any]:
    """``cfg`` (a config or tier mapping, changed in place) with the old keys renamed.

    The keys themselves, and an experiment's ``workload_sweep.params`` that sets a workload's
    ``device``.

    Args:
        cfg: The mapping as read from ``source``.
        source: The file (or files) it came from, named in the deprecation and the error.
        said: The keys whose deprecation was printed already (naming the file that set them,
            before the files and overrides were merged); updated. None: print every one.

    Raises:
        ConfigError: An old key and its new name are both set.
    """
    _rename_swept(cfg, source, said)
    return _rename(cfg, _CONFIG, source, said)


def renamed_run_keys(run: dict[str, Any], source: str) -> dict[str, Any]:
    """A run spec's mapping (changed in place) with the old keys renamed, as for a config."""
    return _rename(run, _RUN, source)


def hashed_names(run: dict[str, Any]) -> dict[str, Any]:
    """A copy of a run spec's plain dict under the old names, which its config hash is taken of."""
    out = {**run, "compute": dict(run["compute"]), "workload": dict(run["workload"])}
    for where, old, new in _RUN:
        node = out[where[0]] if where else out
        if new in node:
            node[old] = node.pop(new)
    return out
