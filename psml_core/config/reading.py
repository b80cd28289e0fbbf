"""Bounded reading of the files people write: YAML and JSON, refused past fixed sizes.

Every user file (config, tiers, methods, papers, operating points, devices, run and job specs,
validation tables) goes through :func:`load_yaml`, :func:`parse_yaml`, :func:`load_json` or
:func:`parse_json`. A hostile file cannot make psml hang or crash:

- the file is at most :data:`MAX_BYTES` long;
- YAML nesting is at most :data:`MAX_DEPTH` levels deep while composing (before Python's
  recursion limit could be reached), and the document with its aliases expanded at most
  :data:`MAX_NODES` nodes and :data:`MAX_DEPTH` levels (a "billion laughs" of nested anchors is
  refused without expanding it), and an alias may not refer to its own anchor;
- JSON nesting is at most :data:`MAX_DEPTH` levels.

Floats follow YAML 1.2 (``1e-3`` is a number, not the string PyYAML's YAML 1.1 makes of it),
and a key written twice in one mapping is refused.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from psml_core.errors import ConfigError

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "UniqueKeyLoader",
    "load_json",
    "load_yaml",
    "parse_json",
    "parse_yaml",
    "read_text",
    "yaml12_numbers",
    "yaml_where",
]

MAX_BYTES = 2 * 1024 * 1024
"""Largest file read (the largest shipped one, an operating-point record, is about 0.3 MB)."""

MAX_DEPTH = 64
"""Deepest nesting of mappings and lists (the shipped files nest at most about 10 levels)."""

MAX_NODES = 50_000
"""Most YAML nodes, aliases expanded (the largest shipped file has about 22,000).

Python's YAML composer takes about 20 to 50 microseconds a node, so this bounds a file's
reading to a few seconds."""

_FLOAT_12 = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
"""YAML 1.2's core-schema float: ``1e-3`` and ``2E5`` too (YAML 1.1 needs a dot)."""


class _Checked:
    """What both loaders check while constructing: the expanded size, and keys written twice.

    Plain YAML keeps the last of two equal keys, so ``workers: 8`` after ``workers: 4`` would
    silently win; a settings file with both is a slip, and which one was meant is not ours to
    guess.
    """

    def construct_document(self, node: yaml.Node) -> Any:
        """The document, once its expanded size and depth are known to be bounded."""
        _check_expanded(node)
        return super().construct_document(node)  # type: ignore[misc]

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """The mapping, or a ConstructorError at the second occurrence of a key."""
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)  # type: ignore[attr-defined]
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
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]


class UniqueKeyLoader(_Checked, yaml.SafeLoader):
    """YAML's safe loader, bounded, with YAML 1.2 floats, refusing a key written twice.

    Pure Python: the composer counts depth and nodes as it goes. :func:`parse_yaml` uses
    :class:`_LibYamlLoader` instead where PyYAML has libyaml (7x faster on the operating-point
    records), after the same bounds are checked on libyaml's event stream.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        """The node, or a ComposerError past :data:`MAX_DEPTH` or :data:`MAX_NODES`.

        Counted while composing: the composer recurses, and a huge file is refused before it
        is all read.
        """
        self._depth += 1
        self._nodes += 1
        try:
            if self._depth > MAX_DEPTH or self._nodes > MAX_NODES:
                raise _too_big(self._depth, self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _too_big(depth: int, mark: yaml.Mark | None) -> yaml.composer.ComposerError:
    what = (
        f"nested deeper than {MAX_DEPTH} levels"
        if depth > MAX_DEPTH
        else f"more than {MAX_NODES:,} entries"
    )
    return yaml.composer.ComposerError(None, None, what, mark)


UniqueKeyLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))

_LibYamlLoader: type | None = None
if hasattr(yaml, "CSafeLoader"):

    class _LibYamlLoader(_Checked, yaml.CSafeLoader):  # type: ignore[no-redef]
        """:class:`UniqueKeyLoader`'s checks over libyaml's parser and composer."""

    _LibYamlLoader.add_implicit_resolver(
        "tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789.")
    )


def _check_events(text: str) -> None:
    """Refuse, from libyaml's event stream, what :class:`UniqueKeyLoader` refuses composing.

    libyaml's composer recurses in C; the events come from its state machine, which does not,
    so the depth and the written node count are bounded before anything is composed.
    """
    depth = nodes = 0
    opens = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
    closes = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
    try:
        events = list(yaml.parse(text, Loader=yaml.CSafeLoader))
    except yaml.MarkedYAMLError as exc:  # libyaml's own nesting bound (1,000) comes first
        if "maximum nesting depth" not in str(exc.problem):
            raise
        raise _too_big(MAX_DEPTH + 1, exc.problem_mark) from None
    for event in events:
        if isinstance(event, closes):
            depth -= 1
            continue
        if not isinstance(event, (*opens, yaml.ScalarEvent, yaml.AliasEvent)):
            continue
        nodes += 1
        if depth + 1 > MAX_DEPTH or nodes > MAX_NODES:
            raise _too_big(depth + 1, event.start_mark)
        depth += isinstance(event, opens)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expanded(root: yaml.Node) -> None:
    """Refuse a document whose aliases, expanded, exceed :data:`MAX_NODES` or :data:`MAX_DEPTH`.

    Each node's expanded size and depth are computed once (an alias is the node it names), so
    the check takes time in the written size, not the expanded one. Iterative: an alias chain
    can be deeper than what the composer nested.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            open_.discard(key)
            if size[key] > MAX_NODES or depth[key] > MAX_DEPTH:
                what = "nodes" if size[key] > MAX_NODES else "levels deep"
                limit = MAX_NODES if what == "nodes" else MAX_DEPTH
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"its aliases expand to more than {limit:,} {what}; write the entries out",
                    node.start_mark,
                )
            continue
        if key in size:
            continue
        if key in open_:
            raise yaml.constructor.ConstructorError(
                None, None, "an alias refers to its own anchor (a loop)", node.start_mark
            )
        open_.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in size)


