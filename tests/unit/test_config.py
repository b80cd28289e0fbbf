from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from psml_core.config import RunSpec, effective_config
from psml_core.errors import ConfigError
from psml_core.recipes import load_experiment, load_methods, run_from_json


def test_smoke_tier_loads(smoke):
    assert smoke.tier == "smoke"
    assert smoke.methods == ()  # the overview experiment replaces the main grid
    assert smoke.experiments["overview"].methods == ("dense_bsp", "topk_ef")
    assert set(smoke.experiments) == {
        "overview",
        "jpdc",
        "dfs",
        "ratatouille",
        "pf_theta",
        "dc2",
        "pcp",
    }
    assert len(smoke.runs()) == len(set(smoke.grid()))
    # Schema defaults are filled in.
    assert smoke.workloads["rcv1_logreg"].l2 == 0.0


@pytest.mark.parametrize("tier", ["smoke", "small", "paper"])
def test_every_tier_is_valid(repo, tier):
    exp = load_experiment({"tier": tier}, repo / "config")
    assert exp.runs()


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        (
            {"tier": "huge"},
            "key 'tier': 'huge' is not allowed; allowed values: smoke, small, paper",
        ),
        ({"methods": ["nope"]}, "unknown method 'nope'; known methods"),
        ({"workers": "two"}, "key 'workers': expected integer"),
        ({"workers": 0}, "key 'workers': 0 is out of range; must be >= 1"),
        ({"bogus": 1}, "unknown key 'bogus'"),
        (
            {"backend": "mpi"},
            "key 'backend': unknown backend 'mpi'; known backends: dist, horovod, sim",
        ),
        ({"scenarios": {"x": {"bandwidth_gbps": -1}}}, "scenarios.x.bandwidth_gbps"),
        (
            {
                "workloads": {
                    "w": {
                        "dataset": "nope",
                        "model": "mlp",
                        "batch_size": 1,
                        "lr": 0.1,
                        "iterations": 1,
                    }
                }
            },
            "unknown dataset 'nope'",
        ),
        ({"workloads": {"digits_mlp": {"model": "resnet"}}}, "allowed values: logreg, mlp"),
        ({"datasets": {"f": {"source": "libsvm"}}}, "needs one of the keys path or url"),
        ({"shards": 9}, "cannot be colocated"),
        # An integer written as a float would reach range(); NaN passes every range check.
        ({"workers": 2.0}, "key 'workers': expected integer, got 2.0 (float)"),
        (
            {"workloads": {"digits_mlp": {"lr": float("nan")}}},
            "key 'workloads.digits_mlp.lr': expected a finite number, got nan",
        ),
        (
            {"scenarios": {"dc_10g": {"bandwidth_gbps": float("inf")}}},
            "key 'scenarios.dc_10g.bandwidth_gbps': expected a finite number, got inf",
        ),
        (
            {"datasets": {"digits": {"test_fraction": 1.0}}},
            "key 'datasets.digits.test_fraction': 1.0 is out of range; must be < 1",
        ),
    ],
)
def test_bad_config_one_clear_message(repo, override, fragment):
    user = {"tier": "smoke", **override}
    with pytest.raises(ConfigError) as info:
        load_experiment(user, repo / "config")
    msg = str(info.value)
    assert fragment in msg
    assert "\n" not in msg.strip()


def test_effective_config_overrides_nested_keys(repo):
    cfg = effective_config(
        {"tier": "smoke", "workloads": {"digits_mlp": {"lr": 0.3}}}, repo / "config"
    )
    assert cfg["workloads"]["digits_mlp"]["lr"] == 0.3
    assert cfg["workloads"]["digits_mlp"]["iterations"] == 80  # from the tier file


def test_a_null_override_removes_a_tier_entry(repo):
    """.test/config/config.yaml keeps one experiment of the smoke tier this way."""
    full = effective_config({"tier": "smoke"}, repo / "config")
    cfg = effective_config({"tier": "smoke", "experiments": {"pcp": None}}, repo / "config")
    assert set(cfg["experiments"]) == set(full["experiments"]) - {"pcp"}
    test = yaml.safe_load((repo / ".test" / "config" / "config.yaml").read_text())
    assert set(effective_config(test, repo / "config")["experiments"]) == {"dfs"}
    with pytest.raises(ConfigError, match="seeds"):  # a key the schema requires stays required
        effective_config({"tier": "smoke", "seeds": None}, repo / "config")


def test_user_config_is_not_mutated(repo):
    user = {"tier": "smoke", "seeds": [1]}
    before = copy.deepcopy(user)
    effective_config(user, repo / "config")
    assert user == before


