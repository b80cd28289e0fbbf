"""The PDF report: built from synthetic but schema-valid results, checked with pypdf."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pypdf import PdfReader

from psml_core.analysis import collect_runs, write_runs_csv
from psml_core.errors import DataError
from psml_core.metrics.records import IterationRecord
from psml_core.metrics.writer import write_metrics
from psml_core.report import build_report
from psml_core.report.tables import fmt_bandwidth, fmt_bytes, fmt_percent, fmt_seconds, sig

REPO = Path(__file__).resolve().parents[3]
SUMMARY_SCHEMA = yaml.safe_load((REPO / "workflow/schemas/summary.schema.yaml").read_text())
COMMIT = "3f9c2e1d0b8a7f6e5d4c3b2a19087f6e5d4c3b2a"
WORKERS = 2
ITERATIONS = 9
EVAL_EVERY = 3

WORKLOADS = {
    "digits_mlp": {"dataset": "digits", "model": "mlp", "hidden": [64], "batch_size": 32,
                   "lr": 0.1, "momentum": 0.9, "l2": 0.0, "iterations": ITERATIONS,
                   "eval_every": EVAL_EVERY, "target_accuracy": 0.85, "params": 4810},
    "rcv1_logreg": {"dataset": "zipf_rcv1", "model": "logreg", "hidden": [64], "batch_size": 64,
                    "lr": 0.5, "momentum": 0.0, "l2": 0.0, "iterations": ITERATIONS,
                    "eval_every": EVAL_EVERY, "target_accuracy": 0.99, "params": 47237},
}  # fmt: skip
SCENARIOS = {
    "dc_10g": {"description": "Data-centre links, 10 Gbit/s, 50 us latency.",
               "bandwidth_gbps": 10.0, "latency_us": 50.0, "message_overhead_us": 10.0,
               "header_bytes": 0},
    "slow_100m": {"description": "A slow shared link, 100 Mbit/s, 2 ms latency.",
                  "bandwidth_gbps": 0.1, "latency_us": 2000.0, "message_overhead_us": 10.0,
                  "header_bytes": 0},
}  # fmt: skip
METHOD = "dense_bsp"


def _experiment() -> dict[str, Any]:
    recipe = {
        "description": "Conventional parameter server: dense fp32 push and pull, BSP.",
        "role": "baseline",
        "paper": None,
        "codec": {"name": "none", "params": {}},
        "codec_down": None,
        "sync": {"name": "bsp", "params": {}},
        "controller": {"name": "static", "params": {}},
        "placement": {"name": "range", "params": {}},
        "deviations": [],
    }
    return {
        "tier": "smoke",
        "description": "Smoke tier: tiny workloads on the sim backend, two scenarios.",
        "backend": "sim",
        "seeds": [0],
        "workers": WORKERS,
        "shards": 2,
        "colocated": True,
        "methods": [METHOD],
        "datasets": {
            "digits": {"source": "digits", "seed": 0, "test_fraction": 0.2},
            "zipf_rcv1": {
                "source": "zipf_sparse",
                "seed": 0,
                "test_fraction": 0.2,
                "rows": 4000,
                "calibration": "rcv1_v2",
                "features": None,
            },
        },
        "workloads": {
            k: {x: y for x, y in v.items() if x != "params"} for k, v in WORKLOADS.items()
        },
        "scenarios": SCENARIOS,
        "compute": {"model": "profile", "device": "cpu-core", "threads": 1},
        "recipes": {METHOD: recipe},
    }


def _records(workload: str, scenario: str) -> list[IterationRecord]:
    """Dense BSP on a toy network model: time and bytes follow the scenario's bandwidth."""
    wl, sc = WORKLOADS[workload], SCENARIOS[scenario]
    nbytes = 4 * wl["params"] // WORKERS  # each worker pushes and pulls its half, dense fp32
    comm = 2 * (nbytes * 8 / (sc["bandwidth_gbps"] * 1e9) + sc["latency_us"] * 1e-6)
    records, t = [], [0.0] * WORKERS
    for it in range(ITERATIONS):
        evaluated = (it + 1) % EVAL_EVERY == 0 or it == ITERATIONS - 1
        step_end = max(t) + 0.004 + comm
        for w in range(WORKERS):
            compute = 0.003 + 0.001 * w
            wait = step_end - t[w] - compute - comm
            t[w] = step_end
            loss = 2.3 * math.exp(-0.25 * it) + 0.05 * w
            records.append(IterationRecord(
                iteration=it, worker=w, time_s=step_end, compute_s=compute, comm_s=comm,
                wait_s=wait, bytes_up=nbytes, bytes_down=nbytes, remote_bytes_up=nbytes // 2,
                remote_bytes_down=nbytes // 2, ratio=1.0, staleness=0, loss=loss,
                test_loss=2.2 * math.exp(-0.2 * it) if evaluated else math.nan,
                test_accuracy=0.95 - 0.8 * math.exp(-0.3 * it) if evaluated else math.nan,
                clock="simulated",
            ))  # fmt: skip
    return records


