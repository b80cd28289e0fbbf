"""The operating-points appendix shows what each point was chosen for and its free parameter."""

from __future__ import annotations

from psml_core.report.tables_points import points_attachment, points_intro, points_tables

BLOCK = "codec.params.block_size"


def _cand(stage: int, factor: float, acc: float, block: int, t: float | None, **kw) -> dict:
    return {"stage": stage, "lr_factor": factor, "lr": 0.1 * factor, "momentum": 0.9,
            "momentum_handling": "server", "warmup_iterations": kw.get("warmup", 0),
            "final_accuracy": acc, "evaluations": [acc], "samples_to_target": 100,
            "time_to_target_s": t, "bytes_to_target": None, "diverged": None,
            "declared": block == 256 and factor == 1.0, "params": {BLOCK: block},
            "declared_params": block == 256}  # fmt: skip


def _experiment() -> dict:
    cands = [_cand(0, 1.0, 0.95, 256, 3.0), _cand(0, 1.0, 0.948, 8, 2.0),
             _cand(1, 2.0, 0.96, 8, None), _cand(2, 1.0, 0.949, 8, 2.5, warmup=4)]  # fmt: skip
    entry = {
        "workload": "cnn", "method": "topk_omnireduce", "scenario": "slow_100m",
        "scenario_free": True, "seed": 1000, "fingerprint": "ab" * 32, "rule": "v2",
        "psml_version": "0.1.0", "test_samples": 360,
        "declared": {"lr": 0.1, "momentum": 0.9, "momentum_handling": "server",
                     "warmup_iterations": 0},
        "chosen": {"lr": 0.1, "momentum": 0.9, "momentum_handling": "server",
                   "warmup_iterations": 0, "params": {BLOCK: 8}, "why": "least time"},
        "all_diverged": False, "candidates": cands, "source": "record operating_points/x.yaml",
        "objective": {"metric": "time_to_target_s", "claim": "dfs/dfs_training_time",
                      "role": "robustness", "margin": 0.01, "serves": []},
    }  # fmt: skip
    tuning = {"enabled": True, "seed": 1000, "lr_factors": [0.5, 1.0, 2.0],
              "warmup_fraction": 0.1, "final_evaluations": 3, "accuracy_margin": 0.01}  # fmt: skip
    return {"operating_points": {"tuning": tuning, "entries": {"cnn/topk_omnireduce": entry}}}


def test_the_appendix_names_the_objective_the_free_parameter_and_the_time_to_target():
    exp = _experiment()
    intro = points_intro(exp)
    assert "time or bytes to target" in intro and "within 0.01 of the best" in intro
    chosen, cands = points_tables(exp)
    row = chosen.rows[0]
    assert "time_to_target_s (dfs_training_time, robustness)" in row
    assert "block_size 8" in row
    cells = dict(zip(cands.header, cands.rows[0], strict=True))
    assert cells["block_size 8"] == "0.948 / 2 s *"  # stage 0's other value, chosen
    assert cells["1×"] == "0.950 / 3 s"  # the declared block size
    assert cells["2×"] == "0.960 / never"
    assert cells["warm-up"].startswith("0.949 / 2.5 s")
    frame = points_attachment(exp).frame
    assert list(frame["params"]) == ["block_size 256", "block_size 8", "block_size 8",
                                     "block_size 8"]  # fmt: skip
    assert frame["chosen"].sum() == 1 and set(frame["objective"]) == {"time_to_target_s"}
