"""Methods from outside the tree: building blocks, recipes and paper files from other packages.

A package extends psml through Python entry points, so that a new method can be compared with
the five papers' without a fork. Installed with pip, its blocks join psml's registries and its
recipes join ``config/methods.yaml`` the first time psml loads settings
(:func:`load_plugins`: every public loader of :mod:`psml_core.recipes` calls it).

==========================  =======================================================  ========
group                       an entry point names                                     registry
==========================  =======================================================  ========
``psml.codecs``             a :class:`~psml_core.codecs.Codec` subclass               CODECS
``psml.sync``               a :class:`~psml_core.sync.SyncPolicy` subclass            SYNC_POLICIES
``psml.controllers``        a :class:`~psml_core.control.Controller` subclass         CONTROLLERS
``psml.placements``         a :class:`~psml_core.placement.Placement` subclass        PLACEMENTS
``psml.recipes``            a package (or module) whose folder holds ``methods.yaml``
                            and, optionally, ``papers/<id>.yaml`` with claims
==========================  =======================================================  ========

A block registers under its entry point's name (``first_k = "pkg.codec:FirstKCodec"``); a
class that its own module registered already under that name is accepted as is. A name psml
or another plugin already uses, a class of the wrong kind, a plugin that fails to import or a
recipe name defined twice is one :class:`~psml_core.errors.ConfigError` naming the package,
its version and the fix; a clash names both packages and their versions (entry-point
distribution names and versions from :mod:`importlib.metadata`; psml's own as "psml
itself"). ``psml config`` lists what each plugin added, and the report marks each recipe that
uses one ("plugin: <package> <version>").
"""

from __future__ import annotations

import importlib.metadata as md
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from psml_core.backend_info import BACKEND_INFOS, BackendInfo
from psml_core.codecs import CODECS, Codec
from psml_core.config import MethodRecipe, load_yaml
from psml_core.control import CONTROLLERS, Controller
from psml_core.errors import ConfigError
from psml_core.placement import PLACEMENTS, Placement
from psml_core.registry import Registry, RegistryClash
from psml_core.sync import SYNC_POLICIES, SyncPolicy

__all__ = [
    "BACKENDS_GROUP",
    "BLOCK_GROUPS",
    "RECIPES_GROUP",
    "Plugin",
    "COSTS_ENV",
    "block_origin",
    "calibrate_command",
    "cost_file",
    "describe_plugins",
    "load_plugins",
    "methods_files",
    "methods_owner",
    "paper_files",
    "recipe_labels",
    "recipe_plugins",
]

BLOCK_GROUPS: dict[str, tuple[str, Registry[Any], type]] = {  # provenance.PLUGIN_GROUPS too
    "psml.codecs": ("codec", CODECS, Codec),
    "psml.sync": ("sync", SYNC_POLICIES, SyncPolicy),
    "psml.controllers": ("controller", CONTROLLERS, Controller),
    "psml.placements": ("placement", PLACEMENTS, Placement),
}
"""Entry-point group -> (recipe key, registry, the ABC its classes subclass)."""

RECIPES_GROUP = "psml.recipes"
"""The group whose entry points name a package holding ``methods.yaml`` (and ``papers/``)."""

BACKENDS_GROUP = "psml.backends"
"""The group whose entry points name a :class:`~psml_core.backend_info.BackendInfo` (a backend;
its class loads only when a job runs on it)."""


@dataclass
class Plugin:
    """One installed distribution that extends psml, and what it added.

    Attributes:
        package: The distribution's name (``pip install <package>``).
        version: Its installed version.
        blocks: Recipe key (codec, sync, controller, placement) -> the names it registered.
        methods: Its ``methods.yaml`` files.
        recipes: The recipe names those files define.
        papers: Its paper files.
    """

    package: str
    version: str
    blocks: dict[str, list[str]] = field(default_factory=dict)
    methods: list[Path] = field(default_factory=list)
    recipes: list[str] = field(default_factory=list)
    papers: list[Path] = field(default_factory=list)

    @property
    def label(self) -> str:
        """``"<package> <version>"``, as the report prints it."""
        return f"{self.package} {self.version}"


COSTS_ENV = "PSML_PLUGIN_COSTS"
"""Names the folder of plugin codecs' cost files, if not ``config/devices/plugins``."""

_LOADED: dict[str, Plugin] | None = None


def cost_file(codec: str) -> Path:
    """Where the cost table of plugin codec ``codec`` lives (``psml bench calibrate --plugin``).

    ``config/devices/plugins/<codec>.yaml`` relative to the working directory (the workflow's),
    or under the folder ``$PSML_PLUGIN_COSTS`` names.
    """
    return Path(os.environ.get(COSTS_ENV) or Path("config", "devices", "plugins")) / f"{codec}.yaml"


def calibrate_command(codecs: Iterable[str]) -> str:
    """The command that measures plugin codecs' cost tables on this machine."""
    return f"psml bench calibrate --plugin {','.join(sorted(set(codecs)))}"


