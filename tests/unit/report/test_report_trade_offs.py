"""A paper's reported tables beside ours, and the trade-off table of a sweep."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from report_inputs import (
    LOSSLESS,
    METHOD,
    NEVER_RUN,
    PAPERS,
    REPO,
    SNAPPY,
    SWEPT,
    experiment,
    make_inputs,
)

from psml_core.analysis.aggregate import read_runs_csv
from psml_core.analysis.claims import load_papers
from psml_core.errors import ConfigError
from psml_core.report.format import (
    CENSORED,
    fmt_bytes,
    fmt_percent,
    fmt_seconds,
    fmt_time_to_target,
    sig,
    time_to_target_cell,
)
from psml_core.report.sweeps import sweep_table, swept_value
from psml_core.report.trade_offs import NOT_RUN, paper_settings, reported_table

SPEC = PAPERS["dc2"]["tables"][0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    root = tmp_path_factory.mktemp("trade_offs")
    return read_runs_csv(make_inputs(root)["runs_csv"])


def _lines(spec: dict[str, Any], runs: pd.DataFrame) -> dict[tuple[str, str], list[str]]:
    """(recipe, source word) -> the row's cells after the heading."""
    table = reported_table("t", spec, runs, experiment(), "papers/dc2.yaml")
    return {(r[0].rsplit("→ ", 1)[1], r[1].split(" ")[0]): r[1:] for r in table.rows}


def _of(runs: pd.DataFrame, method: str) -> pd.DataFrame:
    keep = (runs["method"] == method) & (runs["scenario"] == "dc_10g")
    return runs[keep & (runs["workload"] == "digits_mlp")]


def _change(value: float, reference: float) -> str:
    return f"\u2212{sig(100 * (1 - value / reference))}\u00a0%"


def test_ours_is_read_from_the_runs_table(runs: pd.DataFrame) -> None:
    lines = _lines(SPEC, runs)
    dense, sweep = _of(runs, METHOD), _of(runs, SWEPT[0])
    ours = lines[(SWEPT[0], "ours")]
    assert ours[0] == "ours (2 seeds)"
    mean, ref = sweep["bytes_total"].mean(), dense["bytes_total"].mean()
    assert ours[1] == f"{fmt_bytes(mean)} ({_change(mean, ref)})"
    acc = sweep["final_test_accuracy"]
    assert ours[2] == (
        f"{fmt_percent(acc.mean())} [{sig(acc.min() * 100)}, {sig(acc.max() * 100)}]"
    )  # the paper's accuracy is in %, so ours is too
    assert ours[3] == fmt_seconds(sweep["total_time_s"].mean())
    assert ours[4] == fmt_seconds(sweep["time_to_target_s"].mean())
    assert lines[(METHOD, "ours")][1] == fmt_bytes(dense["bytes_total"].mean())  # the reference


def test_two_runs_tables_give_two_tables(runs: pd.DataFrame) -> None:
    other = runs.copy()
    pick = other["method"] == SWEPT[0]
    other.loc[pick, "bytes_total"] = other.loc[pick, "bytes_total"] * 3
    other.loc[pick, "final_test_accuracy"] = 0.5
    other.loc[pick, "total_time_s"] = 7.25
    a, b = _lines(SPEC, runs), _lines(SPEC, other)
    mine_a, mine_b = a[(SWEPT[0], "ours")], b[(SWEPT[0], "ours")]
    assert mine_a[1] != mine_b[1] and mine_a[2] != mine_b[2] and mine_a[3] != mine_b[3]
    assert mine_b[2] == "50.0\u00a0% [50.0, 50.0]" and mine_b[3] == "7.25\u00a0s"
    # The paper's lines do not move with the runs.
    assert {k: v for k, v in a.items() if k[1] == "paper"} == {
        k: v for k, v in b.items() if k[1] == "paper"
    }


