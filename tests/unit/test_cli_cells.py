"""`psml train` by name, `psml runs`, `psml show`: one cell of a tier, as the workflow runs it."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import pytest

from psml_core.cli import main
from psml_core.config import Experiment
from psml_core.run_resolver import data_path, run_path, workflow_files
from psml_core.tuning.record import with_operating_points

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "workflow" / "rules"
CONFIG = ["--configfile", str(REPO / "config/config.yaml"), "--config-dir", str(REPO / "config")]
SMOKE = [*CONFIG, "--tier", "smoke"]


def _workflow_helpers(exp: Experiment) -> dict:
    """The workflow's own helpers of common.smk (run_json, run_data, ...), bound to ``exp``."""
    text = (RULES / "common.smk").read_text(encoding="utf-8")
    ns: dict = {"EXP": exp, "TIER": exp.tier, "SCENARIOS": sorted(exp.scenarios)}
    ns.update(json=json, Path=Path, asdict=asdict, data_path=data_path, run_path=run_path)
    for name in ("dataset_of", "prepared", "data_files", "run_data", "run_json", "run_dir"):
        found = re.search(rf"^def {name}\(.*?(?=^\S)", text, flags=re.M | re.S)
        assert found, f"common.smk has no {name}()"
        exec(found.group(0), ns)  # noqa: S102 - the workflow's own source
    return ns


def _by_name(workload: str, method: str, scenario: str, seed: int) -> list[str]:
    return ["--workload", workload, "--method", method, "--scenario", scenario, "--seed", str(seed)]


def test_typed_spec_and_paths_are_the_workflows(smoke, tmp_path, monkeypatch, capsys):
    """Every smoke cell by name: the spec file's line and the train rule's paths."""
    import psml_core.engine.training as training

    # The workflow's experiment is at the record's operating points (common.smk).
    wf = _workflow_helpers(with_operating_points(smoke, REPO / "config")[0])
    train_smk = (RULES / "train.smk").read_text(encoding="utf-8")
    assert "partition=partition_of," in train_smk
    assert 'metrics=f"{RUN_WILDCARDS}/metrics.parquet"' in train_smk
    calls: list[tuple] = []

    def fake_train(spec, data, out, assignment_path=None):
        calls.append((spec, data, out, assignment_path))
        return {"final_test_accuracy": 0.5, "total_time_s": 1.0, "clock": "simulated",
                "bytes_up": 1, "bytes_down": 2}  # fmt: skip

    monkeypatch.setattr(training, "train", fake_train)
    monkeypatch.chdir(tmp_path)
    grid = smoke.grid()
    assert len(grid) > 10
    cells = [
        SimpleNamespace(workload=w, method=m, scenario=s, seed=str(seed)) for w, m, s, seed in grid
    ]
    for wc in cells:  # the prepared (or hashed) data sets the workflow would have written
        manifest = Path(wf["run_data"](wc)["manifest"])
        manifest.parent.mkdir(parents=True, exist_ok=True)
        manifest.write_text("{}")
    for (w, m, s, seed), wc in zip(grid, cells, strict=True):
        assert main(["train", *_by_name(w, m, s, seed), *SMOKE]) == 0
        spec, data, out, partition = calls.pop()
        # Byte for byte the spec file the workflow writes (with a final newline).
        assert f"{spec.to_json()}\n" == f"{wf['run_json'](wc)}\n"
        assert spec.operating_point.source == "record operating_points/smoke.yaml"
        assert spec.run_id == smoke.run_id(w, m, s, seed)
        assert Path(data) == Path(wf["run_data"](wc)["manifest"]).parent
        assert Path(out) == Path(wf["run_dir"](spec))
        assert partition is None  # no placement written yet: training computes it
    assert capsys.readouterr().out.count("\n") == len(grid)
    # The workflow's placement where it exists; explicit flags win.
    w, m, s, seed = grid[0]
    part = workflow_files(smoke, smoke.run(w, m, s, seed)).partition
    part.parent.mkdir(parents=True)
    part.write_bytes(b"")
    assert main(["train", *_by_name(w, m, s, seed), *SMOKE]) == 0
    dataset = smoke.run(w, m, s, seed).dataset.name
    assert tuple(map(str, calls.pop()[1:])) == (
        f"data/smoke/{dataset}",
        f"results/smoke/runs/{w}/{m}/{s}/seed{seed}",
        str(part),
    )
    argv = ["--data", "d", "--out", "o", "--partition", "p"]
    assert main(["train", *_by_name(w, m, s, seed), *SMOKE, *argv]) == 0
    assert tuple(map(str, calls.pop()[1:])) == ("d", "o", "p")