def _entry_points(group: str) -> list[md.EntryPoint]:
    """A group's entry points, one per (distribution, name), in a stable order."""
    seen: dict[tuple[str, str], md.EntryPoint] = {}
    for ep in md.entry_points(group=group):
        dist = ep.dist.name if ep.dist is not None else "?"
        seen.setdefault((dist, ep.name), ep)
    return [seen[k] for k in sorted(seen)]


def _plugin(found: dict[str, Plugin], ep: md.EntryPoint) -> Plugin:
    dist = ep.dist
    name = dist.name if dist is not None else ep.module
    if name not in found:
        found[name] = Plugin(name, dist.version if dist is not None else "unknown")
    return found[name]


_PSML_DIST = "psml-core"


def _psml_label() -> str:
    """``"psml-core <version>"``: psml's own distribution, as the installed metadata says."""
    try:
        return f"{_PSML_DIST} {md.version(_PSML_DIST)}"
    except md.PackageNotFoundError:  # run from a source tree without installing
        return f"{_PSML_DIST} (not installed)"


def _dist_of(obj: object) -> str | None:
    """``"<package> <version>"`` of the installed distribution that ships ``obj``'s module."""
    top = str(getattr(obj, "__module__", "") or "").split(".")[0]
    for dist in md.packages_distributions().get(top, []):
        try:
            return f"{dist} {md.version(dist)}"
        except md.PackageNotFoundError:
            continue
    return None


def _owner(found: Mapping[str, Plugin], key: str, name: str, existing: object) -> str:
    """Who registered block ``name`` first, with the version.

    A plugin loaded before, else the distribution that ships the class's module, else psml.
    """
    for p in found.values():
        if name in p.blocks.get(key, []):
            return f"plugin {p.label}"
    module = str(getattr(existing, "__module__", "") or "")
    if module == "psml_core" or module.startswith("psml_core."):
        return f"psml itself ({_psml_label()})"
    label = _dist_of(existing)
    return f"plugin {label}" if label else f"module {module or '?'}"


def _clash(where: str, plugin: Plugin, kind: str, name: str, owner: str) -> ConfigError:
    """The one line of two packages registering the same block name: both, with versions."""
    return ConfigError(
        f"{where}: {kind} {name!r} is registered by {owner} already; two packages cannot "
        f"register one name: rename the entry point in {plugin.package}, or uninstall one of "
        f"them (pip uninstall {plugin.package})"
    )


def _load(
    ep: md.EntryPoint, plugin: Plugin, group: str, found: Mapping[str, Plugin] | None = None
) -> Any:
    """The entry point's object; an import failure is one line naming the plugin."""
    try:
        return ep.load()
    except RegistryClash as exc:  # its module registered a name another package holds
        key = BLOCK_GROUPS.get(group, (exc.kind,))[0]
        owner = _owner(found or {}, key, exc.name, exc.existing)
        where = f"plugin {plugin.label}: entry point {ep.name!r} of group {group!r}"
        raise _clash(where, plugin, exc.kind, exc.name, owner) from None
    except Exception as exc:  # any failure of foreign code at import is the plugin's
        raise ConfigError(
            f"plugin {plugin.label}: entry point {ep.name!r} ({ep.value}) of group {group!r} "
            f"cannot be loaded ({type(exc).__name__}: {exc}); fix the package or uninstall it "
            f"(pip uninstall {plugin.package})"
        ) from None


def _register_block(
    ep: md.EntryPoint, plugin: Plugin, group: str, found: Mapping[str, Plugin]
) -> None:
    key, registry, base = BLOCK_GROUPS[group]
    obj = _load(ep, plugin, group, found)
    where = f"plugin {plugin.label}: entry point {ep.name!r} of group {group!r}"
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise ConfigError(
            f"{where} is {obj!r}, not a subclass of {base.__name__}; point it at the class"
        )
    if ep.name in registry:
        held = registry.get(ep.name)
        others = [p for p in found.values() if p is not plugin]
        if held is not obj or any(ep.name in p.blocks.get(key, []) for p in others):
            # During loading ``block_origin`` sees no plugin yet: ask the ones loaded so far.
            owner = _owner({p.package: p for p in others}, key, ep.name, held)
            raise _clash(where, plugin, registry.kind, ep.name, owner)
    else:
        registry.register(ep.name)(obj)
    plugin.blocks.setdefault(key, []).append(ep.name)


def _add_resources(ep: md.EntryPoint, plugin: Plugin) -> None:
    module = _load(ep, plugin, RECIPES_GROUP)
    where = f"plugin {plugin.label}: entry point {ep.name!r} of group {RECIPES_GROUP!r}"
    try:
        root = Path(str(files(module)))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where} must name a package or module ({exc})") from None
    if root.is_file():  # a plain module: its folder
        root = root.parent
    methods = root / "methods.yaml"
    if not methods.is_file():
        raise ConfigError(
            f"{where}: {methods} does not exist; a recipes entry point names the package "
            "whose folder holds methods.yaml (and, optionally, papers/<id>.yaml)"
        )
    defined = load_yaml(methods, "methods file")
    plugin.methods.append(methods)
    plugin.recipes += sorted(defined) if isinstance(defined, dict) else []
    plugin.papers += sorted((root / "papers").glob("*.yaml"))


