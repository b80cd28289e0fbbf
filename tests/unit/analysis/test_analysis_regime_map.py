"""Regime maps: a claim measured at every point of a sweep, classed, and stated as a range."""

from __future__ import annotations

import pandas as pd
import pytest

from psml_core.analysis.regime_map import MAP_COLUMNS, holds_anywhere, map_rows, map_statements

CLAIM = {
    "id": "speed", "statement": "s", "source": "abs", "setup": "x",
    "reported": {"kind": "speedup", "value": 4.0, "up_to": True},
    "measure": {"experiment": "e", "method": "m", "baseline": ["dense_bsp", "other"],
                "metrics": ["time_to_target_s"], "scenarios": ["a"]},
}  # fmt: skip
PAPERS = {"p": {"claims": [CLAIM]}}
# comm/compute of the dense reference at each bandwidth; the method's speed-up grows with it.
POINTS = {"b10": (0.2, 1.0), "b1": (2.0, 2.0), "b0p1": (20.0, 4.0), "b0p01": (200.0, 12.0)}


def config(axis="comm_compute"):
    return {
        "experiments": {
            "map": {
                "methods": ["dense_bsp", "m"],
                "workloads": ["w"],
                "scenario_sweep": {"base": "link", "params": ["bandwidth_gbps"],
                                   "values": [10, 1, 0.1, 0.01],
                                   "labels": ["b10", "b1", "b0p1", "b0p01"]},
                "regime_map": {"axis": axis, "claims": ["speed"]},
            }
        }
    }  # fmt: skip


def runs(censor_at=None, seeds=(0, 1), spread=0.0):
    """Two seeds per point by default (a point holds only with 2); ``spread``: seed 1's speed-up
    is ``speedup * (1 - spread)``."""
    rows = []
    for label, (cc, speedup) in POINTS.items():
        sc = f"link__{label}"
        for seed in seeds:
            rows.append({"method": "dense_bsp", "scenario": sc, "workload": "w", "seed": seed,
                         "workers": 4, "compute_s": 1.0, "comm_s": cc, "wait_s": 0.0,
                         "time_to_target_s": 1.0, "total_time_s": 1.0})  # fmt: skip
            t = 1.0 / (speedup * (1.0 - spread * seed))
            ttt = float("nan") if label == censor_at else t
            rows.append({"method": "m", "scenario": sc, "workload": "w", "seed": seed,
                         "workers": 4, "compute_s": 1.0, "comm_s": cc, "wait_s": 0.0,
                         "total_time_s": t, "time_to_target_s": ttt})  # fmt: skip
    return pd.DataFrame(rows)


def test_each_point_is_measured_against_its_fixed_baseline_and_classed():
    rows = map_rows(PAPERS, runs(), config())
    assert list(rows.columns) == MAP_COLUMNS and len(rows) == 4
    rows = rows.sort_values("x")
    assert list(rows["x"]) == pytest.approx([0.2, 2.0, 20.0, 200.0])
    assert list(rows["factor"]) == pytest.approx([1.0, 2.0, 4.0, 12.0])
    # 4x claimed, tolerance 25%: 2x is the partial floor, 12x exceeds, 1x misses.
    assert list(rows["cls"]) == ["miss", "partial", "reproduced", "exceeded"]
    assert set(rows["baseline"]) == {"dense_bsp"}  # "other" is not run by the map
    assert holds_anywhere(rows, "speed")


def test_the_statement_gives_the_range_where_the_claim_holds():
    text = map_statements(map_rows(PAPERS, runs(), config()))["speed"]
    # No label given: the axis's default label.
    assert "reaches the reported effect at dense comm / compute 20" in text
    assert "exceeds it at dense comm / compute 200" in text
    assert "clears only the partial floor at dense comm / compute 2" in text
    assert "misses at dense comm / compute 0.2" in text and "2 seeds" in text


def test_a_point_with_one_seed_is_an_indication_never_a_hold():
    """Used to pass: a map point "held" on one seed."""
    rows = map_rows(PAPERS, runs(seeds=(0,)), config()).sort_values("x")
    assert list(rows["cls"]) == ["miss", "indication", "indication", "indication"]
    assert not holds_anywhere(rows, "speed")
    assert "indication only" in map_statements(rows)["speed"]


def test_a_point_holds_only_if_every_seed_clears_the_floor():
    # Seed 1 at 40% of the speed-up: 12x becomes 7.2x (fine), 2x becomes 1.2x (below 2x).
    rows = map_rows(PAPERS, runs(spread=0.4), config()).set_index("point")
    assert rows.loc["link__b1", "cls"] == "miss"
    assert rows.loc["link__b0p01", "cls"] == "exceeded"


def test_a_diverged_method_run_is_a_miss_and_a_diverged_baseline_is_left_out():
    table = runs()
    table["status"] = "ok"
    at = (table["scenario"] == "link__b0p1") & (table["method"] == "m") & (table["seed"] == 1)
    table.loc[at, "status"] = "diverged"
    rows = map_rows(PAPERS, table, config()).set_index("point")
    assert rows.loc["link__b0p1", "cls"] == "miss"
    assert "diverged" in rows.loc["link__b0p1", "bound"]


def test_a_censored_method_run_is_a_miss_and_said_so():
    rows = map_rows(PAPERS, runs(censor_at="b0p1"), config())
    assert rows.set_index("point").loc["link__b0p1", "cls"] == "miss"
    assert "censored" in map_statements(rows)["speed"]


def test_other_axes_take_the_swept_value_and_no_map_gives_no_rows():
    rows = map_rows(PAPERS, runs(), config(axis="delay_variation"))
    assert sorted(rows["x"]) == [0.01, 0.1, 1.0, 10.0]
    assert map_rows(PAPERS, runs(), {"experiments": {"e": {"methods": ["m"]}}}).empty
    assert map_statements(pd.DataFrame(columns=MAP_COLUMNS)) == {}


def test_a_direction_only_claim_is_better_only_by_a_clear_margin():
    qual = {**CLAIM, "id": "dir", "reported": {"kind": "qualitative"}}
    rows = map_rows({"p": {"claims": [qual]}}, runs(), {
        "experiments": {"map": {**config()["experiments"]["map"],
                                "regime_map": {"axis": "comm_compute", "claims": ["dir"]}}}
    })  # fmt: skip
    classes = dict(zip(rows["x"].round(1), rows["cls"], strict=True))
    assert classes == {0.2: "not better", 2.0: "better", 20.0: "better", 200.0: "better"}
    text = map_statements(rows)["dir"]
    assert "better by more than 1% on time_to_target_s" in text and "not at 0.2" in text


def test_the_summary_line_names_where_the_claim_holds():
    from psml_core.analysis.regime_map import map_summaries

    line = map_summaries(map_rows(PAPERS, runs(), config()))["speed"]
    assert line == "holds at comm/compute 20, 200 of 0.2-200"
    rows = map_rows(PAPERS, runs(), config())
    rows["cls"] = ["miss", "partial", "partial", "miss"]
    assert map_summaries(rows)["speed"] == "partial only at comm/compute 2, 20 of 0.2-200"
    rows["cls"] = "miss"
    assert map_summaries(rows)["speed"] == "misses at all 4 points of comm/compute 0.2-200"
    assert map_summaries(pd.DataFrame(columns=MAP_COLUMNS)) == {}