@pytest.mark.parametrize(
    ("cell", "fragments"),
    [
        (("nope", "dense_bsp", "dc_10g", 0), ["--workload 'nope'", "digits_mlp", "rcv1_logreg"]),
        (("digits_mlp", "nope", "dc_10g", 0), ["--method 'nope'", "dense_bsp", "jpdc", "topk_ef"]),
        (("digits_mlp", "dense_bsp", "nope", 0), ["--scenario 'nope'", "dc_10g", "slow_100m"]),
        (("digits_mlp", "dense_bsp", "dc_10g", 7), ["--seed 7", "seeds: 0"]),
        # A misspelt name suggests the close one; a method of another tier names that tier.
        (("digits_mlp", "tpok_ef", "dc_10g", 0), ["--method 'tpok_ef'", "did you mean 'topk_ef'?"]),
        (("digits_mlp", "dc2_dgc", "dc_10g", 0), ["it runs in tier small (add --tier small)"]),
        # Known names, but the tier runs jpdc on rcv1_logreg only.
        (
            ("digits_mlp", "jpdc", "dc_10g", 0),
            ["no run digits_mlp/jpdc/dc_10g/seed0", "rcv1_logreg/jpdc/dc_10g/seed0"],
        ),  # fmt: skip
    ],
)
def test_unknown_cell_is_one_line_naming_the_field(cell, fragments, tmp_path, capsys):
    out = tmp_path / "never"
    assert main(["train", *_by_name(*cell), *SMOKE, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and err.startswith("psml train: error: ")
    for fragment in fragments:
        assert fragment in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        ([], "give the run as --workload, --method, --scenario and --seed"),
        (["--workload", "digits_mlp"], "missing --method, --scenario, --seed"),
        (["--run", "{}", "--seed", "0", "--data", "d", "--out", "o"], "not both"),
        (["--run", "{}"], "--run needs --data and --out"),
        (["--run", "{}", "--tier", "smoke", "--data", "d", "--out", "o"], "--tier (a run by name)"),
    ],
)
def test_run_and_names_are_exclusive_and_one_is_needed(argv, fragment, capsys):
    # The config flags select a cell by name too, so with --run they count as names.
    assert main(["train", *argv, *([] if "--run" in argv else SMOKE)]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and fragment in err


def test_missing_data_names_how_to_prepare_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["train", *_by_name("digits_mlp", "dense_bsp", "dc_10g", 0), *SMOKE]) == 3
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0
    assert "data/smoke/digits: " in err and "snakemake" in err and "--data" in err


def test_runs_lists_every_cell_of_the_smoke_tier(smoke, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["runs", *SMOKE]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "RUN",
        "WORKLOAD",
        "METHOD",
        "SCENARIO",
        "SEED",
        "BACKEND",
        "RESULTS",
    ]
    rows = [line.split() for line in lines[1:]]
    want = [[smoke.run_id(*c), *map(str, c), smoke.backend, "no"] for c in smoke.grid()]
    assert rows == want
    starts = {tuple(m.start() for m in re.finditer(r"(?<=  )\S", line)) for line in lines}
    assert len(starts) == 1  # aligned columns


