"""``config/README.md``, written from the config schema (the single source of truth).

Every key of ``workflow/schemas/config.schema.yaml`` and of its ``$defs`` is listed with its
type, allowed values, default and description, so the page cannot drift from the schema: a
test compares the file with :func:`config_readme`. Regenerate it with
``psml config --readme > config/README.md``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from psml_core.config.reading import MAX_BYTES, MAX_DEPTH, MAX_NODES
from psml_core.config.schema import read_schema

__all__ = ["config_readme"]

_INTRO = """\
# Configuring psml

<!-- Generated from workflow/schemas/config.schema.yaml by `psml config --readme`; a test
checks that this file matches the schema. Edit the schema's descriptions, not this file. -->

`config/config.yaml` picks a **tier** (`smoke`, `small` or `paper`); the tier's file
`config/tiers/<tier>.yaml` holds the whole experiment grid. Any key below may be overridden in
`config/config.yaml` or on the command line:

```bash
snakemake --cores 2 --config tier=small
snakemake --cores 2 --config 'seeds=[0,1,2]' backend=dist
psml config --set tier=paper            # check it; print the effective config
psml runs --tier paper                  # the runs it expands to
```

Mappings merge key by key with the tier's; a key set to `null` removes the tier's entry, for
example `experiments: {pcp: null}` drops the tier's PCP experiment (`.test/config/config.yaml`
keeps one experiment this way).

The method recipes (`config/methods.yaml`), the papers' reported numbers and how each claim is
judged (`config/papers/<id>.yaml`) and the device profiles (`config/devices/<name>.yaml`) have
schemas of their own under `workflow/schemas/`. A deployed copy of the workflow (snakedeploy,
or a Snakemake `module` run in a directory of its own) reads its working directory's
`config/` when that holds `methods.yaml`, and the workflow's own `config/` otherwise.

Every settings file is read as YAML 1.2 numbers (`lr: 1e-3` is the number 0.001), with a key
written twice refused, and bounded: at most @MIB@ MiB, nested at most @DEPTH@ levels, and at most
@NODES@ entries with its aliases (`*anchor`) expanded; a file past a bound is refused in one
line naming it. A name (of a data set, workload, scenario, recipe, experiment or device) is
part of file paths, so it is letters, digits, `_`, `-` and `.` only ([name](#name)).

Snakemake must run where `psml-core` is installed: the Snakefile checks this config and expands
it into the run grid with `psml_core` while it is parsed, so that a config the backend cannot
run stops with one line before any job starts.
"""


def _ref_name(node: Mapping[str, Any]) -> str | None:
    ref = node.get("$ref")
    return str(ref).rsplit("/", 1)[-1] if ref else None


def _type(node: Mapping[str, Any]) -> str:
    """A short type: ``integer``, ``list of string``, ``map of dataset``, ``one of ...``."""
    if ref := _ref_name(node):
        return f"[{ref}](#{ref})"
    if "enum" in node:
        return "one of " + ", ".join(f"`{v}`" for v in node["enum"])
    if "const" in node:
        return f"`{node['const']}`"
    for key in ("oneOf", "anyOf"):
        if key in node:
            return " or ".join(_type(alt) for alt in node[key])
    kind = node.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        return f"list of {_type(node.get('items', {}))}"
    if kind == "object":
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            keys = node.get("propertyNames")
            named = f" (keys: {_type(keys)})" if isinstance(keys, Mapping) else ""
            return f"map of {_type(extra)}{named}"
        return "mapping"
    return str(kind or "any")


def _bounds(node: Mapping[str, Any]) -> str:
    parts = []
    for key, sign in (
        ("minimum", ">="),
        ("exclusiveMinimum", ">"),
        ("maximum", "<="),
        ("exclusiveMaximum", "<"),
    ):
        if key in node:
            parts.append(f"{sign} {node[key]}")
    if "minItems" in node:
        parts.append(f"at least {node['minItems']} item(s)")
    return ", ".join(parts)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(props: Mapping[str, Any], required: set[str]) -> list[str]:
    rows = ["| key | type | default | description |", "|---|---|---|---|"]
    for key, node in props.items():
        name = f"`{key}`" + (" (required)" if key in required else "")
        kind = _type(node)
        if bounds := _bounds(node):
            kind += f" ({bounds})"
        default = f"`{json.dumps(node['default'])}`" if "default" in node else ""
        rows.append(
            f"| {name} | {_cell(kind)} | {_cell(default)} | {_cell(node.get('description', ''))} |"
        )
    return rows


def config_readme(schema: Mapping[str, Any] | None = None) -> str:
    """The Markdown page for ``schema`` (default: the config schema)."""
    schema = schema if schema is not None else read_schema("config")
    intro = (
        _INTRO.replace("@MIB@", str(MAX_BYTES // 2**20))
        .replace("@DEPTH@", str(MAX_DEPTH))
        .replace("@NODES@", f"{MAX_NODES:,}")
    )
    out = [intro, "## Top-level keys", ""]
    if schema.get("description"):
        out += [_cell(schema["description"]), ""]
    out += _table(schema["properties"], set(schema.get("required", [])))
    for name, node in schema.get("$defs", {}).items():
        out += ["", f"## {name}", ""]
        if node.get("description"):
            out += [_cell(node["description"]), ""]
        props = node.get("properties")
        if props:
            out += _table(props, set(node.get("required", [])))
        else:
            kind = _type(node)
            if bounds := _bounds(node):
                kind += f" ({bounds})"
            if "pattern" in node:
                kind += f", matching `{node['pattern']}`"
            out.append(f"Type: {_cell(kind)}.")
    return "\n".join(out) + "\n"