def test_run_spec_json_round_trip_and_hash(smoke):
    run = smoke.runs()[0]
    again = RunSpec.from_json(run.to_json())
    assert again == run
    assert again.config_hash() == run.config_hash()
    other = smoke.runs()[1]
    assert other.config_hash() != run.config_hash()


def test_run_spec_rejects_unknown_keys(smoke):
    data = smoke.runs()[0].to_dict()
    data["workload"]["surprise"] = 1
    import json

    with pytest.raises(ConfigError, match="unknown key 'surprise'"):
        run_from_json(json.dumps(data))


def test_methods_file_unknown_block_name(tmp_path: Path, repo):
    methods = yaml.safe_load((repo / "config" / "methods.yaml").read_text())
    methods["dense_bsp"]["codec"]["name"] = "zip"
    p = tmp_path / "methods.yaml"
    p.write_text(yaml.safe_dump(methods))
    with pytest.raises(ConfigError, match="unknown codec 'zip'.*known codecs: .*none"):
        load_methods(p)


@pytest.mark.parametrize(
    ("block", "fragment"),
    [
        ({"name": "topk", "params": {"ratio": 1.5}}, "ratio must be in (0, 1], got 1.5"),
        ({"name": "topk", "params": {"ratio": 0}}, "ratio must be in (0, 1], got 0"),
        ({"name": "topk", "params": {"speed": 2}}, "bad params {'speed': 2}"),
    ],
)
def test_methods_file_bad_block_params(tmp_path: Path, repo, block, fragment):
    """A block's params are checked when the file loads, not when a run reaches them."""
    methods = yaml.safe_load((repo / "config" / "methods.yaml").read_text())
    methods["topk_ef"]["codec"] = block
    p = tmp_path / "methods.yaml"
    p.write_text(yaml.safe_dump(methods))
    with pytest.raises(ConfigError) as info:
        load_methods(p)
    msg = str(info.value)
    assert "methods.yaml" in msg and "key 'topk_ef.codec.params'" in msg and fragment in msg


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [
        (("workers",), 2.0, "key 'workers': expected integer, got 2.0 (float)"),
        (("workers",), -1, "key 'workers': -1 is out of range; must be >= 1"),
        (("workload", "iterations"), 0, "key 'workload.iterations': 0 is out of range"),
        (("dataset", "test_fraction"), 1.5, "key 'dataset.test_fraction': 1.5 is out of range"),
        (("method", "pull"), "push", "key 'method.pull': 'push' is not allowed"),
        (("scenario", "bandwidth_gbps"), "fast", "expected number, got 'fast'"),
    ],
)
def test_run_spec_rejects_invalid_values(smoke, path, value, fragment):
    """A hand-written --run gets the config's checks before anything runs."""
    import json

    data = smoke.runs()[0].to_dict()
    node = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    with pytest.raises(ConfigError) as info:
        run_from_json(json.dumps(data))
    assert str(info.value).startswith("invalid --run: ") and fragment in str(info.value)


