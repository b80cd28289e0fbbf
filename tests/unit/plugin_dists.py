"""Installed plugin distributions, made on disk for a test: real metadata, real entry points.

:func:`install` writes ``<package>-<version>.dist-info`` (``METADATA``, ``entry_points.txt``,
``top_level.txt``) and the package's module beside it, in a folder put on ``sys.path``, so
:mod:`importlib.metadata` finds the distribution, its version and its entry points exactly
as it finds a ``pip install``-ed one. :func:`fresh_plugins` forgets the loaded plugins and,
afterwards, every block they registered and every module they imported.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from psml_core import plugins

CODEC_MODULE = """
import numpy as np
from psml_core.codecs import Codec, Payload, check_vector


class {cls}(Codec):
    def encode(self, x, ctx):
        x = check_vector(x)
        return Payload(self.name, int(x.size), x.tobytes())

    def decode(self, payload, ctx):
        if len(payload.buffer) != 4 * payload.n:
            raise ValueError("wrong length")
        return np.frombuffer(payload.buffer, dtype=np.float32).copy()
"""

RECIPE = """{name}:
  description: "A dense baseline again."
  role: baseline
  codec: {{name: none}}
  sync: {{name: bsp}}
  controller: {{name: static}}
  placement: {{name: range}}
"""


def install(
    root: Path,
    package: str,
    version: str,
    codecs: Mapping[str, str] = (),  # type: ignore[assignment]
    recipes: tuple[str, ...] = (),
    module_code: str = "",
) -> str:
    """Write distribution ``package`` ``version`` under ``root``; its module's name.

    Args:
        root: A folder on ``sys.path``.
        package: The distribution's name.
        version: Its version.
        codecs: Entry-point name -> class name, each a dense codec class in the module.
        recipes: Recipe names its ``methods.yaml`` defines (a ``psml.recipes`` entry point).
        module_code: More code at the end of the module (runs at import).
    """
    module = package.replace("-", "_")
    pkg = root / module
    pkg.mkdir(parents=True)
    code = "".join(CODEC_MODULE.format(cls=cls) for cls in dict(codecs).values())
    (pkg / "__init__.py").write_text(code + module_code, encoding="utf-8")
    lines = []
    if codecs:
        lines.append("[psml.codecs]")
        lines += [f"{ep} = {module}:{cls}" for ep, cls in dict(codecs).items()]
    if recipes:
        (pkg / "methods.yaml").write_text("".join(RECIPE.format(name=r) for r in recipes))
        lines += ["[psml.recipes]", f"{module} = {module}"]
    info = root / f"{module}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (info / "top_level.txt").write_text(module + "\n", encoding="utf-8")
    return module


@contextmanager
def fresh_plugins(root: Path) -> Iterator[Path]:
    """``root`` on ``sys.path`` and no plugin loaded; afterwards, all as it was."""
    from psml_core.backend_info import BACKEND_INFOS
    from psml_core.plugins import BLOCK_GROUPS

    saved = {g: dict(reg._items) for g, (_k, reg, _b) in BLOCK_GROUPS.items()}  # noqa: SLF001
    backends = dict(BACKEND_INFOS._items)  # noqa: SLF001
    loaded, modules = plugins._LOADED, set(sys.modules)  # noqa: SLF001
    sys.path.insert(0, str(root))
    plugins._LOADED = None  # noqa: SLF001
    try:
        yield root
    finally:
        sys.path.remove(str(root))
        plugins._LOADED = loaded  # noqa: SLF001
        for g, (_k, reg, _b) in BLOCK_GROUPS.items():
            reg._items.clear()  # noqa: SLF001
            reg._items.update(saved[g])  # noqa: SLF001
        BACKEND_INFOS._items.clear()  # noqa: SLF001
        BACKEND_INFOS._items.update(backends)  # noqa: SLF001
        for name in set(sys.modules) - modules:
            del sys.modules[name]
