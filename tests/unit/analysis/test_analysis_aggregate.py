"""Collecting run summaries into the runs table and aggregating it over seeds."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import pandas as pd
import pytest
import yaml

from psml_core.analysis import aggregate_runs, collect_runs, read_runs_csv, write_runs_csv
from psml_core.analysis.aggregate import (
    OPTIONAL_COLUMNS,
    PLACEMENT_COLUMNS,
    PROVENANCE_COLUMNS,
    SUMMARY_COLUMNS,
)
from psml_core.errors import DataError

REPO = Path(__file__).resolve().parents[3]
SCHEMA = yaml.safe_load((REPO / "workflow/schemas/summary.schema.yaml").read_text())


def summary(
    workload: str = "digits_mlp",
    method: str = "dense_bsp",
    scenario: str = "dc_10g",
    seed: int = 0,
    *,
    accuracy: float = 0.9,
    total_time: float = 1.5,
    time_to_target: float | None = 1.0,
    bytes_up: int = 1000,
) -> dict[str, Any]:
    """A summary.json conforming to workflow/schemas/summary.schema.yaml."""
    run_id = f"{workload}/{method}/{scenario}/seed{seed}"
    s = {
        "run_id": run_id, "tier": "smoke", "backend": "sim", "clock": "simulated", "seed": seed,
        "method": method, "workload": workload, "scenario": scenario, "dataset": "digits",
        "workers": 2, "shards": 2, "iterations": 10, "final_test_accuracy": accuracy,
        "final_test_loss": 0.3, "final_train_loss": 0.25, "target_accuracy": 0.85,
        "time_to_target_s": time_to_target, "total_time_s": total_time, "bytes_up": bytes_up,
        "bytes_down": 2 * bytes_up, "bytes_total": 3 * bytes_up, "remote_bytes_up": bytes_up // 2,
        "remote_bytes_down": bytes_up, "compute_s": 0.5, "comm_s": 0.7, "wait_s": 0.1,
        "codec_s": 0.05, "target_censored": time_to_target is None,
        "first_target_s": time_to_target,
        "bytes_to_target": None if time_to_target is None else bytes_up,
        "samples_to_target": None if time_to_target is None else 320,
        "samples_processed": 640,
        "provenance": {
            "config_hash": hashlib.sha256(run_id.encode()).hexdigest(),
            "git_commit": "abc123", "git_dirty": None,
            "versions": {"torch": "2.13.0", "python": "3.11.2"}, "backend": "sim", "seed": seed,
            "data_sha256": {"digits.npz": "00" * 32}, "run_spec": {"run_id": run_id},
            "wall_clock_s": 0.25,
            "compute_model": {"model": "profile", "cost_profile": "cpu-core"},
        },
    }  # fmt: skip
    jsonschema.Draft202012Validator(SCHEMA).validate(s)
    return s


def write(tmp: Path, s: dict[str, Any]) -> Path:
    path = tmp / s["run_id"] / "summary.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(s))
    return path


def test_collect_runs_flattens_and_sorts(tmp_path: Path) -> None:
    paths = [
        write(tmp_path, summary("w2", "m", "slow", 0, time_to_target=None)),
        write(tmp_path, summary("w1", "m", "fast", 1)),
        write(tmp_path, summary("w1", "m", "fast", 0)),
    ]
    df = collect_runs(paths)
    assert list(df.columns) == [*SUMMARY_COLUMNS, *PROVENANCE_COLUMNS, *PLACEMENT_COLUMNS]
    assert list(df["run_id"]) == ["w1/m/fast/seed0", "w1/m/fast/seed1", "w2/m/slow/seed0"]
    assert math.isnan(df.loc[2, "time_to_target_s"])
    assert df.loc[0, "git_commit"] == "abc123"
    assert df.loc[0, "config_hash"] == hashlib.sha256(b"w1/m/fast/seed0").hexdigest()
    assert json.loads(df.loc[0, "versions"]) == {"python": "3.11.2", "torch": "2.13.0"}


def test_missing_summary_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="nowhere.json"):
        collect_runs([tmp_path / "nowhere.json"])


def test_invalid_json_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(DataError, match="bad.json"):
        collect_runs([bad])


def test_schema_violation_names_the_file_and_key(tmp_path: Path) -> None:
    s = summary()
    del s["bytes_up"]
    path = write(tmp_path, s)
    with pytest.raises(DataError, match=r"summary\.json.*bytes_up"):
        collect_runs([path])


def test_duplicate_run_is_an_error(tmp_path: Path) -> None:
    a = write(tmp_path / "a", summary())
    b = write(tmp_path / "b", summary())
    with pytest.raises(DataError, match="both hold run"):
        collect_runs([a, b])


def test_runs_csv_is_deterministic_and_round_trips(tmp_path: Path) -> None:
    paths = [
        write(tmp_path, summary(scenario="NA", accuracy=1 / 3, time_to_target=None)),
        write(tmp_path, summary(seed=1)),
    ]
    df = collect_runs(paths)
    write_runs_csv(df, tmp_path / "a.csv")
    write_runs_csv(collect_runs(list(reversed(paths))), tmp_path / "b.csv")
    data = (tmp_path / "a.csv").read_bytes()
    assert data == (tmp_path / "b.csv").read_bytes()
    assert b"\r\n" not in data and b"0.3333333333," in data
    back = read_runs_csv(tmp_path / "a.csv")
    assert list(back["scenario"]) == ["NA", "dc_10g"]  # "NA" is a name, not a missing value
    assert math.isnan(back.loc[0, "time_to_target_s"])
    assert back.loc[1, "time_to_target_s"] == 1.0
    assert list(back["bytes_up"]) == [1000, 1000]


def test_read_runs_csv_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="runs.csv"):
        read_runs_csv(tmp_path / "runs.csv")
    (tmp_path / "runs.csv").write_text("run_id,seed\nx,0\n")
    with pytest.raises(DataError, match="lacks columns"):
        read_runs_csv(tmp_path / "runs.csv")


def test_aggregate_over_seeds(tmp_path: Path) -> None:
    paths = [
        write(tmp_path, summary(seed=0, accuracy=0.8, total_time=1.0, time_to_target=None)),
        write(tmp_path, summary(seed=1, accuracy=0.9, total_time=2.0, time_to_target=1.5)),
        write(tmp_path, summary(seed=2, accuracy=1.0, total_time=3.0, time_to_target=2.5)),
        write(tmp_path, summary(scenario="slow", seed=0, accuracy=0.7, time_to_target=None)),
    ]
    agg = aggregate_runs(collect_runs(paths))
    assert list(agg["scenario"]) == ["dc_10g", "slow"]
    fast, slow = agg.iloc[0], agg.iloc[1]
    assert fast["n"] == 3 and fast["clock"] == "simulated"
    assert fast["final_test_accuracy_mean"] == pytest.approx(0.9)
    assert fast["final_test_accuracy_std"] == pytest.approx(0.1)  # ddof=1
    assert fast["total_time_s_std"] == pytest.approx(1.0)
    # Time to target: over the seeds that reached it.
    assert fast["time_to_target_reached"] == 2
    assert fast["time_to_target_s_mean"] == pytest.approx(2.0)
    assert fast["bytes_up_std"] == 0.0  # equal values: exactly zero, not rounding noise
    # One seed: no spread; never reached: no time.
    assert slow["n"] == 1 and math.isnan(slow["final_test_accuracy_std"])
    assert slow["time_to_target_reached"] == 0 and math.isnan(slow["time_to_target_s_mean"])


def test_aggregate_of_read_back_csv_matches(tmp_path: Path) -> None:
    paths = [write(tmp_path, summary(seed=s, accuracy=0.1 * (s + 7))) for s in range(3)]
    df = collect_runs(paths)
    write_runs_csv(df, tmp_path / "runs.csv")
    pd.testing.assert_frame_equal(
        aggregate_runs(df), aggregate_runs(read_runs_csv(tmp_path / "runs.csv")), rtol=1e-9
    )


def test_lossless_bytes_reach_the_runs_table(tmp_path: Path) -> None:
    snappy = summary(method="snappy_bsp") | {"lossless_bytes_up": 900, "lossless_bytes_down": 1800}
    jsonschema.Draft202012Validator(SCHEMA).validate(snappy)
    plain = summary(seed=1) | {"lossless_bytes_up": None, "lossless_bytes_down": None}
    old = summary(seed=2)  # written before the lossless sizes were recorded: no keys
    df = collect_runs([write(tmp_path, s) for s in (snappy, plain, old)])
    write_runs_csv(df, tmp_path / "runs.csv")
    back = read_runs_csv(tmp_path / "runs.csv").set_index("run_id")
    assert back.loc[snappy["run_id"], "lossless_bytes_up"] == 900
    assert back.loc[snappy["run_id"], "lossless_bytes_down"] == 1800
    assert back.loc[[plain["run_id"], old["run_id"]], "lossless_bytes_up"].isna().all()


def test_a_runs_table_without_lossless_columns_reads_them_as_missing(tmp_path: Path) -> None:
    df = collect_runs([write(tmp_path, summary())])
    df.drop(columns=list(OPTIONAL_COLUMNS)).to_csv(tmp_path / "old.csv", index=False)
    back = read_runs_csv(tmp_path / "old.csv")
    numeric = [c for c in OPTIONAL_COLUMNS if c not in ("status", "status_reason")]
    assert back[numeric].isna().all().all()
    # A table from before the divergence test: every run ok, no reason.
    assert list(back["status"]) == ["ok"] and list(back["status_reason"]) == [""]
