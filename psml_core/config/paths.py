"""Paths: dotted paths into a recipe, scenario or workload; file paths kept under their root.

:func:`set_paths` and :func:`get_path` set and read the values a sweep or a point names.
:func:`inside` checks that a file path built from names in the config (a run's directory, a
spec file) stays under the folder it is meant for, whatever the names hold.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from psml_core.errors import ConfigError

__all__ = ["get_path", "inside", "set_paths"]


NAMES_FIX = "a name in the config holds '/' or '..'; names are letters, digits, _, - and ."
"""What to do about a path built from names that leaves its root."""


def inside(
    paths: Iterable[str | Path],
    root: str | Path = ".",
    *,
    what: str = "path",
    fix: str = NAMES_FIX,
) -> None:
    """Refuse any path that, joined to ``root``, leaves it (``..``, an absolute path).

    The check is on the words of the path, not on the disk: a symbolic link under ``root``
    (results/ pointing at another disk) is the user's choice and stays allowed.

    Args:
        paths: Paths built from config names, relative to ``root``.
        root: The folder they must stay under (default the working directory).
        what: What the paths are, for the error (``"run directory"``).
        fix: What to do, for the error (default: about names in the config).

    Raises:
        ConfigError: naming the first path that leaves ``root``.
    """
    base = os.path.normpath(os.path.abspath(root))
    for path in paths:
        full = os.path.normpath(os.path.join(base, os.fspath(path)))
        if full != base and not full.startswith(base + os.sep):
            raise ConfigError(f"{what} {os.fspath(path)!r} leaves {base}; {fix}")


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
