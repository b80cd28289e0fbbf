"""Synthetic but schema-valid inputs of the report: runs, metrics, papers and claims.

Two workloads x two scenarios of the dense baseline (the main grid), plus a paper experiment
``dc2``: an adaptive-ratio method against the dense baseline on one workload and scenario, and
a ``head_to_head`` experiment of both methods. A sweep experiment ``dc2_sweep`` (paper dc2, two
seeds) sweeps the adaptive method's ratio (``dc2_topk__r0p5``, ``dc2_topk__r0p2``; seed 1 of
``r0p2`` never holds its target: censored) beside the dense baseline and ``snappy_bsp`` (which
records lossless Snappy sizes). The paper files name two papers: ``dc2`` (its experiment is in
the tier; its file also holds a reported table mapped to the sweep, one row of which names a
recipe that never ran) and ``pcp`` (its experiment is not). The claims are measured by the
real :func:`psml_core.analysis.claims.evaluate_claims`, as ``psml compare`` does.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import pandas as pd
import yaml

from psml_core.analysis import collect_runs, write_runs_csv
from psml_core.analysis.aggregate import aggregate_experiments, read_runs_csv
from psml_core.analysis.claims import evaluate_claims, load_papers
from psml_core.analysis.regime_map import MAP_COLUMNS, map_statements
from psml_core.metrics.records import IterationRecord
from psml_core.metrics.summary import target_reached
from psml_core.metrics.writer import write_metrics

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
ADAPTIVE = "dc2_topk"
SNAPPY = "snappy_bsp"
SWEEP = {"method": ADAPTIVE, "params": ["codec.params.ratio"], "values": [0.5, 0.2],
         "labels": ["r0p5", "r0p2"]}  # fmt: skip
SWEPT = [f"{ADAPTIVE}__{label}" for label in SWEEP["labels"]]
NEVER_RUN = f"{ADAPTIVE}__r0p05"  # a recipe the paper table maps but no run has
# Ratio in force after the first three iterations.
RATIOS = {METHOD: 1.0, SNAPPY: 1.0, ADAPTIVE: 0.1, **dict(zip(SWEPT, SWEEP["values"], strict=True))}
LOSSLESS = 0.9  # snappy_bsp's Snappy size as a fraction of its wire bytes
# The grid: (workload, method, scenario, seed) of every run.
GRID = (
    [(w, METHOD, s, 0) for w in WORKLOADS for s in SCENARIOS]
    + [("digits_mlp", ADAPTIVE, "slow_100m", 0), ("digits_mlp", ADAPTIVE, "dc_10g", 0)]
    + [("digits_mlp", METHOD, "dc_10g", 1)]
    + [("digits_mlp", m, "dc_10g", seed) for m in (SNAPPY, *SWEPT) for seed in (0, 1)]
)
EXPERIMENTS = {
    "dc2": {
        "description": "An adaptive ratio against no compression.",
        "paper": "dc2",
        "methods": [ADAPTIVE, METHOD],
        "workloads": ["digits_mlp"],
        "scenarios": ["slow_100m"],
    },
    "dc2_sweep": {
        "description": "The adaptive method's ratio swept, beside dense with and without Snappy.",
        "paper": "dc2",
        # As the workflow passes it: the sweep's derived recipes follow the listed methods.
        "methods": [METHOD, SNAPPY, *SWEPT],
        "sweep": SWEEP,
        "workloads": ["digits_mlp"],
        "scenarios": ["dc_10g"],
        "seeds": [0, 1],
    },
    "head_to_head": {
        "description": "Both methods side by side.",
        "methods": [METHOD, ADAPTIVE],
        "workloads": ["digits_mlp"],
        "scenarios": ["dc_10g", "slow_100m"],
        "seeds": [0],
    },
}


def _recipe(name: str) -> dict[str, Any]:
    if name in SWEPT:
        ratio = RATIOS[name]
        return {**_recipe(ADAPTIVE), "codec": {"name": "topk", "params": {"ratio": ratio}},
                "description": f"Top-k at a fixed ratio [sweep: ratio = {ratio:g}]"}  # fmt: skip
    if name == SNAPPY:
        return {**_recipe(METHOD), "lossless": "snappy",
                "description": "Dense BSP, Snappy sizes recorded."}  # fmt: skip
    adaptive = name == ADAPTIVE
    return {
        "description": "Top-k whose ratio follows the measured delay [ours: law]."
        if adaptive
        else "Conventional parameter server: dense fp32 push and pull, BSP.",
        "role": "method" if adaptive else "baseline",
        "paper": "dc2" if adaptive else None,
        "codec": {"name": "topk" if adaptive else "none", "params": {}},
        "codec_down": None,
        "sync": {"name": "bsp", "params": {}},
        "controller": {"name": "dc2" if adaptive else "static", "params": {}},
        "placement": {"name": "range", "params": {}},
        "pull": "aggregate" if adaptive else "params",
        "lossless": "none",
        "hashing": None,
        "deviations": ["Delay measured once per iteration."] if adaptive else [],
    }


def _candidate(stage: int, factor: float, momentum: float, acc: float, **kw: Any) -> dict:
    handling = kw.pop("handling", "server" if momentum else "none")
    return {"stage": stage, "lr_factor": factor, "lr": 0.1 * factor, "momentum": momentum,
            "momentum_handling": handling, "warmup_iterations": kw.pop("warmup", 0),
            "final_accuracy": acc, "evaluations": [acc], "samples_to_target": kw.pop("s", None),
            "diverged": kw.pop("diverged", None),
            "declared": (stage, factor, momentum) == (1, 1.0, 0.9)}  # fmt: skip


def operating_points() -> dict[str, Any]:
    """The points in use, as the workflow collects them into config.json (two keys)."""
    entries = {}
    for method, accs in ((METHOD, (0.91, 0.93, 0.95)), (ADAPTIVE, (0.90, 0.94, 0.12))):
        grid = [(f, a, m) for f, a in zip((1.0, 0.5, 2.0), accs, strict=True) for m in (0.9, 0.0)]
        cands = [_candidate(1, f, m, a - (0.2 if m == 0 else 0), s=9000) for f, a, m in grid]
        if method == ADAPTIVE:
            cands[4]["diverged"] = (
                "loss fell to 0.5 (iteration 40), then returned to 2.3 at the end"
            )
        best = max((c for c in cands if not c["diverged"]), key=lambda c: c["final_accuracy"])
        cands.append(_candidate(2, best["lr_factor"], 0.9, best["final_accuracy"], warmup=1))
        entries[f"digits_mlp/{method}"] = {
            "workload": "digits_mlp", "method": method, "scenario": "slow_100m",
            "scenario_free": method == METHOD, "seed": 1000, "fingerprint": "ab" * 32,
            "rule": "v1", "psml_version": "0.1.0", "test_samples": 360,
            "declared": {"lr": 0.1, "momentum": 0.9, "momentum_handling": "server",
                         "warmup_iterations": 0},
            "chosen": {"lr": best["lr"], "momentum": 0.9, "momentum_handling": "server",
                       "warmup_iterations": 0, "why": "highest final accuracy"},
            "all_diverged": False, "candidates": cands,
            "source": "record operating_points/smoke.yaml",
        }  # fmt: skip
    return {
        "tuning": {"enabled": True, "seed": 1000, "lr_factors": [0.5, 1.0, 2.0],
                   "warmup_fraction": 0.1, "final_evaluations": 3, "use_record": True},
        "entries": entries,
        "inherited": {f"digits_mlp/{m}": f"digits_mlp/{ADAPTIVE}" for m in SWEPT},
    }  # fmt: skip


def experiment() -> dict[str, Any]:
    """The effective configuration the workflow passes to ``psml report``."""
    return {
        "operating_points": operating_points(),
        "tier": "smoke",
        "description": "Smoke tier: tiny workloads on the sim backend, two scenarios.",
        "backend": "sim",
        "seeds": [0],
        "workers": WORKERS,
        "shards": 2,
        "colocated": True,
        "methods": [METHOD],
        "experiments": EXPERIMENTS,
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
        "torch_device": "cpu",
        "compute": {"model": "profile", "cost_profile": "cpu-core", "threads": 1},
        "recipes": {m: _recipe(m) for m in (METHOD, ADAPTIVE, SNAPPY, *SWEPT)},
    }


def _ratio(method: str, it: int) -> float:
    return 1.0 if it < 3 else RATIOS[method]


def _skill(method: str, seed: int) -> float:
    """Accuracy offset: the adaptive method learns a little faster, seed 1 a little slower,
    and the smallest swept ratio's seed 1 never reaches the target (censored)."""
    if method == SWEPT[-1] and seed == 1:
        return -0.2
    return (0.02 if method == ADAPTIVE else 0.01 if method in SWEPT else 0.0) - 0.005 * seed


