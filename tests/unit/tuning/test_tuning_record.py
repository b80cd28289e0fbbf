"""What a tier tunes, the record's fingerprints (stale ones detected) and the tuning seed."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from psml_core.config import TuningSpec
from psml_core.errors import ConfigError
from psml_core.recipes import load_experiment
from psml_core.tuning.record import (
    read_record,
    record_path,
    require_point,
    resolve,
    with_operating_points,
    write_record,
)
from psml_core.tuning.targets import fingerprint, scenario_free, tuning_targets

REPO = Path(__file__).resolve().parents[3]


def _entry(target, lr=0.2, momentum=0.9):
    """A minimal valid entry for ``target`` (what `psml tune` writes, one candidate)."""
    wl = target.spec.workload
    cand = {"stage": 1, "lr_factor": 1.0, "lr": wl.lr, "momentum": wl.momentum,
            "momentum_handling": "server", "warmup_iterations": 0, "final_accuracy": 0.9,
            "evaluations": [0.9], "samples_to_target": None, "diverged": None,
            "declared": True}  # fmt: skip
    settings = ("lr", "momentum", "momentum_handling", "warmup_iterations")
    return {
        "workload": target.workload, "method": target.method, "scenario": target.scenario,
        "scenario_free": target.scenario_free, "seed": target.spec.seed,
        "fingerprint": target.fingerprint, "rule": "v1", "psml_version": "0.1.0",
        "test_samples": 360,
        "declared": {k: cand[k] for k in settings},
        "chosen": {"lr": lr, "momentum": momentum, "momentum_handling": "server",
                   "warmup_iterations": 8, "why": "test"},
        "all_diverged": False, "candidates": [cand],
    }  # fmt: skip


@pytest.fixture()
def tier(smoke, tmp_path):
    """The smoke tier with a record of two entries in a config directory of its own."""
    targets = tuning_targets(smoke)
    keys = ["digits_mlp/dense_bsp", "digits_mlp_pf/ratatouille_async"]
    write_record(record_path(tmp_path, "smoke"), {"entries": {k: _entry(targets[k]) for k in keys}})
    return smoke, tmp_path, targets


def test_every_run_maps_to_one_target_and_sweeps_inherit_their_base(smoke):
    targets = tuning_targets(smoke)
    assert len({smoke.tuning_key(w, m) for w, m, _s, _d in smoke.grid()}) == len(targets)
    # pf_theta's ratatouille_async__t0p6 inherits ratatouille_async (not run itself).
    assert smoke.tuning_key("digits_mlp_pf", "ratatouille_async__t0p6") in targets
    t = targets["digits_mlp_pf/ratatouille_async"]
    assert t.spec.method.name == "ratatouille_async" and t.spec.seed == smoke.tuning.seed
    small = load_experiment({"tier": "small"}, REPO / "config")
    assert small.tuning_key("digits_mlp__p8", "dfs") == "digits_mlp/dfs"
    assert small.tuning_key("rcv1_logreg", "jpdc__m_d4") == "rcv1_logreg/jpdc"


def test_a_key_tuned_for_a_time_runs_under_its_claims_scenario_others_under_their_first(smoke):
    """A time to target depends on the link: the scenario of the claim that judges it."""
    targets = tuning_targets(smoke)
    first: dict[str, str] = {}
    for w, m, s, _seed in smoke.grid():
        first.setdefault(smoke.tuning_key(w, m), s)
    for key, t in targets.items():
        if t.objective.metric == "time_to_target_s":
            assert t.scenario == t.objective.scenario, key
        else:
            assert t.scenario == first[key], key
    # An experiment that runs dense_bsp first under slow_100m: dc2_vs_none still judges its time
    # under dc_cross_high, where it is tuned.
    early = {"methods": ["dense_bsp"], "workloads": ["digits_mlp"], "scenarios": ["slow_100m"]}
    user = {"tier": "smoke", "experiments": {"aaa_first": early}}
    dense = tuning_targets(load_experiment(user, REPO / "config"))["digits_mlp/dense_bsp"]
    assert dense.scenario == "dc_cross_high"
    assert dense.objective.claim == "dc2/dc2_vs_none" and dense.objective.role == "comparator"


def test_each_key_is_tuned_for_the_metric_of_the_claims_that_judge_it(smoke):
    targets = tuning_targets(smoke)
    metric = {k: t.objective.metric for k, t in targets.items()}
    assert metric["digits_mlp/dfs"] == "time_to_target_s"  # dfs_training_time's method
    assert metric["digits_mlp/omnireduce"] == "bytes_to_target"  # dfs_vs_omnireduce's comparator
    assert metric["digits_mlp/ssp_2"] == "time_to_target_s"  # pcp_vs_ssp's comparator family
    # A traffic claim on a fixed budget, or no claim at all: the final accuracy.
    assert metric["rcv1_logreg/partition_only"] == "final_test_accuracy"
    assert metric["digits_mlp_pf/ratatouille_async"] == "final_test_accuracy"
    assert targets["rcv1_logreg/dense_bsp"].objective.claim == ""
    # The method or named-comparator role decides before a robustness role.
    omni = targets["digits_mlp/omnireduce"].objective
    assert omni.role == "comparator" and "dfs_training_time (robustness" in " ".join(omni.serves)


def test_only_barrier_recipes_with_a_static_controller_are_scenario_free(smoke):
    free = {m: scenario_free(r) for m, r in smoke.recipes.items()}
    assert free["dense_bsp"] and free["dfs"] and free["topk_ef"] and free["ratatouille"]
    assert not any(free[m] for m in ("dc2_topk", "dense_asp", "ssp_2", "pcp"))


def test_the_fingerprint_follows_what_training_depends_on(smoke):
    t = tuning_targets(smoke)["digits_mlp_pf/dense_bsp"]  # scenario-free, tuned on accuracy
    assert t.objective.metric == "final_test_accuracy"
    fp = lambda spec, tuning=smoke.tuning: fingerprint(spec, tuning, True)  # noqa: E731
    spec = t.spec
    assert fp(spec) == t.fingerprint
    wl = spec.workload
    changed = [
        dataclasses.replace(spec, workload=dataclasses.replace(wl, lr=wl.lr * 2)),
        dataclasses.replace(spec, workload=dataclasses.replace(wl, iterations=wl.iterations + 1)),
        dataclasses.replace(spec, workers=spec.workers + 1),
        dataclasses.replace(spec, seed=spec.seed + 1),
        # The profile the clock charges counts ...
        dataclasses.replace(spec, compute=dataclasses.replace(spec.compute, cost_profile="v100")),
    ]
    assert len({fp(s) for s in changed} | {t.fingerprint}) == len(changed) + 1
    assert fp(spec, dataclasses.replace(smoke.tuning, lr_factors=(0.5, 1.0))) != t.fingerprint
    margin = dataclasses.replace(smoke.tuning, accuracy_margin=0.02)
    assert fp(spec, margin) != t.fingerprint
    # Names, descriptions, checkpoints and (for a scenario-free recipe) the scenario do not count.
    same = [
        dataclasses.replace(spec, run_id="x", checkpoint_every=5),
        dataclasses.replace(spec, torch_device="cuda"),  # ... where the arithmetic runs does not
        dataclasses.replace(spec, method=dataclasses.replace(spec.method, description="new")),
        dataclasses.replace(spec, scenario=smoke.scenarios["slow_100m"]),
        dataclasses.replace(spec, compute=smoke.compute_for("hetero_dc")),
        dataclasses.replace(smoke.run("digits_mlp_pf", "dense_bsp", "dc_10g", 1000)),
    ]
    assert {fp(s) for s in same} == {t.fingerprint}
    targets = tuning_targets(smoke)
    dc2 = targets["digits_mlp/dc2_topk"]
    other = dataclasses.replace(dc2.spec, scenario=smoke.scenarios["slow_100m"])
    assert fingerprint(other, smoke.tuning, False, dc2.objective) != dc2.fingerprint
    # A scenario-free recipe tuned for a time keeps its scenario: the link sets the time.
    timed = targets["digits_mlp/dense_bsp"]
    assert timed.scenario_free and timed.objective.metric == "time_to_target_s"
    moved = dataclasses.replace(timed.spec, scenario=smoke.scenarios["slow_100m"])
    assert fingerprint(moved, smoke.tuning, True, timed.objective) != timed.fingerprint
    # ... and a new objective makes the entry stale.
    acc = dataclasses.replace(timed.objective, metric="final_test_accuracy", scenario=None)
    assert fingerprint(timed.spec, smoke.tuning, True, acc) != timed.fingerprint


def test_the_record_covers_what_matches_and_the_rest_is_pending(tier):
    smoke, config, targets = tier
    exp, res = with_operating_points(smoke, config)
    assert set(res.points) == {"digits_mlp/dense_bsp", "digits_mlp_pf/ratatouille_async"}
    assert set(res.pending) == set(targets) - set(res.points)
    assert all(why == "missing from the record" for why in res.pending.values())
    run = exp.run("digits_mlp", "dense_bsp", "slow_100m", 0)
    assert (run.workload.lr, run.workload.warmup_iterations) == (0.2, 8)
    point = run.operating_point
    assert point.source == "record operating_points/smoke.yaml"
    assert point.tuned_as == "digits_mlp/dense_bsp"
    assert point.fingerprint == tuning_targets(smoke)["digits_mlp/dense_bsp"].fingerprint
    # The derived recipe gets its base's point; a run of a key without one stays declared.
    derived = exp.run("digits_mlp_pf", "ratatouille_async__t0p6", "dc_10g", 0)
    assert derived.operating_point.tuned_as == "digits_mlp_pf/ratatouille_async"
    assert exp.run("digits_mlp", "dfs", "slow_100m", 0).operating_point is None
    with pytest.raises(ConfigError, match=r"no operating point for digits_mlp/dfs \(missing"):
        require_point(exp, res, "digits_mlp", "dfs")


def test_a_stale_entry_is_detected(tier, tmp_path):
    """Change the settings an entry was tuned for (the workload's lr): its key is pending."""
    smoke, config, _ = tier
    user = {"tier": "smoke", "workloads": {"digits_mlp": {"lr": 0.05}}}
    changed = load_experiment(user, REPO / "config")
    res = resolve(changed, record_path(config, "smoke"))
    assert res.pending["digits_mlp/dense_bsp"].startswith("stale")
    assert "digits_mlp_pf/ratatouille_async" in res.points  # another workload: still current
    forced = dataclasses.replace(smoke, tuning=TuningSpec(use_record=False))
    assert not resolve(forced, record_path(config, "smoke")).points


def test_the_committed_smoke_record_is_current(smoke):
    """The smoke tier must not tune in CI: its record matches every key of the tier."""
    res = resolve(smoke, record_path(REPO / "config", "smoke"))
    assert not res.pending, res.pending


def test_a_check_seed_cannot_be_a_verdict_seed():
    """The check seeds follow the tuning seed; none may judge a claim."""
    with pytest.raises(ConfigError, match=r"key 'tuning.check_seeds': check seed 1002 "):
        load_experiment({"tier": "smoke", "seeds": [0, 1002]}, REPO / "config")
    load_experiment({"tier": "smoke", "seeds": [0, 1002], "tuning": {"check_seeds": 1}},
                    REPO / "config")  # fmt: skip


def test_the_tuning_seed_cannot_be_a_verdict_seed():
    with pytest.raises(ConfigError, match=r"key 'tuning.seed': 1000 is a verdict seed"):
        load_experiment({"tier": "smoke", "seeds": [0, 1000]}, REPO / "config")
    user = {"tier": "small", "tuning": {"seed": 0}}
    with pytest.raises(ConfigError, match=r"key 'tuning.seed': 0 is a verdict seed .*'seeds'"):
        load_experiment(user, REPO / "config")
    # An experiment's own seeds count too; a tier that does not tune may use any seed.
    user = {"tier": "small", "tuning": {"seed": 7}, "experiments": {"pcp": {"seeds": [7]}}}
    with pytest.raises(ConfigError, match=r"experiments.pcp.seeds"):
        load_experiment(user, REPO / "config")
    load_experiment({"tier": "smoke", "tuning": {"seed": 0, "enabled": False}}, REPO / "config")


def test_a_bad_record_is_one_line_naming_the_key(tier):
    smoke, config, _ = tier
    path = record_path(config, "smoke")
    data = yaml.safe_load(path.read_text())
    bad = copy.deepcopy(data)
    bad["entries"]["digits_mlp/dense_bsp"]["chosen"]["lr"] = -1
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(ConfigError) as err:
        read_record(path)
    assert "entries.digits_mlp/dense_bsp.chosen.lr" in str(err.value)
    assert "\n" not in str(err.value)


def test_train_by_name_uses_a_finished_tune_job_where_the_record_has_none(
    tier, tmp_path, monkeypatch
):
    smoke, config, targets = tier
    monkeypatch.chdir(tmp_path)
    job = Path("results/smoke/tune/digits_mlp/dfs.json")
    job.parent.mkdir(parents=True)
    job.write_text(json.dumps(_entry(targets["digits_mlp/dfs"], lr=0.05, momentum=0.0)))
    exp, res = with_operating_points(smoke, config, tune_jobs=True)
    point = exp.run("digits_mlp", "dfs", "slow_100m", 0).operating_point
    assert point.source == f"tune job {job}" and point.lr == 0.05 and point.momentum == 0.0
    assert "digits_mlp/dfs" not in res.pending
