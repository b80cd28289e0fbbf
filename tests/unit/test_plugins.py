"""Plugins that clash: the one line names both packages and their versions.

The distributions are real (``importlib.metadata`` reads their dist-info from a folder on
``sys.path``; see ``plugin_dists``), so the names and versions come from where a pip install
would put them.
"""

from __future__ import annotations

import pytest
from plugin_dists import fresh_plugins, install

from psml_core import plugins
from psml_core.codecs import CODECS
from psml_core.errors import ConfigError
from psml_core.recipes import _load_all_methods, config_root


@pytest.fixture
def site(tmp_path):
    with fresh_plugins(tmp_path) as root:
        yield root


def _one_line(exc: pytest.ExceptionInfo[ConfigError]) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_two_plugins_registering_one_codec_name_are_both_named(site) -> None:
    install(site, "psml-alpha", "1.2.0", codecs={"dup": "AlphaCodec"})
    install(site, "psml-beta", "3.4.5", codecs={"dup": "BetaCodec"})
    with pytest.raises(ConfigError) as err:
        plugins.load_plugins()
    msg = _one_line(err)
    assert msg.startswith("plugin psml-beta 3.4.5: entry point 'dup'")
    assert "registered by plugin psml-alpha 1.2.0 already" in msg
    assert "psml itself" not in msg and "pip uninstall psml-beta" in msg


def test_a_plugin_module_that_registers_a_taken_name_itself_names_the_owner(site) -> None:
    install(site, "psml-alpha", "1.0", codecs={"dup": "AlphaCodec"})
    own = "\nCODECS.register('dup')(GammaCodec)\n"
    install(
        site,
        "psml-gamma",
        "2.0",
        codecs={"gamma": "GammaCodec"},
        module_code="from psml_core.codecs import CODECS" + own,
    )
    with pytest.raises(ConfigError) as err:
        plugins.load_plugins()
    msg = _one_line(err)
    assert msg.startswith("plugin psml-gamma 2.0: entry point 'gamma'")
    assert "codec 'dup' is registered by plugin psml-alpha 1.0 already" in msg


def test_a_plugin_taking_psmls_own_name_says_psml_itself_with_its_version(site) -> None:
    install(site, "psml-alpha", "1.0", codecs={"topk": "AlphaCodec"})
    with pytest.raises(ConfigError) as err:
        plugins.load_plugins()
    msg = _one_line(err)
    assert "plugin psml-alpha 1.0: entry point 'topk'" in msg
    assert "registered by psml itself (psml-core " in msg


def test_distinct_names_load_and_are_credited(site) -> None:
    install(site, "psml-alpha", "1.0", codecs={"a_only": "AlphaCodec"})
    install(site, "psml-beta", "2.0", codecs={"b_only": "BetaCodec"})
    labels = {p.label: p.blocks for p in plugins.load_plugins()}
    assert labels == {
        "psml-alpha 1.0": {"codec": ["a_only"]},
        "psml-beta 2.0": {"codec": ["b_only"]},
    }
    assert plugins.block_origin("codec", "b_only").label == "psml-beta 2.0"
    assert "a_only" in CODECS


def test_a_recipe_two_plugins_define_names_both_packages(site) -> None:
    install(site, "psml-alpha", "1.0", recipes=("twin",))
    install(site, "psml-beta", "2.5", recipes=("twin",))
    plugins.load_plugins()
    with pytest.raises(ConfigError) as err:
        _load_all_methods(config_root())
    msg = _one_line(err)
    assert msg.startswith("plugin psml-beta 2.5: recipe 'twin' is defined by plugin psml-alpha 1.0")
    assert "methods.yaml" in msg


def test_a_plugin_recipe_with_psmls_own_name_names_psml(site) -> None:
    install(site, "psml-alpha", "1.0", recipes=("dense_bsp",))
    plugins.load_plugins()
    with pytest.raises(ConfigError) as err:
        _load_all_methods(config_root())
    msg = _one_line(err)
    assert msg.startswith("plugin psml-alpha 1.0: recipe 'dense_bsp' is defined by psml itself")
