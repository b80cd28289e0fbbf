"""Name -> class registries, one per building block (codecs, sync policies, datasets, ...)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, Protocol, TypeVar

from psml_core.errors import ConfigError, did_you_mean

__all__ = ["BlockLike", "Registry", "RegistryClash"]

T = TypeVar("T")


class BlockLike(Protocol):
    """What :meth:`Registry.build` reads of a recipe block (``config.BlockSpec``)."""

    @property
    def name(self) -> str:
        """The registered name."""
        ...

    @property
    def params(self) -> Mapping[str, Any]:
        """The constructor's keyword arguments."""
        ...


class RegistryClash(ValueError):
    """A name registered twice; carries what holds it, so a caller can say whose it is.

    Args:
        kind: The registry's kind ("codec", ...).
        name: The name.
        existing: What is registered under it already.
    """

    def __init__(self, kind: str, name: str, existing: object) -> None:
        super().__init__(f"{kind} {name!r} is registered twice")
        self.kind, self.name, self.existing = kind, name, existing


class Registry(Generic[T]):
    """A mapping from names to implementations of one building block.

    Args:
        kind: What the registry holds, used in error messages ("codec", "dataset", ...).
        key: The recipe key whose ``name`` picks an entry ("sync" for sync policies), for
            error messages; default ``kind``.

    Example::

        CODECS: Registry[type[Codec]] = Registry("codec")

        @CODECS.register("none")
        class DenseCodec(Codec): ...

        CODECS.get("none")       # -> DenseCodec
        CODECS.get("nope")       # ConfigError: unknown codec 'nope'; known: none
        CODECS.build(BlockSpec("none"))  # -> DenseCodec()

    Registering a class sets its ``name`` attribute to the registered name, so the name is
    written once, in the decorator.
    """

    def __init__(self, kind: str, key: str | None = None) -> None:
        self.kind = kind
        self.key = key or kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Return a decorator that registers its argument under ``name`` (and names it so)."""

        def deco(obj: T) -> T:
            if name in self._items:
                raise RegistryClash(self.kind, name, self._items[name])
            if isinstance(obj, type):
                own = obj.__dict__.get("name")
                if own is not None and own != name:
                    raise ValueError(f"{obj.__name__} sets name {own!r} but registers as {name!r}")
                obj.name = name  # type: ignore[attr-defined]
            self._items[name] = obj
            return obj

        return deco

    def build(self, spec: BlockLike, **extra: Any) -> Any:
        """Instantiate ``spec.name`` with ``spec.params`` (and ``extra``) as keyword arguments.

        Raises:
            ConfigError: An unknown name (listing the known ones), or parameters the
                constructor does not take. A ValueError from the constructor (a value out of
                range) propagates for the caller to word.
        """
        cls = self.get(spec.name, where=f"{self.key}.name")
        try:
            return cls(**spec.params, **extra)  # type: ignore[operator]
        except TypeError as exc:
            raise ConfigError(
                f"{self.kind} {spec.name!r}: bad params {dict(spec.params)!r} ({exc})"
            ) from None

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
            hint = did_you_mean(name, self.names())
            raise ConfigError(
                f"unknown {self.kind} {name!r}{at}; {hint}known {self.kind}s: "
                + ", ".join(self.names())
            ) from None

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
