"""psml_core's import graph: no cycles, function-level and TYPE_CHECKING imports included.

A lower layer never imports a higher one: :data:`LAYERS`, lowest first, is the table of
``docs/architecture.md`` ("Layers"), which a test holds to it. The settings
(:mod:`psml_core.config`) are a leaf: they import nothing of psml_core but its errors, so that
any block can import them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "psml_core"
DOC = PACKAGE.parent / "docs" / "architecture.md"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("settings", (
        "psml_core", "psml_core.config", "psml_core.registry", "psml_core.errors",
        "psml_core.atomic", "psml_core.provenance", "psml_core.heartbeat", "psml_core.heap",
        "psml_core.layout", "psml_core.validate.table",
    )),
    ("building blocks", (
        "psml_core.codecs", "psml_core.sync", "psml_core.control", "psml_core.placement",
        "psml_core.data", "psml_core.models", "psml_core.plugins", "psml_core.scale",
        "psml_core.recipes", "psml_core.capabilities", "psml_core.backend_info",
    )),
    ("engine", ("psml_core.engine", "psml_core.net", "psml_core.devices", "psml_core.metrics")),
    ("tuning", ("psml_core.tuning",)),
    ("analysis", ("psml_core.analysis",)),
    ("report", ("psml_core.report",)),
    ("command line", (
        "psml_core.__main__", "psml_core.cli", "psml_core.cli_args", "psml_core.run_resolver",
        "psml_core.run_cells", "psml_core.tune_command", "psml_core.validate_command",
        "psml_core.calibrate_command", "psml_core.results_command", "psml_core.deploy",
        "psml_core.footprint", "psml_core.validate", "psml_core.bench",
    )),
)  # fmt: skip
"""Each layer, lowest first, and the modules and packages in it (a package: all its modules,
but those a longer entry places elsewhere). ``psml_core`` itself is its ``__init__`` only."""

UPWARD: dict[tuple[str, str], str] = {
    ("psml_core.placement.cost", "psml_core.engine.worker"): (
        "replayed_traffic borrows the engine's BatchSampler (a lazy import), so that its "
        "predicted bytes replay the engine's exact batch order"
    ),
}
"""The only imports allowed from a lower layer to a higher one, each with its reason."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the psml_core modules it imports anywhere in its source."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        is_pkg = path.name == "__init__.py"
        here = name.split(".") if is_pkg else name.split(".")[:-1]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here[: len(here) - node.level + 1] if node.level else []
                mod = ".".join([*base, *(node.module.split(".") if node.module else [])])
                # `from pkg import sub` imports the submodule where one exists.
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in files else mod
                           for a in node.names]  # fmt: skip
            for t in targets:
                while t and t not in files:  # `import a.b.c` of a name inside a module
                    t = t.rpartition(".")[0]
                if t and t != name:
                    edges.add(t)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_function_level_imports() -> None:
    graph = import_graph()
    # engine.torchdist.launch imports the rank logic inside its functions only.
    assert "psml_core.engine.torchdist.rank" in graph["psml_core.engine.torchdist.launch"]


def test_psml_core_has_no_import_cycle() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def test_the_settings_are_a_leaf() -> None:
    """Every module of psml_core.config imports only the package itself and psml_core.errors."""
    graph = import_graph()
    settings = [m for m in graph if m == "psml_core.config" or m.startswith("psml_core.config.")]
    assert len(settings) > 1  # the package and its modules
    for module in settings:
        outside = {
            m for m in graph[module]
            if m not in ("psml_core", "psml_core.errors") and not m.startswith("psml_core.config")
        }  # fmt: skip
        assert not outside, f"{module} imports {sorted(outside)}"


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of a module's layer: its longest matching entry's."""
    best: tuple[int, int] | None = None
    for i, (_name, entries) in enumerate(LAYERS):
        for entry in entries:
            covers = module == entry or (entry != "psml_core" and module.startswith(entry + "."))
            if covers and (best is None or len(entry) > best[1]):
                best = (i, len(entry))
    return None if best is None else best[0]


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a lower layer to a higher one not in :data:`UPWARD`, as a line."""
    found = []
    for module in sorted(graph):
        here = layer_of(module)
        for target in sorted(graph[module]):
            there = layer_of(target)
            if here is None or there is None or there <= here:
                continue
            if (module, target) not in UPWARD:
                found.append(f"{module} ({LAYERS[here][0]}) imports {target} ({LAYERS[there][0]})")
    return found


def test_the_layer_check_finds_an_upward_import() -> None:
    graph = {"psml_core.codecs.x": {"psml_core.engine.y", "psml_core.config.z"}}
    assert upward(graph) == [
        "psml_core.codecs.x (building blocks) imports psml_core.engine.y (engine)"
    ]
    assert upward({"psml_core.report.a": {"psml_core.analysis.b", "psml_core.errors"}}) == []


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(m for m in import_graph() if layer_of(m) is None)
    assert not unplaced, (
        f"modules in no layer of LAYERS (add them, and to docs/architecture.md): {unplaced}"
    )


def test_no_lower_layer_imports_a_higher_one() -> None:
    found = upward(import_graph())
    assert not found, "imports against the layers (docs/architecture.md):\n" + "\n".join(found)


def test_each_allowed_upward_import_is_still_there_and_lazy() -> None:
    """An exception no longer needed is dropped; the one kept stays inside a function."""
    graph = import_graph()
    for module, target in UPWARD:
        assert target in graph[module], f"{module} no longer imports {target}: drop it from UPWARD"
        path = PACKAGE.parent / (module.replace(".", "/") + ".py")
        top = ast.parse(path.read_text(encoding="utf-8")).body
        at_top = {n.module for n in top if isinstance(n, ast.ImportFrom)}
        assert target not in at_top, f"{module} imports {target} at module level"


def _doc_layers() -> list[tuple[str, str]]:
    """The (layer, packages cell) rows of the "Layers" table in docs/architecture.md."""
    text = DOC.read_text(encoding="utf-8").split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:3] for line in text.splitlines() if line.startswith("| ")]
    return [(name.strip(), cell) for name, cell in rows[1:]]  # the first row is the header


def _doc_path(entry: str) -> str:
    """How the doc names an entry: ``pkg/`` for a package, ``mod.py`` for a module."""
    rel = entry.removeprefix("psml_core").lstrip(".").replace(".", "/")
    if not rel:
        return "__init__.py"
    return f"{rel}/" if (PACKAGE / rel).is_dir() else f"{rel}.py"


def test_the_docs_layers_table_is_this_one() -> None:
    doc = _doc_layers()
    assert [name for name, _cell in doc] == [name for name, _entries in LAYERS]
    for (name, cell), (_name, entries) in zip(doc, LAYERS, strict=True):
        named = set(re.findall(r"`([^`]+)`", cell))
        missing = [_doc_path(e) for e in entries if _doc_path(e) not in named]
        assert not missing, f"docs/architecture.md's {name!r} row does not name {missing}"
