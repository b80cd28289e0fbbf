"""A tier's backend is checked against every recipe of the tier when the config loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from psml_core.backend_info import BACKEND_INFOS, BUILTIN
from psml_core.capabilities import backend_info, check_backend, has_barrier, moves_keys
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


def test_each_builtin_descriptor_names_its_registered_class_and_its_clock():
    assert {info.name for info in BUILTIN} == set(BACKENDS.names())
    for info in BUILTIN:
        cls = info.load()
        assert cls is BACKENDS.get(info.name) and cls.clock == info.clock
        assert BACKEND_INFOS.get(info.name) is info


def test_an_unknown_backend_is_one_line_listing_the_known_ones():
    with pytest.raises(ConfigError) as err:
        load_experiment({"tier": "smoke", "backend": "ray"}, CONFIG)
    msg = str(err.value)
    assert msg.startswith("invalid config: key 'backend': unknown backend 'ray'")
    assert "known backends: dist, horovod, sim" in msg and "\n" not in msg


def test_the_descriptors_count_processes_and_say_who_checkpoints_and_launches():
    sim, dist, horovod = (backend_info(n) for n in ("sim", "dist", "horovod"))
    assert [b.processes(4, 2) for b in (sim, dist, horovod)] == [1, 6, 4]
    assert [b.checkpoints for b in (sim, dist, horovod)] == [True, False, False]
    assert dist.launch_module == "psml_core.engine.torchdist.launch"
    assert sim.launch_module is None and horovod.launch_module is None
    assert sim.in_process and not dist.in_process and not horovod.in_process


def test_loading_a_config_imports_no_torch():
    import subprocess
    import sys

    code = (
        "import sys; from psml_core.capabilities import check_backend; "
        "from psml_core.recipes import load_experiment; "
        f"check_backend(load_experiment({{'tier': 'smoke'}}, {str(CONFIG)!r})); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
