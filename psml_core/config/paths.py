"""Dotted paths into a recipe, scenario or workload: set the values a sweep or a point names."""

from __future__ import annotations

from typing import Any

from psml_core.errors import ConfigError

__all__ = ["get_path", "set_paths"]


def set_paths(data: dict[str, Any], paths: list[str], value: Any, where: str, owner: str) -> None:
    """Set every dotted path of ``paths`` to ``value`` in ``data`` (a recipe's, scenario's dict).

    Args:
        data: The plain dict (``dataclasses.asdict`` of a recipe, a scenario's entry, ...).
        paths: Dotted paths such as ``codec.params.block_size``.
        value: What each path is set to.
        where: The config key the paths came from (for the error).
        owner: What ``data`` is, in words (for the error): ``recipe 'omnireduce'``.

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


def get_path(data: dict[str, Any], path: str) -> Any:
    """The value at a dotted path of ``data``, or None where any part of it is missing."""
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node
