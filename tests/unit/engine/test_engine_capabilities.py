"""A tier's backend is checked against every recipe of the tier when the config loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from psml_core.capabilities import REFUSALS, check_backend, has_barrier, moves_keys
from psml_core.engine.backend import BACKENDS
from psml_core.errors import ConfigError
from psml_core.placement import PLACEMENTS
from psml_core.recipes import load_experiment

CONFIG = Path(__file__).resolve().parents[3] / "config"


def test_only_the_dynamic_placement_moves_keys():
    moving = sorted(n for n in PLACEMENTS.names() if PLACEMENTS.get(n).moves_keys)
    assert moving == ["dynamic"]


@pytest.mark.parametrize("backend", ["sim", "dist"])
def test_the_smoke_tier_runs_on_sim_and_dist(backend):
    check_backend(load_experiment({"tier": "smoke", "backend": backend}, CONFIG))


def test_horovod_refuses_the_smoke_tier_naming_each_recipe():
    exp = load_experiment({"tier": "smoke", "backend": "horovod"}, CONFIG)
    with pytest.raises(ConfigError) as err:
        check_backend(exp)
    msg = str(err.value)
    refused = [m for m, r in exp.recipes.items() if not has_barrier(r) or r.pull == "touched"]
    assert refused and all(m in msg for m in refused)
    assert "dense_bsp" not in msg  # a recipe it can run is not named
    assert msg.startswith("backend 'horovod' cannot run") and "set backend: sim" in msg
    assert "\n" not in msg


def test_dist_refuses_a_placement_that_moves_keys():
    exp = load_experiment({"tier": "paper", "backend": "dist"}, CONFIG)
    moving = sorted(m for m, r in exp.recipes.items() if moves_keys(r))
    assert moving  # the paper tier runs JPDC's dynamic partition
    with pytest.raises(ConfigError, match="placement 'dynamic' moves keys"):
        check_backend(exp)
    assert BACKENDS.get("dist").refusal(exp.recipes["dense_bsp"]) is None


def test_the_cli_refuses_before_printing_anything(capsys):
    from psml_core.cli import main

    rc = main(
        [
            "config",
            "--config-dir",
            str(CONFIG),
            "--configfile",
            str(CONFIG / "config.yaml"),
            "--set",
            "backend=horovod",
        ]
    )
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err.startswith("psml config: error: backend 'horovod' cannot run")


def test_every_backend_has_its_refusal_and_loading_a_config_imports_no_torch():
    import subprocess
    import sys

    assert set(REFUSALS) == set(BACKENDS.names())
    for name in REFUSALS:
        assert BACKENDS.get(name).refusal is not None
    code = (
        "import sys; from psml_core.capabilities import check_backend; "
        "from psml_core.recipes import load_experiment; "
        f"check_backend(load_experiment({{'tier': 'smoke'}}, {str(CONFIG)!r})); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
