"""A recipe's free parameter (its ``tune`` block): validated, swept first, carried by the point."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from psml_core.config import OperatingPoint
from psml_core.config.specs import BlockSpec, FreeParameter, MethodRecipe
from psml_core.errors import ConfigError
from psml_core.recipes import check_recipe, load_experiment
from psml_core.tuning import sweep
from psml_core.tuning.record import check_entry, entry_point
from psml_core.tuning.sweep import candidate_spec, free_values, tune
from psml_core.tuning.targets import fingerprint, tuning_targets

REPO = Path(__file__).resolve().parents[3]
RATIO = "codec.params.ratio"


def _with_free(recipe: MethodRecipe, values=(0.01, 0.1)) -> MethodRecipe:
    return dataclasses.replace(recipe, tune=FreeParameter((RATIO,), tuple(values), "a test"))


def test_the_declared_value_must_be_one_of_the_values(smoke):
    topk = smoke.recipes["topk_ef"]  # codec.params.ratio: 0.01
    assert _with_free(topk).tune is not None
    check_recipe(_with_free(topk), "methods.yaml")
    with pytest.raises(ConfigError, match=r"key 'topk_ef.tune': .*one of tune.values"):
        check_recipe(_with_free(topk, (0.1, 0.3)), "methods.yaml")
    with pytest.raises(ConfigError, match=r"must be set"):
        check_recipe(
            dataclasses.replace(topk, tune=FreeParameter(("codec.params.nope",), (1, 2))), "m"
        )
    # A broken block is named as such first, not as a missing free-parameter value.
    broken = dataclasses.replace(
        smoke.recipes["omnireduce"], codec=BlockSpec("topk", {"ratio": 0.0})
    )
    with pytest.raises(ConfigError, match=r"key 'omnireduce.codec.params':"):
        check_recipe(broken, "methods.yaml")


def test_a_point_sets_the_recipes_free_parameter_in_the_run(smoke):
    spec = smoke.run("digits_mlp", "topk_ef", "dc_10g", 0)
    point = OperatingPoint(0.2, 0.9, 0, "server", "digits_mlp/topk_ef", "0" * 64, "test",
                           params={RATIO: 0.1})  # fmt: skip
    run = spec.at_point(point)
    assert run.method.codec.params["ratio"] == 0.1 and run.workload.lr == 0.2
    assert spec.method.codec.params["ratio"] == 0.01  # the declared recipe is untouched
    assert run.config_hash() != spec.at_point(dataclasses.replace(point, params={})).config_hash()
    # A record entry's chosen params become the point's.
    entry = {"workload": "w", "method": "m", "fingerprint": "0" * 64,
             "chosen": {"lr": 0.2, "momentum": 0.9, "momentum_handling": "server",
                        "warmup_iterations": 0, "params": {RATIO: 0.1}, "why": "x"}}  # fmt: skip
    assert entry_point(entry, "record x").params == {RATIO: 0.1}


def test_the_free_parameter_is_part_of_the_fingerprint(smoke):
    t = tuning_targets(smoke)["digits_mlp/topk_ef"]
    other = dataclasses.replace(t.spec, method=_with_free(t.spec.method))
    assert fingerprint(other, smoke.tuning, t.scenario_free, t.objective) != t.fingerprint


def test_stage_0_tries_each_value_and_stage_1_continues_from_its_choice(
    smoke, prepared, tmp_path, monkeypatch
):
    t = tuning_targets(smoke)["digits_mlp/topk_ef"]
    wl = dataclasses.replace(t.spec.workload, iterations=8, eval_every=4)
    spec = dataclasses.replace(t.spec, workload=wl, method=_with_free(t.spec.method))
    assert free_values(spec) == [{RATIO: 0.01}, {RATIO: 0.1}]
    target = dataclasses.replace(
        t, spec=spec, fingerprint=fingerprint(spec, smoke.tuning, t.scenario_free, t.objective)
    )
    entry = check_entry(tune(target, smoke.tuning, prepared["digits"], tmp_path, print), "test")
    cands = entry["candidates"]
    stage0 = [c for c in cands if c["stage"] == 0]
    assert [c["params"][RATIO] for c in stage0] == [0.01, 0.1]
    assert [c["declared"] for c in stage0] == [True, False]
    stage1 = [c for c in cands if c["stage"] == 1]
    # Stage 1 runs at stage 0's choice, and reuses stage 0's run at lr factor 1 with the
    # declared momentum (a run is deterministic: not run twice): 3 x 2 - 1 candidates.
    assert len({c["params"][RATIO] for c in stage1}) == 1 and len(stage1) == 5
    assert not any(c["lr_factor"] == 1.0 and c["momentum"] == 0.9 for c in stage1)
    # 8 candidates, and the chosen one again at each of the 3 check seeds (none diverges).
    assert len(cands) == 2 + 5 + 1 and len(list(tmp_path.glob("*/summary.json"))) == 8 + 3
    assert entry["chosen"]["params"] in [c["params"] for c in cands]
    assert entry["objective"]["metric"] == t.objective.metric
    checked = [c for c in cands if c["checks"]]
    assert len(checked) == 1 and [r["seed"] for r in checked[0]["checks"]] == [1001, 1002, 1003]
    assert "held at check seeds 1001, 1002, 1003" in entry["chosen"]["why"]

    # A second sweep in the same directory reads every finished run back: nothing trains.
    def no_training(*_a, **_k):
        raise AssertionError("a finished candidate was trained again")

    monkeypatch.setattr(sweep, "train", no_training)
    again = tune(target, smoke.tuning, prepared["digits"], tmp_path, print)
    strip = ("wall_clock_s",)
    assert [{k: v for k, v in c.items() if k not in strip} for c in again["candidates"]] == [
        {k: v for k, v in c.items() if k not in strip} for c in cands
    ]


def test_candidate_run_ids_name_the_free_parameter(smoke):
    spec = tuning_targets(smoke)["digits_mlp/topk_ef"].spec
    run = candidate_spec(spec, "k", 2.0, 0.0, 4, {RATIO: 0.1})
    assert run.run_id == "tune/k/lr2x_m0_w4_ratio0.1" and run.method.codec.params["ratio"] == 0.1


def test_a_sweep_may_not_set_a_path_the_tuning_chooses(tmp_path):
    methods = (REPO / "config" / "methods.yaml").read_text()
    methods += (
        "\ntuned_topk:\n  description: t\n  codec: {name: topk, params: {ratio: 0.01, "
        "error_feedback: true}}\n  pull: aggregate\n  sync: {name: bsp}\n  controller: {name: "
        "static}\n  placement: {name: range}\n  tune: {params: [codec.params.ratio], values: "
        "[0.01, 0.1]}\n"
    )
    config = tmp_path / "config"
    (config / "tiers").mkdir(parents=True)
    for part in ("tiers/smoke.yaml", "config.yaml"):
        (config / part).write_text((REPO / "config" / part).read_text())
    (config / "papers").symlink_to(REPO / "config" / "papers")
    (config / "devices").symlink_to(REPO / "config" / "devices")
    (config / "methods.yaml").write_text(methods)
    sweep = {"method": "tuned_topk", "params": ["codec.params.ratio"], "values": [0.3]}
    user = {"tier": "smoke", "experiments": {"s": {"methods": ["dense_bsp"], "sweep": sweep,
            "workloads": ["digits_mlp"], "scenarios": ["dc_10g"]}}}  # fmt: skip
    with pytest.raises(ConfigError, match=r"chooses codec.params.ratio on the tuning seed"):
        load_experiment(user, config)


def test_every_comparator_with_a_free_setting_gets_it_from_the_tuning_seed(smoke):
    """OmniReduce's and top-k + OmniReduce's block size, uniform ratios: tuned, not fixed."""
    from psml_core.config import parse_methods

    recipes = parse_methods(REPO / "config" / "methods.yaml")
    expect = {
        "omnireduce": "codec.params.block_size",
        "topk_omnireduce": "codec.params.block_size",
        "uniform_topk": "controller.params.ratio",
        "uniform_randomk": "controller.params.ratio",
        "uniform_dgc": "controller.params.ratio",
        "dc2_topk": "controller.params.kappa",
    }
    for name, path in expect.items():
        free = recipes[name].tune
        assert free is not None and free.params == (path,) and len(free.values) >= 3, name
    # No fixed-ratio family is left to be picked among on the verdict seeds.
    assert not [n for n in recipes if n.startswith("uniform_") and "_r0p" in n]
    # DFS's own block sizes are among top-k + OmniReduce's.
    assert {2, 4, 8} <= set(recipes["topk_omnireduce"].tune.values)
    uses = {u.claim: u for u in smoke.claims}
    assert uses["dc2_vs_uniform"].comparators == ("uniform_topk",)


def test_a_choice_that_diverges_at_a_check_seed_is_passed_over(smoke, prepared, tmp_path,
                                                              monkeypatch):  # fmt: skip
    """The fastest candidate diverges at the second check seed: the rule chooses again."""
    t = tuning_targets(smoke)["digits_mlp/dense_bsp"]
    target = dataclasses.replace(
        t, objective=dataclasses.replace(t.objective, metric="time_to_target_s")
    )

    def fake(spec, declared, stage, factor, params, data_dir, out, tuning, classes):
        edge = factor == 2.0 and spec.seed == tuning.seed + 2
        wl, base = spec.workload, declared.workload
        return sweep.Candidate(
            stage=stage, lr_factor=factor, lr=wl.lr, momentum=wl.momentum,
            momentum_handling=sweep.handling(spec, wl.momentum),
            warmup_iterations=wl.warmup_iterations, final_accuracy=None if edge else 0.95,
            evaluations=() if edge else (0.95,), samples_to_target=None,
            diverged="loss non-finite" if edge else None,
            declared=(factor, wl.momentum, wl.warmup_iterations)
            == (1.0, base.momentum, base.warmup_iterations),
            time_to_target_s=None if edge else 10.0 / factor + wl.warmup_iterations,
            declared_momentum=wl.momentum == base.momentum,
            declared_warmup=wl.warmup_iterations == base.warmup_iterations,
        )  # fmt: skip

    monkeypatch.setattr(sweep, "_run", fake)
    lines: list[str] = []
    entry = check_entry(tune(target, smoke.tuning, prepared["digits"], tmp_path, lines.append),
                        "test")  # fmt: skip
    assert entry["chosen"]["lr"] == pytest.approx(t.spec.workload.lr)  # factor 1, next fastest
    unstable = [c for c in entry["candidates"] if c["unstable"]]
    assert {c["lr_factor"] for c in unstable} == {2.0}  # both momentum settings of lr 2x
    for c in unstable:
        assert [r["seed"] for r in c["checks"]] == [1001, 1002]  # it stops at the divergence
        assert "check seed 1002" in c["unstable"]
    assert f"{len(unstable)} candidate(s) passed over" in entry["chosen"]["why"]
    assert any("passed over" in line for line in lines)
