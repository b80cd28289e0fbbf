from __future__ import annotations

import pytest

from psml_core.errors import ConfigError
from psml_core.registry import Registry


def test_unknown_name_lists_known():
    reg: Registry[int] = Registry("widget")
    reg.register("b")(2)
    reg.register("a")(1)
    assert reg.get("a") == 1
    assert reg.names() == ["a", "b"]
    with pytest.raises(
        ConfigError, match=r"unknown widget 'c' \(config key 'x.y'\); known widgets: a, b"
    ):
        reg.get("c", where="x.y")


def test_double_registration_is_a_bug():
    reg: Registry[int] = Registry("widget")
    reg.register("a")(1)
    with pytest.raises(ValueError, match="registered twice"):
        reg.register("a")(2)


def test_registration_names_the_class_once():
    reg: Registry[type] = Registry("widget")

    @reg.register("w")
    class W:
        pass

    assert W.name == "w"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="sets name 'x' but registers as 'y'"):

        @reg.register("y")
        class X:
            name = "x"


def test_build_instantiates_from_a_block_and_words_bad_params():
    from psml_core.config import BlockSpec

    reg: Registry[type] = Registry("widget", key="part")

    @reg.register("w")
    class W:
        def __init__(self, size: int = 1) -> None:
            self.size = size

    assert reg.build(BlockSpec("w", {"size": 3})).size == 3
    with pytest.raises(ConfigError, match=r"widget 'w': bad params \{'colour': 1\}"):
        reg.build(BlockSpec("w", {"colour": 1}))
    with pytest.raises(ConfigError, match=r"config key 'part.name'"):
        reg.build(BlockSpec("v"))


# --------------------------------------------------------------------------- no drift


def _schema(*path: str) -> dict:
    from pathlib import Path

    import yaml

    node = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "workflow/schemas/config.schema.yaml").read_text()
    )
    for key in path:
        node = node[key]
    return node


def _schema_enum(*path: str) -> set[str]:
    return set(_schema(*path)["enum"])


def test_the_schema_enums_name_exactly_the_registered_blocks():
    """A block registered but missing from the schema (or the reverse) fails here."""
    import psml_core.data  # noqa: F401 - registers the sources
    import psml_core.engine  # noqa: F401 - registers the backends and optimizers
    import psml_core.models  # noqa: F401 - registers the models
    from psml_core.data.base import DATASETS
    from psml_core.engine.optim import OPTIMIZERS
    from psml_core.models.base import MODELS

    defs = ("$defs",)
    # A backend is a name in the schema, checked against the descriptors when a config loads
    # (test_engine_capabilities holds the descriptors to the classes).
    backend = _schema("properties", "backend")
    assert backend.get("$ref") == "#/$defs/name" and "enum" not in backend
    assert _schema_enum(*defs, "dataset", "properties", "source") == set(DATASETS.names())
    assert _schema_enum(*defs, "workload", "properties", "model") == set(MODELS.names())
    assert _schema_enum(*defs, "workload", "properties", "optimizer") == set(OPTIMIZERS.names())


def test_every_registered_codec_has_a_benchmark_setup():
    """`psml bench codecs` drives each codec by its SETUPS entry; a new codec needs one."""
    from psml_core.bench.codecs import SETUPS
    from psml_core.codecs import CODECS

    assert set(SETUPS) == set(CODECS.names())