def test_a_recipe_without_runs_says_not_run(runs: pd.DataFrame) -> None:
    lines = _lines(SPEC, runs)
    assert lines[(NEVER_RUN, "ours")][1] == NOT_RUN
    assert lines[(NEVER_RUN, "paper")][1] == "9.77\u00a0MB (\u221292.6\u00a0%)"
    # A table whose experiment the tier does not define: every row of ours is "not run".
    spec = {**SPEC, "experiment": "not_in_this_tier"}
    table = reported_table("t", spec, runs, experiment(), "papers/dc2.yaml")
    ours = [r for r in table.rows if r[1] == "ours"]
    assert len(ours) == len(SPEC["rows"]) and all(r[2] == NOT_RUN for r in ours)
    assert "not_in_this_tier, which the smoke tier does not define" in table.caption


def test_paper_lines_come_only_from_the_paper_file(runs: pd.DataFrame) -> None:
    lines = _lines(SPEC, runs)
    assert lines[(METHOD, "paper")] == [
        "paper", "131.7\u00a0MB", "97.13\u00a0%", "4,127\u00a0s", "–", "epochs: 17",
    ]  # fmt: skip
    assert lines[(SWEPT[1], "paper")][1] == "33.1\u00a0MB (\u221274.9\u00a0%)"
    spec = copy.deepcopy(SPEC)
    spec["rows"][2]["values"].update(data=64.2, acc=91.5, time=3333, epochs=40)
    changed = _lines(spec, runs)
    assert changed[(SWEPT[0], "paper")] == [
        "paper", "64.2\u00a0MB (\u221251.3\u00a0%)", "91.5\u00a0%", "3,333\u00a0s", "–",
        "epochs: 40",
    ]  # fmt: skip
    assert changed[(SWEPT[0], "ours")] == lines[(SWEPT[0], "ours")]


def test_a_lossless_row_uses_the_runs_lossless_bytes(runs: pd.DataFrame) -> None:
    lines = _lines(SPEC, runs)
    snappy, dense = _of(runs, SNAPPY), _of(runs, METHOD)
    lossless = (snappy["lossless_bytes_up"] + snappy["lossless_bytes_down"]).mean()
    assert math.isclose(lossless, LOSSLESS * snappy["bytes_total"].mean(), rel_tol=1e-3)
    ref = dense["bytes_total"].mean()
    assert lines[(SNAPPY, "ours")][1] == (
        f"{fmt_bytes(lossless)}\u00a0Snappy ({_change(lossless, ref)})"
    )
    # Runs that record no lossless sizes: said, not replaced by the raw bytes.
    blank = runs.assign(lossless_bytes_up=math.nan, lossless_bytes_down=math.nan)
    assert _lines(SPEC, blank)[(SNAPPY, "ours")][1] == "not measured"


def test_censored_runs_are_counted(runs: pd.DataFrame) -> None:
    lines = _lines(SPEC, runs)
    censored = _of(runs, SWEPT[1])
    assert censored["time_to_target_s"].isna().sum() == 1
    held = censored["time_to_target_s"].dropna().mean()
    assert lines[(SWEPT[1], "ours")][4] == f"{fmt_seconds(held)}; censored\u00a01/2"


def test_a_row_naming_an_unknown_column_is_refused(runs: pd.DataFrame) -> None:
    spec = copy.deepcopy(SPEC)
    spec["rows"][0]["values"]["speed"] = 3
    with pytest.raises(ConfigError, match=r"papers/dc2.yaml.*rows\[0\]\.values.*speed"):
        reported_table("t", spec, runs, experiment(), "papers/dc2.yaml")


def test_sweep_table(runs: pd.DataFrame) -> None:
    table = sweep_table("s", "dc2_sweep", experiment(), runs, paper_settings(SPEC))
    assert table is not None
    rows = {r[1]: r for r in table.rows}
    assert list(rows) == [*SWEPT, METHOD, SNAPPY]  # swept values first, then the others
    assert rows[SWEPT[0]][2] == "ratio = 0.5 (paper: ratio = 0.5)"
    assert rows[METHOD][2] == "–"
    sweep = _of(runs, SWEPT[0])
    remote = (sweep["remote_bytes_up"] + sweep["remote_bytes_down"]).mean()
    assert rows[SWEPT[0]][3:6] == ["2", fmt_bytes(remote), fmt_bytes(sweep["bytes_total"].mean())]
    assert rows[SWEPT[1]][7].endswith("censored\u00a01/2")
    # Not a sweep experiment: no table.
    assert sweep_table("s", "dc2", experiment(), runs) is None


