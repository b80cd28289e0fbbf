"""Placement files (``psml partition``'s predicted traffic), read for the claims and the report.

Each file is the JSON ``psml partition --traffic`` writes: the placement's predicted traffic
and, where the data have planted groups and every worker its own colocated shard, the
``oracle`` bound (:mod:`psml_core.placement.oracle`): the remote bytes per step of a random
placement and of the oracle placement of the same data. The claims read that bound for a
qualitative claim's minimum effect (:mod:`.min_effect`), the report for its placement table;
both read it here, as JSON, without importing the engine.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from psml_core.errors import DataError

__all__ = ["oracle_bounds", "partition_entry", "partition_files", "read_json_object"]


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """The JSON object in ``path`` (a ``what`` file), or a DataError naming it."""
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{what} file {str(path)!r} is not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise DataError(f"{what} file {str(path)!r} must hold a JSON object")
    return obj


def partition_entry(entry: Path | str) -> tuple[str | None, Path]:
    """A ``--partition`` entry as ``(name, file)``.

    ``<workload>/<method>=<file>`` gives ("<workload> · <method>", file); a plain path, or a
    file whose own name holds "=", gives (None, path).
    """
    name, sep, file = str(entry).partition("=")
    if not sep or Path(entry).is_file():
        return None, Path(entry)
    return " · ".join(Path(name).parts), Path(file)


def partition_files(paths: Iterable[Path]) -> dict[str, dict[str, Any]]:
    """Read placement files, named "<workload> · <method>" from their keys.

    An entry ``<workload>/<method>=<file>`` names its file (the workflow's listing: one
    placement is shared by every method that places alike, and its file's ``method`` is the
    placement key). A plain file is named by its ``workload`` and ``method`` keys; one without
    a ``workload`` key by its path below the files' common folder (``<workload>/<method>.json``
    gives "<workload> · <method>").
    """
    out: dict[str, dict[str, Any]] = {}
    files = []
    for entry in paths:
        name, file = partition_entry(entry)
        if name is None:
            files.append(file)
            continue
        if name in out:
            raise DataError(f"two partition files describe {name!r}; the second is {str(file)!r}")
        out[name] = read_json_object(file, "partition")
    files.sort()
    root = Path(os.path.commonpath([p.parent for p in files])) if files else Path()
    for p in files:
        obj = read_json_object(p, "partition")
        if isinstance(obj.get("workload"), str):
            parts = [obj["workload"]] + (
                [obj["method"]] if isinstance(obj.get("method"), str) else []
            )
        else:
            parts = list(p.relative_to(root).with_suffix("").parts)
        name = " · ".join(parts)
        if name in out:
            raise DataError(f"two partition files describe {name!r}; the second is {str(p)!r}")
        out[name] = obj
    return out


def oracle_bounds(
    partitions: Mapping[str, Mapping[str, Any]],
) -> dict[tuple[str, str], dict[str, Any]]:
    """``(workload, method) -> oracle bound`` of every placement file that holds one.

    Args:
        partitions: :func:`partition_files` (names "<workload> · <method>").

    Returns:
        The ``oracle`` block of each file with a ``bound`` (its ``random_remote_bytes``,
        ``oracle_remote_bytes`` and ``bound``, the largest cut of remote traffic the data
        allow); files without one (no planted groups, shards not one per worker) are left out.
    """
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for name, part in partitions.items():
        keys = name.split(" · ")
        bound = part.get("oracle") if isinstance(part, Mapping) else None
        if len(keys) == 2 and isinstance(bound, Mapping) and "bound" in bound:
            out[(keys[0], keys[1])] = dict(bound)
    return out