def _register_backend(ep: md.EntryPoint, plugin: Plugin, found: Mapping[str, Plugin]) -> None:
    """Register a plugin's backend descriptor under its entry point's name."""
    info = _load(ep, plugin, BACKENDS_GROUP, found)
    where = f"plugin {plugin.label}: entry point {ep.name!r} of group {BACKENDS_GROUP!r}"
    if not isinstance(info, BackendInfo):
        raise ConfigError(
            f"{where} is {info!r}, not a BackendInfo; point it at the backend's descriptor"
        )
    if ep.name in BACKEND_INFOS:
        owner = _owner(found, "backend", ep.name, BACKEND_INFOS.get(ep.name))
        raise _clash(where, plugin, "backend", ep.name, owner)
    if info.name != ep.name:
        raise ConfigError(f"{where} names backend {info.name!r}; name the entry point so too")
    BACKEND_INFOS.register(ep.name)(info)
    plugin.blocks.setdefault("backend", []).append(ep.name)


def load_plugins() -> list[Plugin]:
    """Load every installed plugin once per process; the plugins, by package name.

    Raises:
        ConfigError: one line naming the plugin and the fix (see the module docstring).
    """
    global _LOADED
    if _LOADED is None:
        found: dict[str, Plugin] = {}
        try:
            for group in BLOCK_GROUPS:
                for ep in _entry_points(group):
                    _register_block(ep, _plugin(found, ep), group, found)
            for ep in _entry_points(RECIPES_GROUP):
                _add_resources(ep, _plugin(found, ep))
            for ep in _entry_points(BACKENDS_GROUP):
                _register_backend(ep, _plugin(found, ep), found)
        except ConfigError:
            _LOADED = None
            raise
        _LOADED = found
    return [_LOADED[k] for k in sorted(_LOADED)]


def methods_files() -> list[Path]:
    """The plugins' ``methods.yaml`` files."""
    return [m for p in load_plugins() for m in p.methods]


def paper_files() -> list[Path]:
    """The plugins' paper files."""
    return [f for p in load_plugins() for f in p.papers]


def methods_owner(path: Path) -> str:
    """Who ships methods file ``path``: ``"plugin <package> <version>"``, else psml itself."""
    for p in load_plugins():
        if Path(path) in p.methods:
            return f"plugin {p.label}"
    return f"psml itself ({_psml_label()})"


def block_origin(key: str, name: str) -> Plugin | None:
    """The plugin that registered block ``name`` under recipe key ``key``; None: psml's own."""
    key = "codec" if key == "codec_down" else key
    for p in load_plugins() if _LOADED is not None else []:
        if name in p.blocks.get(key, []):
            return p
    return None


def recipe_plugins(name: str, blocks: Iterable[tuple[str, str]]) -> list[Plugin]:
    """The plugins a recipe comes from or uses: its methods file's, then its blocks'.

    Args:
        name: The recipe's name (a sweep's ``<method>__<label>`` counts as its base's).
        blocks: ``(recipe key, block name)`` of each block the recipe names.
    """
    out: list[Plugin] = []
    base = name.split("__", 1)[0]
    for p in load_plugins():
        if base in p.recipes and p not in out:
            out.append(p)
    for key, block in blocks:
        p = block_origin(key, block)
        if p is not None and p not in out:
            out.append(p)
    return out


def recipe_labels(recipes: Mapping[str, MethodRecipe]) -> dict[str, list[str]]:
    """Recipe name -> ``"<package> <version>"`` of each plugin it comes from or uses.

    Only recipes that involve a plugin are listed; the report marks them, and the workflow
    hands this to it in the effective configuration (``plugins``).
    """
    out = {}
    for name, r in recipes.items():
        blocks = [("codec", r.codec.name), ("sync", r.sync.name)]
        blocks += [("controller", r.controller.name), ("placement", r.placement.name)]
        if r.codec_down is not None:
            blocks.append(("codec", r.codec_down.name))
        found = recipe_plugins(name, blocks)
        if found:
            out[name] = [p.label for p in found]
    return out


def describe_plugins() -> list[str]:
    """One line per plugin: package, version and what it added (for ``psml config``)."""
    lines = []
    for p in load_plugins():
        parts = [f"{k}s: {', '.join(v)}" for k, v in sorted(p.blocks.items())]
        if p.recipes:
            parts.append(f"recipes: {', '.join(sorted(p.recipes))}")
        if p.papers:
            parts.append(f"papers: {', '.join(f.stem for f in p.papers)}")
        lines.append(f"{p.label} ({'; '.join(parts) or 'nothing'})")
    return lines
