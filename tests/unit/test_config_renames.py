"""The old 'device' keys are read under their new names, with one line of deprecation."""

from __future__ import annotations

import pytest

from psml_core.config.renames import hashed_names, renamed_config_keys, renamed_run_keys
from psml_core.errors import ConfigError


def test_old_keys_are_renamed_with_one_line_each(capsys: pytest.CaptureFixture[str]) -> None:
    cfg = {"device": "cpu", "compute": {"device": "v100"}, "workloads": {"w": {"device": "a100"}}}
    out = renamed_config_keys(cfg, "config.yaml")
    assert out == {
        "torch_device": "cpu",
        "compute": {"cost_profile": "v100"},
        "workloads": {"w": {"cost_profile": "a100"}},
    }
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3
    assert (
        "config.yaml: 'workloads.w.device' is deprecated, renamed 'workloads.w.cost_profile'"
        in (lines[2])
    )


def test_old_and_new_key_together_is_an_error_naming_both() -> None:
    with pytest.raises(ConfigError, match="'compute.device'.*'compute.cost_profile'"):
        renamed_config_keys({"compute": {"device": "v100", "cost_profile": "a100"}}, "t.yaml")


def test_run_hash_view_uses_the_old_names() -> None:
    run = {"torch_device": "cuda", "compute": {"cost_profile": "v100"}, "workload": {"lr": 1}}
    assert hashed_names(run) == {
        "device": "cuda",
        "compute": {"device": "v100"},
        "workload": {"lr": 1},
    }
    assert run["compute"] == {"cost_profile": "v100"}  # the input is left alone
    assert renamed_run_keys(hashed_names(run), "--run") == run


def test_a_workload_sweep_of_the_old_device_sweeps_the_cost_profile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An experiment's workload_sweep that sets ``device`` derives workloads by cost profile."""
    from psml_core.config import config_root
    from psml_core.recipes import load_experiment

    sweep = {"base": "digits_mlp", "values": ["cpu-core", "v100"], "labels": ["cpu", "v100"]}
    exp = {"methods": ["dense_bsp"], "workload_sweep": {**sweep, "params": ["device"]}}
    old = load_experiment({"tier": "smoke", "experiments": {"prof": exp}}, config_root())
    err = capsys.readouterr().err
    assert "'experiments.prof.workload_sweep.params' names 'device', deprecated" in err
    assert err.count("\n") == 1
    assert old.workloads["digits_mlp__v100"].cost_profile == "v100"
    exp["workload_sweep"]["params"] = ["cost_profile"]
    new = load_experiment({"tier": "smoke", "experiments": {"prof": exp}}, config_root())
    assert old.workloads == new.workloads and not capsys.readouterr().err
    a, b = (e.run("digits_mlp__v100", "dense_bsp", "dc_10g", 0) for e in (old, new))
    assert a.compute.cost_profile == "v100" and a.config_hash() == b.config_hash()


def test_a_key_told_once_names_the_file_that_set_it(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``psml config`` and the workflow read the user's config more than once: one line each."""
    from psml_core.config import config_root
    from psml_core.config.load import effective_config
    from psml_core.run_resolver import user_config

    mine = tmp_path / "mine.yaml"
    mine.write_text("tier: smoke\ndevice: cpu\n", encoding="utf-8")
    user = user_config(mine, ["compute={model: profile, device: v100}"])
    assert effective_config(user, config_root())["compute"]["cost_profile"] == "v100"
    effective_config(user, config_root())
    assert capsys.readouterr().err.splitlines() == [
        f"psml: {mine}: 'device' is deprecated, renamed 'torch_device'",
        "psml: --set: 'compute.device' is deprecated, renamed 'compute.cost_profile'",
    ]
    said = {"device"}
    renamed_config_keys({"device": "cpu"}, "--config", said)
    assert not capsys.readouterr().err and said == {"device"}