def _summary(workload: str, scenario: str, records: list[IterationRecord]) -> dict[str, Any]:
    """What psml_core.metrics.summary.build_summary writes, validated against the schema."""
    last = [r for r in records if r.iteration == ITERATIONS - 1]
    evals = sorted({(r.time_s, r.test_accuracy, r.test_loss) for r in records
                    if r.worker == 0 and not math.isnan(r.test_accuracy)})  # fmt: skip
    target = WORKLOADS[workload]["target_accuracy"]
    reached = [t for t, acc, _ in evals if acc >= target]
    dataset = WORKLOADS[workload]["dataset"]
    summary = {
        "run_id": f"{workload}/{METHOD}/{scenario}/seed0", "tier": "smoke", "backend": "sim",
        "clock": "simulated", "seed": 0, "method": METHOD, "workload": workload,
        "scenario": scenario, "dataset": dataset, "workers": WORKERS, "shards": 2,
        "iterations": ITERATIONS, "final_test_accuracy": evals[-1][1],
        "final_test_loss": evals[-1][2],
        "final_train_loss": sum(r.loss for r in last) / len(last),
        "target_accuracy": target, "time_to_target_s": reached[0] if reached else None,
        "total_time_s": max(r.time_s for r in records),
        "bytes_up": sum(r.bytes_up for r in records),
        "bytes_down": sum(r.bytes_down for r in records),
        "bytes_total": sum(r.bytes_up + r.bytes_down for r in records),
        "remote_bytes_up": sum(r.remote_bytes_up for r in records),
        "remote_bytes_down": sum(r.remote_bytes_down for r in records),
        "compute_s": sum(r.compute_s for r in records),
        "comm_s": sum(r.comm_s for r in records),
        "wait_s": sum(r.wait_s for r in records),
        "provenance": {
            "config_hash": hashlib.sha256(f"{workload}/{scenario}".encode()).hexdigest(),
            "git_commit": COMMIT, "git_dirty": False,
            "versions": {"python": "3.11.2", "pandas": "3.1.1", "typst": "0.15.2"},
            "backend": "sim", "seed": 0,
            "data_sha256": {f"{dataset}.npz": "ab" * 32},
            "run_spec": {"run_id": f"{workload}/{METHOD}/{scenario}/seed0"},
            "wall_clock_s": 0.42,
            "compute_model": {"model": "profile", "device": "cpu-core"},
        },
    }  # fmt: skip
    jsonschema.Draft202012Validator(SUMMARY_SCHEMA).validate(summary)
    return summary


SPARSITY = {
    "zipf_rcv1": {"rows": 4000, "features": 47236, "density": 0.00161,
                  "nnz_per_row": {"mean": 76.2, "median": 70.0, "p90": 131.0, "max": 512},
                  "popularity": {"zipf_exponent": 1.08, "top1pct_share": 0.41},
                  "overlap": {"jaccard_mean": 0.012}, "unknown_extra": [1, 2, 3]},
    "digits": {"rows": 1437, "features": 64, "density": 0.49,
               "nnz_per_row": {"mean": 31.4, "median": 31.0, "p90": 37.0, "max": 44}},
}  # fmt: skip
PARTITION = {
    "placement": "range", "workers": WORKERS, "shards": 2, "colocated": True,
    "touched_per_worker": [30112, 29877], "remote_per_worker": [15050, 14940],
    "predicted_remote_entries_per_iteration": 2998.5, "pslite_bytes_per_direction": 359880,
}  # fmt: skip