def records(workload: str, method: str, scenario: str, seed: int = 0) -> list[IterationRecord]:
    """BSP on a toy network model: time and bytes follow the scenario's bandwidth and ratio."""
    wl, sc = WORKLOADS[workload], SCENARIOS[scenario]
    dense = 4 * wl["params"] // WORKERS  # each worker pushes and pulls its half, dense fp32
    fast = _skill(method, seed)
    snappy = method == SNAPPY
    out, t = [], [0.0] * WORKERS
    for it in range(ITERATIONS):
        ratio = _ratio(method, it)
        nbytes = int(dense * ratio)
        comm = 2 * (nbytes * 8 / (sc["bandwidth_gbps"] * 1e9) + sc["latency_us"] * 1e-6)
        evaluated = (it + 1) % EVAL_EVERY == 0 or it == ITERATIONS - 1
        codec = 0.0005 if ratio < 1 else 0.0  # encoding and decoding a sparse message
        step_end = max(t) + 0.004 + codec + comm
        for w in range(WORKERS):
            compute = 0.003 + 0.001 * w
            wait = step_end - t[w] - compute - codec - comm
            t[w] = step_end
            loss = 2.3 * math.exp(-0.25 * it) + 0.05 * w
            out.append(IterationRecord(
                iteration=it, worker=w, time_s=step_end, compute_s=compute, comm_s=comm,
                wait_s=wait, bytes_up=nbytes, bytes_down=nbytes, remote_bytes_up=nbytes // 2,
                remote_bytes_down=nbytes // 2, ratio=ratio, staleness=0, loss=loss,
                test_loss=2.2 * math.exp(-0.2 * it) if evaluated else math.nan,
                test_accuracy=min(0.99, 0.95 + fast - 0.8 * math.exp(-0.3 * it))
                if evaluated else math.nan,
                clock="simulated", codec_s=codec,
                lossless_bytes_up=int(nbytes * LOSSLESS) if snappy else None,
                lossless_bytes_down=int(nbytes * LOSSLESS) if snappy else None,
            ))  # fmt: skip
    return out


