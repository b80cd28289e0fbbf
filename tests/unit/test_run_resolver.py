"""From a run's name to the run: the resolver gives the workflow's spec and files."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from psml_core.errors import DataError
from psml_core.recipes import load_experiment
from psml_core.run_resolver import ResolvedRun, resolve_run, resolve_spec, workflow_files
from psml_core.tuning.record import with_operating_points

REPO = Path(__file__).resolve().parents[2]
CAL = "ratatouille.theta0"
RUN = ("digits_mlp_pf", "ratatouille_async__t0p6", "dc_10g", 0)
SWEEP = {
    "method": "ratatouille_async",
    "params": ["codec.params.theta0"],
    "values": [0.2, 0.6],
    "labels": ["t0p2", "t0p6"],
    "calibration": CAL,
}
USER = {  # the smoke tier with one calibrated sweep only (as tests/unit/test_calibration.py)
    "tier": "smoke",
    "experiments": {
        "pf_theta": {"methods": ["dense_asp"], "sweep": SWEEP},
        **dict.fromkeys(("jpdc", "dfs", "ratatouille", "dc2", "pcp", "overview")),
    },
}


def _prepare(path: Path) -> None:
    (path / "manifest.json").parent.mkdir(parents=True, exist_ok=True)
    (path / "manifest.json").write_text("{}")


def test_a_calibrated_cell_resolves_to_the_workflows_spec_and_files(
    tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    exp = with_operating_points(load_experiment(USER, REPO / "config"), REPO / "config")[0]
    declared = exp.run(*RUN)
    own = workflow_files(exp, declared)
    _prepare(own.data)
    user = USER
    with pytest.raises(DataError, match=f"calibration {CAL!r}, which is not fitted yet"):
        resolve_run(user, *RUN, config_dir=REPO / "config")
    cal = tmp_path / "results" / "smoke" / "calibration" / f"{CAL}.json"
    cal.parent.mkdir(parents=True)
    cal.write_text(json.dumps({"key": CAL, "factor": 0.1}))
    run = resolve_run(user, *RUN, config_dir=REPO / "config")
    assert (run.data, run.out) == (
        Path("data/smoke/digits"),
        Path(f"results/smoke/runs/{'/'.join(RUN[:3])}/seed0"),
    )
    assert run.partition is None and "does not exist" in capsys.readouterr().err
    assert run.calibration == Path("results/smoke/calibration") / f"{CAL}.json"
    assert run.spec.method.calibrated["factor"] == 0.1
    assert run.spec.run_id == declared.run_id and run.point is not None
    assert run.point == exp.operating_points[exp.tuning_key(*RUN[:2])]
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.out = Path("elsewhere")  # type: ignore[misc]
    # The workflow's placement where it exists; given files win.
    own.partition.parent.mkdir(parents=True)
    own.partition.write_bytes(b"")
    assert resolve_run(user, *RUN, config_dir=REPO / "config").partition == own.partition
    given = resolve_run(user, *RUN, config_dir=REPO / "config", data="d", out="o", partition="p")
    assert (given.data, given.out, given.partition) == (Path("d"), Path("o"), Path("p"))


def test_a_hashing_recipe_reads_its_seeds_hashed_data(smoke) -> None:
    w, m, s, seed = next(c for c in smoke.grid() if smoke.recipes[c[1]].hashing)
    spec = smoke.run(w, m, s, seed)
    key = spec.method.hashing.key
    assert workflow_files(smoke, spec).data == Path(
        f"data/smoke/hashed/{spec.dataset.name}/{key}/seed{seed}"
    )


def test_a_spec_given_as_json_keeps_its_files(smoke, tmp_path) -> None:
    spec = smoke.run("digits_mlp", "dense_bsp", "dc_10g", 0)
    got = resolve_spec(spec, data=tmp_path / "d", out="o")
    assert got == ResolvedRun(spec=spec, data=tmp_path / "d", partition=None, out=Path("o"))
    assert got.summary == Path("o/summary.json") and got.metrics == Path("o/metrics.parquet")