def make_inputs(root: Path) -> dict[str, Any]:
    """Write the results of 2 workloads x 1 method x 2 scenarios x 1 seed under ``root``."""
    summaries, metrics = [], {}
    for workload in WORKLOADS:
        for scenario in SCENARIOS:
            run_dir = root / "runs" / workload / METHOD / scenario / "seed0"
            records = _records(workload, scenario)
            summary = _summary(workload, scenario, records)
            write_metrics(run_dir / "metrics.parquet", records)
            (run_dir / "summary.json").write_text(json.dumps(summary, sort_keys=True))
            summaries.append(run_dir / "summary.json")
            metrics[summary["run_id"]] = run_dir / "metrics.parquet"
    write_runs_csv(collect_runs(summaries), root / "runs.csv")
    sparsity = []
    for name, stats in SPARSITY.items():
        (root / "sparsity").mkdir(exist_ok=True)
        (root / "sparsity" / f"{name}.json").write_text(json.dumps(stats))
        sparsity.append(root / "sparsity" / f"{name}.json")
    partition = []
    for workload in WORKLOADS:  # the workflow's layout: partition/<workload>/<method>.json
        path = root / "partition" / workload / f"{METHOD}.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(PARTITION))
        partition.append(path)
    return {
        "runs_csv": root / "runs.csv",
        "metrics": metrics,
        "sparsity": sparsity,
        "partition": partition,
        "experiment": _experiment(),
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("report")
    inputs = make_inputs(root / "results")
    pdfs = []
    for k in (1, 2):
        pdf = root / f"out{k}" / "report.pdf"
        build_report(**inputs, out_pdf=pdf, workdir=root / f"work{k}")
        pdfs.append(pdf)
    reader = PdfReader(pdfs[0])
    text = "\n".join(page.extract_text() for page in reader.pages)
    return {"root": root, "inputs": inputs, "pdfs": pdfs, "reader": reader, "text": text}


def test_pdf_is_byte_identical_across_builds(built: dict[str, Any]) -> None:
    a, b = (p.read_bytes() for p in built["pdfs"])
    assert a.startswith(b"%PDF") and a == b


def test_workdir_holds_the_intermediate_artifacts(built: dict[str, Any]) -> None:
    work = built["root"] / "work1"
    names = {p.name for p in work.iterdir()}
    assert {"report.typ", "report_data.json", "table_runs.csv"} <= names
    assert any(n.startswith("fig_") and n.endswith(".svg") for n in names)
    for svg in work.glob("fig_*.svg"):  # deterministic SVG: no date, fixed ids
        assert svg.read_bytes() == (built["root"] / "work2" / svg.name).read_bytes()
    # Every number comes from the data files, none is typed into the template.
    template = (work / "report.typ").read_text()
    for datum in ("MB", "kB", "dense_bsp", "digits_mlp", "dc_10g", COMMIT[:8]):
        assert datum not in template, datum


def test_pdf_has_the_sections_and_provenance(built: dict[str, Any]) -> None:
    text = built["text"]
    assert len(built["reader"].pages) >= 3
    for title in ("Setup", "Methods", "Results", "Runs", "Aggregate", "Predicted traffic"):
        assert title in text, title
    assert "simulated time" in text
    assert COMMIT in text
    assert "dense_bsp" in text and "bsp" in text and "range" in text
    assert "rcv1_logreg · dense_bsp" in text and "digits_mlp · dense_bsp" in text
    assert "47,236" in text  # sparsity headline stats of the zipf data set
    assert "1.08" in text


def test_runs_table_names_every_run(built: dict[str, Any]) -> None:
    text = built["text"]
    runs_part = text[text.index("Runs: every run") :]
    for run_id in built["inputs"]["metrics"]:
        workload, method, scenario, _ = run_id.split("/")
        assert workload in runs_part and method in runs_part and scenario in runs_part
    assert "not reached" in runs_part  # rcv1_logreg's target 99 % is never reached


def test_pdf_has_no_placeholders(built: dict[str, Any]) -> None:
    text = built["text"]
    for bad in ("TODO", "TBD", "None"):
        assert bad not in text, bad
    assert not re.search(r"\bnan\b", text, flags=re.IGNORECASE)


def test_missing_input_is_a_data_error_naming_it(built: dict[str, Any], tmp_path: Path) -> None:
    inputs = dict(built["inputs"])
    gone = tmp_path / "nowhere" / "rcv1_logreg.json"
    inputs["partition"] = [gone]
    with pytest.raises(DataError, match="nowhere"):
        build_report(**inputs, out_pdf=tmp_path / "r.pdf", workdir=tmp_path / "w")
    assert not (tmp_path / "r.pdf").exists()


def test_metrics_must_match_the_runs(built: dict[str, Any], tmp_path: Path) -> None:
    inputs = dict(built["inputs"])
    inputs["metrics"] = dict(list(inputs["metrics"].items())[1:])
    with pytest.raises(DataError, match="no metrics for runs"):
        build_report(**inputs, out_pdf=tmp_path / "r.pdf", workdir=tmp_path / "w")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1234567, "1.23\u00a0MB"), (999, "999\u00a0B"), (999_600, "1.00\u00a0MB"),
     (0, "0\u00a0B"), (None, "–"), (float("nan"), "–")],
)  # fmt: skip
def test_fmt_bytes(value: Any, expected: str) -> None:
    assert fmt_bytes(value) == expected


def test_number_formatting() -> None:
    assert fmt_seconds(0.0012345) == "1.23\u00a0ms"
    assert fmt_seconds(0.9996) == "1.00\u00a0s"
    assert fmt_seconds(12345.0) == "12300\u00a0s"
    assert fmt_seconds(None) == "–"
    assert fmt_percent(0.8532) == "85.3\u00a0%"
    assert fmt_bandwidth(0.1) == "100\u00a0Mbit/s"
    assert sig(9.996) == "10.0"
