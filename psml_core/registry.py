"""Name -> class registries, one per building block (codecs, sync policies, datasets, ...)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from psml_core.errors import ConfigError

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """A mapping from names to implementations of one building block.

    Args:
        kind: What the registry holds, used in error messages ("codec", "dataset", ...).

    Example::

        CODECS: Registry[type[Codec]] = Registry("codec")

        @CODECS.register("none")
        class DenseCodec(Codec): ...

        CODECS.get("none")       # -> DenseCodec
        CODECS.get("nope")       # ConfigError: unknown codec 'nope'; known: none
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Return a decorator that registers its argument under ``name``."""

        def deco(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._items[name] = obj
            return obj

        return deco

    def get(self, name: str, *, where: str | None = None) -> T:
        """Look ``name`` up; an unknown name raises a ConfigError listing the known ones.

        Args:
            name: The registered name.
            where: The config key that held the name, for the error message.
        """
        try:
            return self._items[name]
        except KeyError:
            at = f" (config key {where!r})" if where else ""
            raise ConfigError(
                f"unknown {self.kind} {name!r}{at}; known {self.kind}s: {', '.join(self.names())}"
            ) from None

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
