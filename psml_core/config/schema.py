"""The settings' schemas: read YAML, validate against ``workflow/schemas/``, one-line errors."""

from __future__ import annotations

import copy
import math
import typing
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from psml_core.errors import ConfigError, did_you_mean

_PKG = Path(__file__).resolve().parents[1]  # psml_core/
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


def deployment_config_dir(fallback: Path | None = None) -> Path:
    """The config directory a workflow run or a ``psml`` command in the current directory reads.

    The working directory's ``config/`` when it holds ``methods.yaml`` (a checkout, or a
    deployment that copied the workflow's ``config/``, as snakedeploy does); else ``fallback``
    (the workflow's own ``config/``), or :func:`config_root`. The Snakefile and the CLI share
    this rule, so ``psml runs`` in a deployment sees the tier the workflow runs.
    """
    here = Path("config")
    if (here / "methods.yaml").is_file():
        return here.resolve()
    return fallback if fallback is not None else config_root()


@cache
def read_schema(name: str) -> dict[str, Any]:
    """The parsed ``workflow/schemas/<name>.schema.yaml`` (read once per process)."""
    with open(schema_dir() / f"{name}.schema.yaml", encoding="utf-8") as fh:
        return yaml.safe_load(fh)


# LibYAML's parser where PyYAML has it: 3-4x faster on the config (`psml runs` parses every
# tier file and the operating-point record); the constructor, and so the checks, stay Python's.
_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class UniqueKeyLoader(_SAFE_LOADER):  # type: ignore[valid-type,misc]
    """YAML's safe loader, refusing a key written twice in one mapping.

    Plain YAML keeps the last of two equal keys, so ``workers: 8`` after ``workers: 4`` would
    silently win; a settings file with both is a slip, and which one was meant is not ours to
    guess.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """The mapping, or a ConstructorError at the second occurrence of a key."""
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark)
            except TypeError:  # an unhashable key: the base class words that error
                break
            if first is not key_node.start_mark:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} is written twice (first at line {first.line + 1}); keep one",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str) -> Any:
    """Parse YAML text with :class:`UniqueKeyLoader` (raises ``yaml.YAMLError``)."""
    return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass


def load_yaml(path: str | Path, what: str = "config file", *, empty_ok: bool = True) -> Any:
    """Read a YAML file, strictly.

    A missing, non-UTF-8, malformed or (unless ``empty_ok``) empty file, or a key written twice
    in one mapping, is a ConfigError naming the file.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{what} {str(p)!r} does not exist")
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        line = p.read_bytes()[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{what} {str(p)!r} is not UTF-8 text (byte {exc.object[exc.start]:#04x} on line "
            f"{line}); save it as UTF-8"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{what} {str(p)!r} cannot be read ({exc.strerror})") from None
    try:
        data = parse_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what} {str(p)!r} is not valid YAML{yaml_where(exc)}") from None
    if data is None and not empty_ok:
        raise ConfigError(
            f"{what} {str(p)!r} is empty (no settings); write at least `tier: smoke` "
            "(config/README.md lists every key)"
        )
    return data


def yaml_where(exc: yaml.YAMLError) -> str:
    """Where and what a YAML error is, on one line: `` at line L, column C: <problem>``."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{where}: {' '.join(str(problem).split())}"


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
        return f"key {key!r}: {inst!r} is not allowed; {did_you_mean(inst, val)}" + (
            "allowed values: " + ", ".join(str(x) for x in val)
        )
    if v == "const":
        return f"key {key!r}: must be {val!r}, got {inst!r}"
    if v == "additionalProperties" and isinstance(inst, dict):
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(k for k in inst if k not in err.schema.get("properties", {}))
        hint = did_you_mean(extra[0], allowed) if len(extra) == 1 else ""
        return (
            f"unknown key {', '.join(repr(e) for e in extra)} in {key!r}; "
            f"{hint}allowed keys: {', '.join(allowed)}"
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


StrictValidator = jsonschema.validators.extend(
    _Validator,
    type_checker=_Validator.TYPE_CHECKER.redefine_many(
        {"integer": _strict_integer, "number": _finite_number}
    ),
)
_STRICT = ("config", "methods")
"""Schemas of files people write: integers written as integers, numbers finite."""


def first_error(validator: Any, instance: Any) -> jsonschema.ValidationError | None:
    """The violation to report: jsonschema's best match, but a key's own error first.

    jsonschema prefers the shallowest error, so ``hashing: {buckets: 0, ratio: 0.1}`` would
    report only "give exactly one of buckets, ratio". Where a key under that object is itself
    invalid, naming that key and its value is the more useful line.
    """
    errors = list(validator.iter_errors(instance))
    err = jsonschema.exceptions.best_match(errors)
    if err is not None and err.validator in ("oneOf", "anyOf"):
        depth = len(err.path)
        inner = [
            e for e in errors if len(e.path) > depth and list(e.path)[:depth] == list(err.path)
        ]
        err = jsonschema.exceptions.best_match(inner) or err
    return err


def validate(instance: Any, schema_name: str, *, source: str) -> Any:
    """Validate ``instance`` against ``workflow/schemas/<schema_name>.schema.yaml``.

    Returns a deep copy with schema defaults filled in. The first violation (by jsonschema's
    relevance order) becomes a ConfigError naming ``source``, the key and the allowed values.
    """
    inst = copy.deepcopy(instance)
    cls = StrictValidator if schema_name in _STRICT else _Validator
    err = first_error(cls(read_schema(schema_name)), inst)
    if err is not None:
        raise ConfigError(f"invalid {source}: {format_error(err)}")
    return inst