def summary(
    workload: str, method: str, scenario: str, recs: list[IterationRecord], seed: int = 0
) -> dict[str, Any]:
    """What psml_core.metrics.summary.build_summary writes, validated against the schema."""
    run_id = f"{workload}/{method}/{scenario}/seed{seed}"
    snappy = method == SNAPPY
    last = [r for r in recs if r.iteration == ITERATIONS - 1]
    evals = sorted({(r.time_s, r.test_accuracy, r.test_loss) for r in recs
                    if r.worker == 0 and not math.isnan(r.test_accuracy)})  # fmt: skip
    target = WORKLOADS[workload]["target_accuracy"]
    held = target_reached([(i, t, acc, loss) for i, (t, acc, loss) in enumerate(evals)], target)
    reached = [held[1]] if held is not None else []
    dataset = WORKLOADS[workload]["dataset"]
    out = {
        "run_id": run_id, "tier": "smoke", "backend": "sim",
        "clock": "simulated", "seed": seed, "method": method, "workload": workload,
        "scenario": scenario, "dataset": dataset, "workers": WORKERS, "shards": 2,
        "iterations": ITERATIONS, "final_test_accuracy": evals[-1][1],
        "final_test_loss": evals[-1][2],
        "final_train_loss": sum(r.loss for r in last) / len(last),
        "target_accuracy": target, "time_to_target_s": reached[0] if reached else None,
        "total_time_s": max(r.time_s for r in recs),
        "bytes_up": sum(r.bytes_up for r in recs),
        "bytes_down": sum(r.bytes_down for r in recs),
        "bytes_total": sum(r.bytes_up + r.bytes_down for r in recs),
        "remote_bytes_up": sum(r.remote_bytes_up for r in recs),
        "remote_bytes_down": sum(r.remote_bytes_down for r in recs),
        "compute_s": sum(r.compute_s for r in recs),
        "comm_s": sum(r.comm_s for r in recs),
        "wait_s": sum(r.wait_s for r in recs),
        "codec_s": sum(r.codec_s for r in recs),
        "lossless_bytes_up": sum(r.lossless_bytes_up for r in recs) if snappy else None,
        "lossless_bytes_down": sum(r.lossless_bytes_down for r in recs) if snappy else None,
        "target_censored": not reached,
        "first_target_s": next((t for t, acc, _ in evals if acc >= target), None),
        "bytes_to_target": sum(r.bytes_up + r.bytes_down for r in recs
                               if reached and r.time_s <= reached[0]) if reached else None,
        "samples_to_target": None,
        "samples_processed": len(recs) * 32,
        "provenance": {
            "config_hash": hashlib.sha256(run_id.encode()).hexdigest(),
            "git_commit": COMMIT, "git_dirty": False,
            "versions": {"python": "3.11.2", "pandas": "3.1.1", "typst": "0.15.2"},
            "backend": "sim", "seed": seed,
            "data_sha256": {f"{dataset}.npz": "ab" * 32},
            "run_spec": {"run_id": run_id},
            "wall_clock_s": 0.42,
            "compute_model": {"model": "profile", "cost_profile": "cpu-core"},
        },
    }  # fmt: skip
    jsonschema.Draft202012Validator(SUMMARY_SCHEMA).validate(out)
    return out


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

