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