def test_swept_values_say_what_they_mean() -> None:
    assert swept_value(["hashing.ratio"], 1.0) == "m = d"
    assert swept_value(["hashing.ratio"], 0.0625) == "m = d/16"
    assert swept_value(["hashing.ratio"], 0.3) == "m = 0.3 d"
    assert swept_value(["codec.params.theta0", "codec_down.params.theta0"], 0.02) == (
        "theta0 = 0.02"
    )


def test_time_to_target_marks_censored_runs() -> None:
    assert fmt_time_to_target(1.5, 3, 3) == "1.50\u00a0s"
    assert fmt_time_to_target(1.5, 2, 3) == "1.50\u00a0s; censored\u00a01/3"
    assert fmt_time_to_target(math.nan, 0, 3) == f"{CENSORED}, 3/3"
    assert time_to_target_cell([0.5, None, math.nan]) == "500\u00a0ms; censored\u00a02/3"


def test_the_shipped_pf_table(tmp_path: Path) -> None:
    """PF's README table maps to the small tier's pf_theta sweep; missing recipes say so."""
    spec = load_papers(REPO / "config" / "papers")["ratatouille"]["tables"][0]
    assert [r["method"] for r in spec["rows"]] == [
        "dense_asp", "snappy_asp", *(f"ratatouille_async__t0p{k}" for k in (2, 4, 6, 8)),
    ]  # fmt: skip
    assert spec["rows"][1]["measure"]["bytes"] == "lossless"
    exp = {
        "tier": "small",
        "seeds": [0],
        "experiments": {
            "pf_theta": {
                "methods": ["dense_asp", "snappy_asp", "ratatouille_async__t0p2"],
                "workloads": ["digits_mlp"],
                "scenarios": ["dc_10g"],
            }
        },
    }
    base = {"workload": "digits_mlp", "scenario": "dc_10g", "seed": 0, "clock": "simulated",
            "final_test_accuracy": 0.97, "total_time_s": 0.3, "time_to_target_s": 0.1,
            "lossless_bytes_up": math.nan, "lossless_bytes_down": math.nan}  # fmt: skip
    runs = pd.DataFrame(
        [
            {**base, "method": "dense_asp", "bytes_total": 8e8, "bytes_up": 4e8},
            {**base, "method": "snappy_asp", "bytes_total": 8e8, "bytes_up": 4e8,
             "lossless_bytes_up": 3.9e8, "lossless_bytes_down": 2.9e8},
            {**base, "method": "ratatouille_async__t0p2", "bytes_total": 5e8, "bytes_up": 1e8,
             "time_to_target_s": math.nan},
        ]
    )  # fmt: skip
    table = reported_table("pf", spec, runs, exp, "papers/ratatouille.yaml")
    rows = table.rows
    assert rows[0][0] == "θ0 = 0.0, no Snappy [ours] → dense_asp"
    assert rows[0][1:4] == ["paper", "12.3\u00a0GB", "0.975"]
    assert rows[3][2] == "390\u00a0MB\u00a0Snappy (\u22122.50\u00a0%)"
    assert rows[5][2:6] == [
        "100\u00a0MB (\u221275.0\u00a0%)",
        "0.970",
        "300\u00a0ms",
        f"{CENSORED}, 1/1",
    ]
    assert rows[8][2] == "3.02\u00a0GB (\u221275.4\u00a0%)"
    assert rows[10][2] == "3.2\u00a0GB (\u221274.0\u00a0%)"
    assert rows[11][1:3] == ["ours", NOT_RUN]  # t0p8 has no run here
    assert "our interpretation [ours]" in table.caption