def test_missing_and_malformed_yaml(tmp_path: Path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_methods(tmp_path / "nope.yaml")
    bad = tmp_path / "methods.yaml"
    bad.write_text("a: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        load_methods(bad)


def test_experiments_add_their_own_grids_without_duplicates(repo):
    exp = load_experiment({"tier": "small"}, repo / "config")
    grid = exp.grid()
    assert len(grid) == len(set(grid))
    # No main grid: the experiments schedule every recipe, each where its claims apply, plus
    # the recipes their sweeps derive (<method>__<label>: PF's theta0, JPDC's hashing size).
    ran = {m for _w, m, _s, _seed in grid}
    assert exp.methods == () and {m for m in ran if "__" not in m} == set(load_methods())
    derived = {m for m in ran if "__" in m}
    assert {m.split("__")[0] for m in derived} == {"ratatouille_async", "jpdc"} and len(
        derived
    ) == 8
    assert exp.recipes["jpdc__m_d64"].hashing.ratio == 0.015625
    # PF's README value: the calibrated factor scales it at train time; pulls are whole.
    pf = exp.recipes["ratatouille_async__t0p2"]
    assert pf.codec.params["theta0"] == 0.2 and pf.codec_down is None
    assert ("rcv1_logreg", "dense_bsp", "slow_high_var", 0) in grid  # head to head
    assert ("rcv1_logreg", "jpdc", "slow_100m", 2) in grid
    assert not any(m == "jpdc" and w == "digits_mlp" for w, m, _s, _seed in grid)
    assert {m for _w, m, s, _seed in grid if s == "hetero_dc"} >= {"pcp", "ssp_8", "dssp"}
    assert set(exp.all_methods) == set(exp.recipes)


def test_a_sweep_derives_one_checked_recipe_per_value(repo):
    user = {
        "tier": "smoke",
        "experiments": {
            "s": {
                "methods": ["dense_bsp"],
                "sweep": {"method": "topk_ef", "params": ["codec.params.ratio"],
                          "values": [0.1, 0.01]},
            }
        },
    }  # fmt: skip
    exp = load_experiment(user, repo / "config")
    assert exp.experiments["s"].methods == (
        "dense_bsp",
        "topk_ef__ratio_0p1",
        "topk_ef__ratio_0p01",
    )
    assert exp.recipes["topk_ef__ratio_0p01"].codec.params["ratio"] == 0.01
    assert "[sweep: ratio = 0.01, in place of" in exp.recipes["topk_ef__ratio_0p01"].description
    bad = {**user["experiments"]["s"]["sweep"], "values": [2.0]}
    with pytest.raises(ConfigError, match="experiments.s.sweep"):
        load_experiment({**user, "experiments": {"s": {"methods": ["dense_bsp"], "sweep": bad}}},
                        repo / "config")  # fmt: skip
    missing = {**user["experiments"]["s"]["sweep"], "params": ["codec.nothing.ratio"]}
    with pytest.raises(ConfigError, match="has no 'codec.nothing.ratio'"):
        load_experiment(
            {**user, "experiments": {"s": {"methods": ["dense_bsp"], "sweep": missing}}},
            repo / "config",
        )


def test_scenario_heterogeneity_replaces_the_tiers(repo):
    exp = load_experiment({"tier": "small"}, repo / "config")
    het = exp.run("digits_mlp", "pcp", "hetero_dc", 0).compute.heterogeneity
    assert het is not None and het.draw_from == (1.0, 1.5, 2.0, 4.0)
    assert exp.run("digits_mlp", "pcp", "dc_10g", 0).compute.heterogeneity is None


@pytest.mark.parametrize(
    ("experiment", "fragment"),
    [
        ({"methods": ["nope"]}, "key 'experiments.x.methods[0]': unknown method 'nope'"),
        (
            {"methods": ["dense_bsp"], "workloads": ["nope"]},
            "key 'experiments.x.workloads[0]': unknown workload 'nope'; known workloads: ",
        ),
        (
            {"methods": ["jpdc"], "workloads": ["digits_mlp"]},
            "method 'jpdc' hashes sparse features but workload 'digits_mlp' uses the dense",
        ),
        ({"methods": []}, "experiments"),
    ],
)
def test_bad_experiments_one_clear_message(repo, experiment, fragment):
    with pytest.raises(ConfigError, match=None) as info:
        load_experiment({"tier": "smoke", "experiments": {"x": experiment}}, repo / "config")
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_a_tier_schedules_every_run_its_claims_need(repo):
    """The smoke tier lists only a paper's method and main baseline; its claims add the rest."""
    smoke = load_experiment({"tier": "smoke"}, repo / "config")
    pcp = smoke.experiments["pcp"]
    assert {"ssp_1", "ssp_2", "ssp_4", "ssp_8"} <= set(pcp.methods)  # pcp_vs_ssp's baselines
    dfs = smoke.experiments["dfs"]
    assert {"dense_bsp", "omnireduce", "topk_omnireduce", "topk_mc", "topk_ef"} <= set(dfs.methods)
    rat = smoke.experiments["ratatouille"]
    assert "dc_pf" in rat.scenarios and {"dense_bsp", "dense_asp"} <= set(rat.methods)
    # A regime map runs what it lists, and an experiment no claim names is left alone.
    assert smoke.experiments["overview"].methods == ("dense_bsp", "topk_ef")


def test_a_tier_without_runs_is_refused(repo, tmp_path):
    import shutil

    root = tmp_path / "config"
    shutil.copytree(repo / "config", root)
    tier = yaml.safe_load((root / "tiers" / "smoke.yaml").read_text())
    tier.pop("experiments")
    (root / "tiers" / "smoke.yaml").write_text(yaml.safe_dump(tier))
    with pytest.raises(ConfigError, match="no runs; list methods"):
        load_experiment({"tier": "smoke", "methods": []}, root)


def test_axis_sweeps_derive_scenarios_and_workloads_for_their_experiment_only(repo):
    """A regime map's axes: derived scenarios (bandwidth) and workloads (workers)."""
    user = {
        "tier": "smoke",
        "experiments": {
            "link": {
                "methods": ["dense_bsp"],
                "workloads": ["digits_mlp"],
                "scenario_sweep": {"base": "dc_10g", "params": ["bandwidth_gbps"],
                                   "values": [1, 0.1]},
                "regime_map": {"axis": "comm_compute", "claims": ["rat_speedup"]},
            },
            "size": {
                "methods": ["dense_bsp"],
                "scenarios": ["dc_10g"],
                "workload_sweep": {"base": "digits_mlp", "params": ["workers"],
                                   "values": [2, 16], "labels": ["p2", "p16"]},
            },
        },
    }  # fmt: skip
    exp = load_experiment(user, repo / "config")
    assert exp.experiments["link"].scenarios == (
        "dc_10g__bandwidth_gbps_1",
        "dc_10g__bandwidth_gbps_0p1",
    )
    assert exp.scenarios["dc_10g__bandwidth_gbps_0p1"].bandwidth_gbps == 0.1
    slow = exp.scenarios["dc_10g__bandwidth_gbps_0p1"]
    assert "[sweep: bandwidth_gbps = 0.1]" in slow.description
    runs = {r.run_id: r for r in exp.runs()}
    assert runs["digits_mlp__p16/dense_bsp/dc_10g/seed0"].workers == 16
    assert runs["digits_mlp__p2/dense_bsp/dc_10g/seed0"].workers == 2
    # The main grid and other experiments never run a derived entry.
    derived = [r for r in runs if "__" in r.split("/")[0] or "__" in r.split("/")[2]]
    assert sorted(derived) == sorted(
        ["digits_mlp/dense_bsp/dc_10g__bandwidth_gbps_1/seed0",
         "digits_mlp/dense_bsp/dc_10g__bandwidth_gbps_0p1/seed0",
         "digits_mlp__p2/dense_bsp/dc_10g/seed0", "digits_mlp__p16/dense_bsp/dc_10g/seed0"]
    )  # fmt: skip
    bad = {**user["experiments"]["link"]["scenario_sweep"], "base": "nowhere"}
    with pytest.raises(ConfigError, match="experiments.link.scenario_sweep.base.*nowhere"):
        load_experiment({**user, "experiments": {"link": {"methods": ["dense_bsp"],
                                                          "scenario_sweep": bad}}},
                        repo / "config")  # fmt: skip
    listy = {"base": "dc_10g", "params": ["bandwidth_gbps"], "values": [[1, 2]]}
    with pytest.raises(ConfigError, match="labels"):
        load_experiment({**user, "experiments": {"link": {"methods": ["dense_bsp"],
                                                          "scenario_sweep": listy}}},
                        repo / "config")  # fmt: skip


def test_a_workloads_own_workers_keep_the_tiers_shard_layout(repo):
    exp = load_experiment({"tier": "small"}, repo / "config")
    assert exp.cluster("digits_mlp") == (8, 8)
    assert exp.cluster("digits_mlp__p4") == (4, 4)


@pytest.mark.parametrize(
    ("recipe", "fragment"),
    [
        ({"sync": {"name": "ssp", "params": {"staleness": 2}}, "pull": "aggregate"},
         "pull: aggregate needs a barrier sync policy"),
        ({"placement": {"name": "dynamic", "params": {"chunk": 64, "period": 5}},
          "codec": {"name": "dfs", "params": {"ratio": 0.01}}},
         "placement 'dynamic': codec 'dfs' (with these params) keeps per-shard state"),
    ],
    ids=["aggregate_without_barrier", "dynamic_with_dfs"],
)  # fmt: skip
def test_blocks_that_do_not_fit_together_fail_when_the_config_loads(
    repo, tmp_path, recipe, fragment
):
    """Before any job runs (not at train time, after prepare, analyze and partition)."""
    import shutil

    root = tmp_path / "config"
    shutil.copytree(repo / "config", root)
    base = {"description": "a combination that cannot run", "codec": {"name": "none"},
            "sync": {"name": "bsp"}, "controller": {"name": "static"},
            "placement": {"name": "range"}}  # fmt: skip
    with (root / "methods.yaml").open("a") as f:
        f.write("\n" + yaml.safe_dump({"misfit": {**base, **recipe}}))
    with pytest.raises(ConfigError, match="method 'misfit'") as info:
        load_experiment({"tier": "smoke", "methods": ["dense_bsp", "misfit"]}, root)
    assert fragment in str(info.value)
