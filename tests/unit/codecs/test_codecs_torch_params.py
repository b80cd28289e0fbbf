"""Each torch half reads its codec through a typed interface, never ``Any`` or a private field."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import psml_core.codecs as codecs_pkg
from psml_core.codecs import blocks_torch as bt
from psml_core.codecs import quant_torch as qt
from psml_core.codecs import sparsify_torch as st
from psml_core.codecs import value_bounded_torch as vt
from psml_core.codecs.base import CODECS

CODEC_DIR = Path(codecs_pkg.__file__).parent
TORCH_HALVES = sorted(p for p in CODEC_DIR.glob("*_torch.py"))

# (registered codec, its params, the interface its torch half takes)
CASES = [
    ("none", {}, qt.NamedCodec),
    ("fp16", {}, qt.NamedCodec),
    ("qsgd", {}, qt.QSGDParams),
    ("topk", {"ratio": 0.1}, st.TopKParams),
    ("randomk", {"ratio": 0.1}, st.RandomKParams),
    ("threshold", {}, st.ThresholdParams),
    ("dgc", {"ratio": 0.1}, st.DGCParams),
    ("omnireduce", {}, bt.OmniParams),
    ("dfs", {"ratio": 0.1}, bt.DFSParams),
    ("value_bounded", {}, vt.ValueBoundedParams),
]


@pytest.mark.parametrize(("name", "params", "interface"), CASES, ids=[c[0] for c in CASES])
def test_codec_provides_its_torch_interface(name: str, params: dict, interface: type) -> None:
    codec = CODECS.get(name)(**params)
    assert isinstance(codec, interface)


def test_servers_provide_their_torch_interfaces() -> None:
    omni = CODECS.get("omnireduce")().server()
    dfs = CODECS.get("dfs")(ratio=0.1).server()
    assert isinstance(omni, bt.OmniServerState)
    assert isinstance(dfs, bt.DFSServerState)
    assert isinstance(dfs.codec, bt.DFSParams)
    assert not isinstance(CODECS.get("topk")(ratio=0.1).server(), bt.DFSServerState)


def test_value_bounded_state_provides_filter_state() -> None:
    codec = CODECS.get("value_bounded")()
    assert isinstance(codec._state, vt.FilterState)


def test_interface_rejects_a_codec_lacking_a_member() -> None:
    class Partial:
        name = "dgc"
        ratio = 0.1

    assert not isinstance(Partial(), st.DGCParams)


@pytest.mark.parametrize("path", TORCH_HALVES, ids=[p.name for p in TORCH_HALVES])
def test_torch_half_reads_no_private_field_and_no_any(path: Path) -> None:
    tree = ast.parse(path.read_text())
    private = [
        f"{node.value.id}.{node.attr} (line {node.lineno})"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and isinstance(node.value, ast.Name)
        and node.value.id in ("codec", "server", "state")
    ]
    assert not private, f"{path.name} reads private fields: {private}"
    untyped = [
        f"{arg.arg} of {fn.name}"
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef)
        for arg in fn.args.args
        if arg.arg in ("codec", "server", "state", "ctx")
        and (arg.annotation is None or "Any" in ast.unparse(arg.annotation))
    ]
    assert not untyped, f"{path.name} leaves parameters untyped: {untyped}"