def parse_yaml(text: str) -> Any:
    """Parse YAML text, bounded, with the checks of :class:`UniqueKeyLoader` (YAMLError)."""
    if _LibYamlLoader is None:
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    _check_events(text)
    return yaml.load(text, Loader=_LibYamlLoader)  # noqa: S506 - a CSafeLoader subclass


def yaml_where(exc: yaml.YAMLError) -> str:
    """Where and what a YAML error is, on one line: `` at line L, column C: <problem>``."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{where}: {' '.join(str(problem).split())}"


def read_text(path: str | Path, what: str) -> str:
    """A file's UTF-8 text, at most :data:`MAX_BYTES`; else a ConfigError naming the file.

    Raises:
        ConfigError: missing, a directory, too large, unreadable or not UTF-8.
    """
    p = Path(path)
    if not p.is_file():
        why = "is a directory, not a file" if p.is_dir() else "does not exist"
        raise ConfigError(f"{what} {str(p)!r} {why}")
    try:
        with open(p, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{what} {str(p)!r} cannot be read ({exc.strerror})") from None
    if len(raw) > MAX_BYTES:
        raise ConfigError(
            f"{what} {str(p)!r} is larger than {MAX_BYTES // 2**20} MiB; settings files are "
            "far smaller, so this is not one"
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{what} {str(p)!r} is not UTF-8 text (byte {exc.object[exc.start]:#04x} on line "
            f"{line}); save it as UTF-8"
        ) from None


def load_yaml(path: str | Path, what: str = "config file", *, empty_ok: bool = True) -> Any:
    """Read a YAML file, strictly and bounded.

    A missing, oversized, non-UTF-8, malformed, too deeply nested or alias-bombed or (unless
    ``empty_ok``) empty file, or a key written twice in one mapping, is a ConfigError naming
    the file.
    """
    text = read_text(path, what)
    try:
        data = parse_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what} {str(path)!r} is not valid YAML{yaml_where(exc)}") from None
    if data is None and not empty_ok:
        raise ConfigError(
            f"{what} {str(path)!r} is empty (no settings); write at least `tier: smoke` "
            "(config/README.md lists every key)"
        )
    return data


def _json_depth_ok(obj: Any) -> bool:
    stack = [(obj, 1)]
    while stack:
        node, d = stack.pop()
        if d > MAX_DEPTH:
            return False
        if isinstance(node, dict):
            stack.extend((v, d + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, d + 1) for v in node)
    return True


def parse_json(text: str, what: str) -> Any:
    """Parse JSON text, bounded in size and nesting; a ConfigError naming ``what`` otherwise."""
    if len(text) > MAX_BYTES:
        raise ConfigError(f"{what} is larger than {MAX_BYTES // 2**20} MiB; not a settings file")
    try:
        data = json.loads(text)
    except RecursionError:
        data = None
    except ValueError as exc:
        raise ConfigError(f"{what} is not valid JSON: {exc}") from None
    if data is None and text.strip() != "null" or not _json_depth_ok(data):
        raise ConfigError(f"{what} is nested deeper than {MAX_DEPTH} levels; not a settings file")
    return data


def load_json(path: str | Path, what: str) -> Any:
    """Read a JSON file, bounded (:func:`read_text`, :func:`parse_json`)."""
    return parse_json(read_text(path, what), f"{what} {str(path)!r}")


def yaml12_numbers(theirs: Any, ours: Any) -> Any:
    """``theirs``, with the numbers a YAML 1.1 reader left as strings (``lr: 1e-3``) restored.

    Where ``theirs`` holds a string and ``ours`` (the same file read by :func:`parse_yaml`) the
    float it spells, the float: the same file then means the same config to both readers. Snakemake
    reads its config files with PyYAML (YAML 1.1) before the workflow runs; the workflow lays
    its own reading over Snakemake's config with this.
    """
    if isinstance(theirs, dict) and isinstance(ours, dict):
        return {k: yaml12_numbers(v, ours[k]) if k in ours else v for k, v in theirs.items()}
    if isinstance(theirs, list) and isinstance(ours, list) and len(theirs) == len(ours):
        return [yaml12_numbers(a, b) for a, b in zip(theirs, ours, strict=True)]
    if isinstance(theirs, str) and isinstance(ours, float) and _same_float(theirs, ours):
        return ours
    return theirs


def _same_float(text: str, value: float) -> bool:
    """Whether ``text`` is ``value`` written out (not a string another source put there)."""
    try:
        return float(text.replace("_", "")) == value
    except ValueError:
        return False