# Reported numbers chosen so that none of them can come from anywhere but the paper files.
PAPERS = {
    "dc2": {
        "id": "dc2",
        "title": "DC2: Delay-aware compression control for distributed machine learning",
        "authors": "A. Author, B. Author",
        "venue": "A venue 2021",
        "doi": "10.0000/dc2",
        "evidence": "Abstract only.",
        "setup": "Toy MLP on two simulated workers.",
        "deviations": ["The control law is our reconstruction [ours].", "Simulated network."],
        "claims": [
            {
                "id": "dc2_vs_none",
                "statement": "Up to 41x training speed-up over no compression.",
                "source": "abs",
                "setup": "Low and high delay variation networks.",
                "reported": {"kind": "speedup", "value": 41, "unit": "x", "up_to": True},
                "measure": {
                    "experiment": "dc2",
                    "method": ADAPTIVE,
                    "baseline": METHOD,
                    "metrics": ["total_time_s"],
                    "scenarios": ["slow_100m"],
                },
                "tolerance": {"reproduced": 0.25},
                "explanation": {
                    "not_reproduced": "regime: Our toy network is far faster than the paper's"
                },
            },  # fmt: skip
            {
                "id": "dc2_bytes",
                "statement": "Traffic falls by 63.7% against no compression.",
                "source": "abs",
                "setup": "As above.",
                "reported": {"kind": "reduction", "value": 63.7, "unit": "%"},
                "measure": {
                    "experiment": "dc2",
                    "method": ADAPTIVE,
                    "baseline": METHOD,
                    "metrics": ["bytes_total"],
                    "scenarios": ["slow_100m"],
                },
                "tolerance": {"reproduced": 0.25},
            },  # fmt: skip
        ],
        "tables": [
            {
                "id": "ratio_sweep",
                "title": "Traffic and accuracy against the compression ratio",
                "source": "Table 7",
                "setup": "Toy MLP, two workers.",
                "note": "Reading the second 1.0 row as Snappy only is our interpretation [ours].",
                "experiment": "dc2_sweep",
                "columns": [
                    {"id": "ratio", "name": "ratio", "quantity": "setting"},
                    {"id": "data", "name": "data sent", "unit": "MB", "quantity": "bytes"},
                    {"id": "epochs", "name": "epochs"},
                    {
                        "id": "acc",
                        "name": "accuracy",
                        "unit": "%",
                        "quantity": "final_test_accuracy",
                    },
                    {"id": "time", "name": "time", "unit": "s", "quantity": "total_time_s"},
                ],
                "rows": [
                    {
                        "method": METHOD,
                        "label": "raw",
                        "values": {
                            "ratio": 1.0,
                            "data": 131.7,
                            "epochs": 17,
                            "acc": 97.13,
                            "time": 4127,
                        },
                    },
                    {
                        "method": SNAPPY,
                        "label": "Snappy only",
                        "measure": {"bytes": "lossless"},
                        "values": {
                            "ratio": 1.0,
                            "data": 118.9,
                            "epochs": 17,
                            "acc": 97.11,
                            "time": 3981,
                        },
                    },
                    {
                        "method": SWEPT[0],
                        "values": {
                            "ratio": 0.5,
                            "data": 71.3,
                            "epochs": 18,
                            "acc": 96.87,
                            "time": 2719,
                        },
                    },
                    {
                        "method": SWEPT[1],
                        "values": {
                            "ratio": 0.2,
                            "data": 33.1,
                            "epochs": 21,
                            "acc": 95.41,
                            "time": 1873,
                        },
                    },
                    {
                        "method": NEVER_RUN,
                        "values": {
                            "ratio": 0.05,
                            "data": 9.77,
                            "epochs": 29,
                            "acc": 93.09,
                            "time": 1411,
                        },
                    },
                ],
            },  # fmt: skip
        ],
    },
    "pcp": {
        "id": "pcp",
        "title": "Synchronous parallel with parameter communication prediction",
        "authors": "C. Author",
        "venue": "Another venue 2023",
        "evidence": "Abstract only.",
        "setup": "Heterogeneous workers.",
        "deviations": ["The prediction rule is ours [ours]."],
        "claims": [
            {
                "id": "pcp_vs_ssp",
                "statement": "Training time and quality are better than with SSP.",
                "source": "abs",
                "setup": "Parameter server with multiple clients.",
                "reported": {"kind": "qualitative"},
                "measure": {
                    "experiment": "pcp",
                    "method": "pcp",
                    "baseline": ["ssp_2"],
                    "metrics": ["time_to_target_s", "final_test_accuracy"],
                    "min_effect": {"time_to_target_s": 0.1},
                    "scenarios": ["dc_10g"],
                },
            },  # fmt: skip
        ],
    },
}


