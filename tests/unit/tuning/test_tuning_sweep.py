"""A target's sweep end to end (tiny runs), `psml tune`, and why a scenario may be left out."""

from __future__ import annotations

import dataclasses
import json

import pytest

from psml_core.cli import main
from psml_core.data.store import load_prepared
from psml_core.engine import SimBackend, staged_job
from psml_core.tuning.record import check_entry
from psml_core.tuning.sweep import stage1_grid, tune
from psml_core.tuning.targets import TuneTarget, fingerprint, tuning_targets


def _small(target: TuneTarget, tuning, iterations: int, eval_every: int) -> TuneTarget:
    """The target cut to a few iterations (its fingerprint follows)."""
    wl = dataclasses.replace(target.spec.workload, iterations=iterations, eval_every=eval_every)
    spec = dataclasses.replace(target.spec, workload=wl)
    fp = fingerprint(spec, tuning, target.scenario_free, target.objective)
    return dataclasses.replace(target, spec=spec, fingerprint=fp)


def test_a_momentum_correction_recipe_tunes_within_its_own_mechanism(smoke, prepared, tmp_path):
    target = _small(tuning_targets(smoke)["digits_mlp/topk_mc"], smoke.tuning, 12, 4)
    lines: list[str] = []
    entry = check_entry(
        tune(target, smoke.tuning, prepared["digits"], tmp_path, lines.append), "test"
    )
    cands = entry["candidates"]
    # No free parameter: stage 0 is the declared point alone, which stage 1 reuses.
    assert [c["stage"] for c in cands] == [0] + [1] * 5 + [2]
    assert {c["momentum_handling"] for c in cands[:6]} == {"correction", "none"}
    assert sorted({c["lr_factor"] for c in cands}) == [0.5, 1.0, 2.0]
    assert [c["declared"] for c in cands].count(True) == 1 and cands[0]["declared"]
    assert cands[6]["warmup_iterations"] == 2  # 10% of 12 iterations, but at least 2
    assert entry["fingerprint"] == target.fingerprint and entry["scenario_free"]
    chosen = entry["chosen"]
    assert any(
        all(c[k] == chosen[k] for k in ("lr", "momentum", "warmup_iterations")) for c in cands
    )
    # 7 candidates, the chosen one at the 3 check seeds (none diverged), the choice.
    assert len(lines) == 11 and lines[-1].startswith("tune digits_mlp/topk_mc: chose")
    assert sum("(check seed" in line for line in lines) == 3
    assert len(list(tmp_path.glob("*/summary.json"))) == 7 + 3  # full runs: candidates, checks


def test_a_candidate_that_blows_up_diverged_and_is_never_chosen(
    smoke, prepared, tmp_path, monkeypatch
):
    """A candidate whose values become NaN, so that a codec refuses them, stops: it is
    recorded as diverged with no accuracy, the sweep goes on, and the rule picks another."""
    import psml_core.tuning.sweep as sweep

    target = _small(tuning_targets(smoke)["rcv1_logreg/dense_bsp"], smoke.tuning, 4, 2)
    real = sweep.train

    def blows_up_at_twice_the_lr(spec, *args, **kwargs):
        if spec.workload.lr > target.spec.workload.lr:
            raise ValueError("cannot encode a non-finite value (nan at index 3)")
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(sweep, "train", blows_up_at_twice_the_lr)
    entry = check_entry(tune(target, smoke.tuning, prepared["zipf_rcv1"], tmp_path), "test")
    blown = [c for c in entry["candidates"] if c["lr_factor"] == 2.0]
    assert len(blown) == 1 and blown[0]["final_accuracy"] is None
    assert blown[0]["diverged"].startswith("loss non-finite: the run stopped")
    assert entry["chosen"]["lr"] != blown[0]["lr"]


def test_adagrad_tunes_the_learning_rate_and_warmup_only(smoke):
    spec = tuning_targets(smoke)["rcv1_logreg/jpdc"].spec
    assert stage1_grid(spec, smoke.tuning) == [(1.0, 0.0), (0.5, 0.0), (2.0, 0.0)]
    plain = tuning_targets(smoke)["digits_mlp/topk_ef"].spec  # EF stays EF: server momentum
    assert stage1_grid(plain, smoke.tuning)[:2] == [(1.0, 0.9), (1.0, 0.0)]


def _tune_spec(target, tuning) -> str:
    """What the workflow's tune_spec rule writes (workflow/rules/tune.smk)."""
    return json.dumps({
        "key": target.key, "scenario": target.scenario, "scenario_free": target.scenario_free,
        "fingerprint": target.fingerprint, "objective": dataclasses.asdict(target.objective),
        "tuning": dataclasses.asdict(tuning),
        "run": target.spec.to_dict(),
    })  # fmt: skip


def test_the_tune_command_writes_a_valid_entry(smoke, prepared, tmp_path, capsys):
    target = _small(tuning_targets(smoke)["rcv1_logreg/dense_bsp"], smoke.tuning, 6, 3)
    spec = tmp_path / "spec.json"
    spec.write_text(_tune_spec(target, smoke.tuning))
    out = tmp_path / "tune" / "rcv1_logreg" / "dense_bsp.json"
    args = ["tune", "--spec", str(spec), "--data", str(prepared["zipf_rcv1"]), "--out", str(out)]
    assert main(args) == 0
    entry = check_entry(json.loads(out.read_text()), "test")
    assert len(entry["candidates"]) == 4  # three lr, then the warm-up
    assert {c["momentum_handling"] for c in entry["candidates"]} == {"n/a"}
    assert len(list((out.parent / "dense_bsp").glob("*/metrics.parquet"))) == 4 + 3  # checks
    # A spec whose fingerprint is not this psml's (another version) is refused in one line.
    spec.write_text(_tune_spec(dataclasses.replace(target, fingerprint="0" * 64), smoke.tuning))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "its fingerprint is not this psml's" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        ([], "needs --spec, --data and --out, or --record"),
        (["--record", "--spec", "s"], "not both"),
        (["--record", "--tier", "smoke", "--only", "nope/x"], "--only nope/x: not a key"),
    ],
)
def test_tune_usage_errors_are_one_line(argv, fragment, capsys):
    assert main(["tune", *argv]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1


def _trace(spec, prepared):
    job = staged_job(spec, load_prepared(prepared[spec.dataset.name]))
    return [(r.iteration, r.worker, r.loss, r.test_accuracy) for r in SimBackend().run(job)]


def test_a_scenario_free_recipe_trains_alike_under_every_scenario(smoke, prepared):
    """Why a barrier recipe's fingerprint leaves the scenario out: the same losses and
    accuracies bit for bit under a fast, a slow, a heterogeneous and a cross-traffic link;
    an asynchronous recipe's differ."""

    def run(method, scenario):
        spec = smoke.run("digits_mlp", method, scenario, 0)
        wl = dataclasses.replace(spec.workload, iterations=6, eval_every=3)
        spec = dataclasses.replace(spec, workload=wl, compute=smoke.compute_for(scenario))
        return _trace(spec, prepared)

    scenarios = ("dc_10g", "hetero_dc", "dc_cross_high")
    for method in ("dfs", "topk_ef"):
        traces = [run(method, s) for s in scenarios]
        assert traces[0] == traces[1] == traces[2], method
    assert run("dense_asp", "dc_10g") != run("dense_asp", "hetero_dc")