def test_config_takes_overrides_as_snakemake_does(tmp_path, monkeypatch, capsys):
    """--config KEY=VALUE ... is the same as one --set per pair."""
    monkeypatch.chdir(tmp_path)
    assert main(["runs", *CONFIG, "--set", "tier=paper", "--set", "seeds=[1]"]) == 0
    by_set = capsys.readouterr().out
    assert main(["runs", *CONFIG, "--config", "tier=paper", "seeds=[1]"]) == 0
    assert capsys.readouterr().out == by_set
    rows = by_set.splitlines()[1:]
    assert rows and all(row.split()[4] == "1" for row in rows)
    assert any(row.startswith("resnet18_cifar10/") for row in rows)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, prepared, smoke) -> tuple[Path, tuple[str, str, str, int]]:
    """One smoke cell trained by name (sim backend, seconds), in a workflow-like directory."""
    root = tmp_path_factory.mktemp("wf")
    cell = ("digits_mlp", "dense_bsp", "dc_10g", smoke.seeds[0])
    spec = smoke.run(*cell)
    shutil.copytree(prepared[spec.dataset.name], root / "data/smoke" / spec.dataset.name)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        assert main(["train", *_by_name(*cell), *SMOKE]) == 0
    return root, cell


def test_show_prints_a_trained_runs_summary(trained, smoke, monkeypatch, capsys):
    root, cell = trained
    monkeypatch.chdir(root)
    run_id = smoke.run_id(*cell)
    run_dir = Path("results/smoke/runs", run_id)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run_id"] == run_id and summary["clock"] == "simulated"
    capsys.readouterr()
    assert main(["runs", *SMOKE]) == 0
    done = [
        line.split()[0] for line in capsys.readouterr().out.splitlines() if line.endswith("yes")
    ]
    assert done == [run_id]
    for target in (run_id, str(run_dir), str(run_dir / "summary.json")):
        assert main(["show", target, *SMOKE]) == 0
        out = capsys.readouterr().out
        shown = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.splitlines())
        assert shown["run"] == run_id
        assert shown["final accuracy"] == f"{summary['final_test_accuracy']:.4f}"
        assert shown["simulated time"] == f"{summary['total_time_s']:.4g} s"
        to_target = shown["simulated time to target"]
        if summary["target_censored"]:
            assert to_target.startswith("not reached (accuracy")
        else:
            assert to_target.startswith(f"{summary['time_to_target_s']:.4g} s (accuracy")
        assert shown["bytes up / down"] == f"{summary['bytes_up']} B / {summary['bytes_down']} B"
        assert shown["iterations"] == str(summary["iterations"])
        assert str(run_dir / "metrics.parquet") in out and "wall-clock time" in shown


@pytest.mark.parametrize(
    ("target", "code", "fragment"),
    [
        ("digits_mlp/nope/dc_10g/seed0", 2, "`psml runs` lists the runs"),
        ("missing/summary.json", 2, "no such summary.json"),
        ("digits_mlp/dense_bsp/slow_100m/seed0", 3, "has no results yet; train it with `psml"),
    ],
)
def test_show_refuses_an_unknown_run(target, code, fragment, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["show", target, *SMOKE]) == code
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and fragment in err


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"time_to_target_s": 0.5, "target_accuracy": 0.85, "iteration_to_target": 19}, "0.5 s"),
        ({"time_to_target_s": 2.0, "target_accuracy": 0.85, "target_censored": True}, "not"),
        ({"time_to_target_s": None, "target_accuracy": None}, "not reached (no target"),
    ],
)
def test_show_says_when_the_target_was_reached_or_that_it_was_not(fields, said):
    from psml_core.run_cells import _to_target

    text = _to_target(fields)
    assert text.startswith(said)
    if fields.get("iteration_to_target"):
        assert "iteration 19" in text and "accuracy 0.85" in text