def write_papers(directory: Path, papers: dict[str, Any] | None = None) -> Path:
    """Write the paper files (``<id>.yaml``) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    for pid, paper in (papers or PAPERS).items():
        (directory / f"{pid}.yaml").write_text(yaml.safe_dump(paper, sort_keys=False))
    return directory


def write_claims(runs_csv: Path, papers_dir: Path, out: Path) -> Path:
    """Measure the claims on the runs, as ``psml compare --claims`` does."""
    exp = experiment()
    results = evaluate_claims(
        load_papers(papers_dir),
        read_runs_csv(runs_csv),
        exp["experiments"],
        sorted(exp["scenarios"]),
        config=exp,
    )
    said = map_statements(regime_map_rows())
    for res in results:
        res.regime_map = said.get(res.claim, "")
    write_runs_csv(pd.DataFrame([r.row() for r in results]), out)
    return out


def regime_map_rows() -> pd.DataFrame:
    """A regime map of the first paper's first claim over four comm/compute points."""
    pid = next(iter(PAPERS))
    cid = PAPERS[pid]["claims"][0]["id"]
    rows = [
        {"experiment": "map_link", "axis": "comm_compute", "axis_label": "dense comm / compute",
         "point": f"link__b{k}", "x": x, "paper": pid, "claim": cid, "kind": "speedup",
         "method": METHOD, "baseline": "dense_bsp", "metric": "time_to_target_s", "seeds": 1,
         "gain": math.log(f), "factor": f, "reported_factor": 4.0, "bound": "", "cls": cls}
        for k, (x, f, cls) in enumerate(
            [(0.2, 0.9, "miss"), (2.0, 2.1, "partial"), (20.0, 4.2, "reproduced"),
             (200.0, 9.0, "exceeded")]
        )
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=MAP_COLUMNS)


def make_inputs(root: Path) -> dict[str, Any]:
    """Write every input of :func:`psml_core.report.build_report` under ``root``."""
    summaries, metrics = [], {}
    for workload, method, scenario, seed in GRID:
        run_dir = root / "runs" / workload / method / scenario / f"seed{seed}"
        recs = records(workload, method, scenario, seed)
        summ = summary(workload, method, scenario, recs, seed)
        write_metrics(run_dir / "metrics.parquet", recs)
        (run_dir / "summary.json").write_text(json.dumps(summ, sort_keys=True))
        summaries.append(run_dir / "summary.json")
        metrics[summ["run_id"]] = run_dir / "metrics.parquet"
    runs = collect_runs(summaries)
    write_runs_csv(runs, root / "runs.csv")
    write_runs_csv(aggregate_experiments(runs, experiment()), root / "aggregate.csv")
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
    papers_dir = write_papers(root / "papers")
    claims = write_claims(root / "runs.csv", papers_dir, root / "claims.csv")
    regime_map_rows().to_parquet(root / "regime_map.parquet", index=False)
    return {
        "runs_csv": root / "runs.csv",
        "aggregate_csv": root / "aggregate.csv",
        "metrics": metrics,
        "sparsity": sparsity,
        "partition": partition,
        "experiment": experiment(),
        "claims_csv": claims,
        "papers_dir": papers_dir,
        "regime_map": root / "regime_map.parquet",
    }
