"""Hostile plugins: two packages claiming one name are both named, with versions, in one line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/unit: plugin_dists
from plugin_dists import fresh_plugins, install  # noqa: E402

from psml_core import plugins  # noqa: E402
from psml_core.errors import ConfigError  # noqa: E402
from psml_core.recipes import _load_all_methods, config_root  # noqa: E402


def test_a_codec_name_two_plugins_register_names_both(tmp_path) -> None:
    with fresh_plugins(tmp_path):
        install(tmp_path, "psml-one", "0.3.1", codecs={"twin": "OneCodec"})
        install(tmp_path, "psml-two", "1.0.0", codecs={"twin": "TwoCodec"})
        with pytest.raises(ConfigError) as err:
            plugins.load_plugins()
    msg = str(err.value)
    assert "\n" not in msg and "psml itself" not in msg
    assert "plugin psml-two 1.0.0" in msg and "plugin psml-one 0.3.1" in msg


def test_a_recipe_two_plugins_define_names_both(tmp_path) -> None:
    with fresh_plugins(tmp_path):
        install(tmp_path, "psml-one", "0.3.1", recipes=("twin_recipe",))
        install(tmp_path, "psml-two", "1.0.0", recipes=("twin_recipe",))
        plugins.load_plugins()
        with pytest.raises(ConfigError) as err:
            _load_all_methods(config_root())
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("plugin psml-two 1.0.0: recipe 'twin_recipe' is defined by plugin")
    assert "psml-one 0.3.1" in msg
