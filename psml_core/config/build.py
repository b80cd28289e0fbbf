"""Build typed settings (frozen dataclasses) from plain data, following their type hints."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, TypeVar

from psml_core.errors import ConfigError

__all__ = ["build", "plain"]


def plain(obj: Any) -> Any:
    """``obj`` with every tuple turned into a list, recursively (its JSON form)."""
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [plain(v) for v in obj]
    return obj


T = TypeVar("T")


def build(cls: type[T], data: Any, where: str) -> T:
    """Build dataclass ``cls`` from plain data, recursively, following its type hints."""
    return typing.cast(T, _build(cls, data, where))


def _build(tp: Any, data: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise ConfigError(f"key {where!r}: expected a mapping, got {data!r}")
        hints = typing.get_type_hints(tp)
        names = {f.name for f in dataclasses.fields(tp)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(
                f"unknown key {', '.join(map(repr, unknown))} in {where!r}; "
                f"allowed keys: {', '.join(sorted(names))}"
            )
        return tp(**{k: _build(hints[k], v, f"{where}.{k}") for k, v in data.items()})
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return None if data is None else _build(args[0], data, where)
    if origin is tuple:
        (item, *_rest) = typing.get_args(tp)
        return tuple(_build(item, v, where) for v in data)
    if origin is dict:
        _, vt = typing.get_args(tp)
        return {k: _build(vt, v, f"{where}.{k}") for k, v in data.items()}
    return data
