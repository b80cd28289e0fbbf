from __future__ import annotations

import json
import math
from pathlib import Path

import jsonschema
import pytest
import yaml

from psml_core.errors import DataError
from psml_core.metrics import METRIC_COLUMNS, IterationRecord, read_metrics, write_metrics
from psml_core.metrics.summary import build_summary, write_summary


def rec(it: int, w: int, acc: float = math.nan, time_s: float | None = None) -> IterationRecord:
    return IterationRecord(
        iteration=it,
        worker=w,
        time_s=time_s if time_s is not None else it + 0.1 * w,
        compute_s=0.5,
        comm_s=0.3,
        wait_s=0.2,
        bytes_up=100,
        bytes_down=200,
        remote_bytes_up=50,
        remote_bytes_down=100,
        ratio=1.0,
        staleness=0,
        loss=1.0 / (it + 1),
        test_loss=math.nan if math.isnan(acc) else 1 - acc,
        test_accuracy=acc,
        clock="simulated",
    )


def test_round_trip_sorted_and_byte_identical(tmp_path: Path):
    records = [rec(1, 1), rec(0, 1), rec(1, 0, 0.9), rec(0, 0)]
    write_metrics(tmp_path / "a.parquet", records)
    write_metrics(tmp_path / "b.parquet", list(reversed(records)))
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    df = read_metrics(tmp_path / "a.parquet")
    assert tuple(df.columns) == METRIC_COLUMNS
    assert list(zip(df.iteration, df.worker, strict=True)) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert set(df.clock) == {"simulated"}


def test_corrupt_and_missing_files(tmp_path: Path):
    with pytest.raises(DataError, match="does not exist"):
        read_metrics(tmp_path / "none.parquet")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1garbage")
    with pytest.raises(DataError, match="bad.parquet.*not readable Parquet"):
        read_metrics(bad)


def test_summary_follows_schema(smoke, repo, tmp_path: Path):
    spec = smoke.runs()[0]
    records = [
        rec(0, 0),
        rec(0, 1),
        rec(1, 0, 0.5, 1.0),
        rec(1, 1, 0.5, 1.1),
        rec(2, 0, 0.99, 2.0),
        rec(2, 1, 0.99, 2.2),
    ]
    s = build_summary(
        records,
        spec,
        clock="simulated",
        data_sha256={"data.npz": "ab"},
        wall_clock_s=0.1,
        compute_model={"model": "profile"},
    )
    schema = yaml.safe_load((repo / "workflow/schemas/summary.schema.yaml").read_text())
    jsonschema.validate(s, schema)
    assert s["iterations"] == 3
    assert s["final_test_accuracy"] == 0.99
    assert s["bytes_up"] == 600 and s["bytes_down"] == 1200 and s["bytes_total"] == 1800
    target = spec.workload.target_accuracy
    # The model of an iteration exists when its last push landed: the latest worker's time_s.
    assert s["time_to_target_s"] == (1.1 if target <= 0.5 else 2.2)
    assert s["total_time_s"] == 2.2
    assert s["provenance"]["config_hash"] == spec.config_hash()
    write_summary(tmp_path / "summary.json", s)
    assert json.loads((tmp_path / "summary.json").read_text()) == s


def test_target_never_reached_is_null(smoke):
    spec = smoke.runs()[0]
    s = build_summary(
        [rec(0, 0, 0.01)],
        spec,
        clock="simulated",
        data_sha256={},
        wall_clock_s=0.0,
        compute_model={"model": "profile"},
    )
    assert s["time_to_target_s"] is None
    assert s["target_censored"] is True
    assert s["bytes_to_target"] is None and s["samples_to_target"] is None


def test_a_transient_crossing_is_not_time_to_target(smoke):
    """Used to pass: a run that crossed the target and then diverged counted as reaching it."""
    spec = smoke.runs()[0]
    target = spec.workload.target_accuracy
    evals = [0.1, target + 0.01, 0.3, target, target + 0.05]
    records = [rec(i, 0, acc, time_s=float(i)) for i, acc in enumerate(evals)]
    s = build_summary(
        records, spec, clock="simulated", data_sha256={}, wall_clock_s=0.0,
        compute_model={"model": "profile"},
    )  # fmt: skip
    assert s["first_target_s"] == 1.0
    assert s["time_to_target_s"] == 3.0  # held from iteration 3 to the end
    assert s["bytes_to_target"] == 4 * 300  # iterations 0..3, 300 bytes each
    assert s["samples_to_target"] == 4 * spec.workload.batch_size
    assert s["samples_processed"] == 5 * spec.workload.batch_size
    diverged = [rec(i, 0, acc, time_s=float(i)) for i, acc in enumerate(evals[:2] + [0.3])]
    s = build_summary(
        diverged, spec, clock="simulated", data_sha256={}, wall_clock_s=0.0,
        compute_model={"model": "profile"},
    )  # fmt: skip
    assert s["time_to_target_s"] is None and s["target_censored"] is True


@pytest.mark.parametrize(
    ("accs", "window", "expected"),
    [([0.1, 0.95, 0.2, 0.95, 0.96], None, 3), ([0.1, 0.95, 0.2, 0.95, 0.96], 2, 3),
     ([0.95, 0.2, 0.95, 0.96, 0.1], 2, 2), ([0.95, 0.2, 0.95, 0.96, 0.1], None, None),
     ([0.2, 0.95], 3, 1), ([0.2, 0.2], 1, None)],
)  # fmt: skip
def test_target_reached_holds_to_the_end_or_for_a_window(accs, window, expected):
    from psml_core.metrics.summary import target_reached

    evals = [(i, float(i), a, 0.0) for i, a in enumerate(accs)]
    got = target_reached(evals, 0.9, window)
    assert (got[0] if got is not None else None) == expected
