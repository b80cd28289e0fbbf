"""The oracle table's arithmetic: each placement's share of the best cut its data allow."""

from __future__ import annotations

import pandas as pd
import pytest

from psml_core.report.tables import oracle_table

BOUND = {"bound": 0.6, "share": 0.5, "random_remote_bytes": 1000.0, "oracle_remote_bytes": 400.0}


def runs(method: str, remote_per_iteration: float) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"workload": "w", "method": method, "iterations": 10,
             "remote_bytes_up": remote_per_iteration * 10 * share,
             "remote_bytes_down": remote_per_iteration * 10 * (1 - share)}
            for share in (0.25, 0.75)
        ]
    )  # fmt: skip


def test_a_placement_is_measured_as_its_share_of_the_oracles_cut() -> None:
    parts = {("w", "p"): {"placement": "parsa", "oracle": BOUND}}
    table = oracle_table("t", runs("p", 700.0), parts, ["p"])
    assert table is not None
    (row,) = table.rows
    assert row[0] == "w · p (parsa)"
    # (1000 - 700) / (1000 - 400): half the cut the oracle makes; predicted 50% too.
    assert row[3].startswith("60")
    assert row[4].startswith("50") and row[5].startswith("50")


def test_a_placement_without_runs_or_a_bound_is_left_out_or_unmeasured() -> None:
    parts = {("w", "p"): {"placement": "parsa", "oracle": BOUND}, ("w", "q"): {"placement": "x"}}
    table = oracle_table("t", runs("other", 1.0), parts, ["p", "q"])
    assert table is not None and len(table.rows) == 1
    assert table.rows[0][5] == "–"
    assert oracle_table("t", runs("p", 1.0), {("w", "q"): {}}, ["q"]) is None


@pytest.mark.parametrize("remote", [1000.0, 400.0])
def test_random_is_zero_and_the_oracle_is_the_whole_cut(remote: float) -> None:
    parts = {("w", "p"): {"placement": "parsa", "oracle": BOUND}}
    table = oracle_table("t", runs("p", remote), parts, ["p"])
    assert table is not None
    assert table.rows[0][5].startswith("0" if remote == 1000.0 else "100")


def test_no_share_of_a_cut_under_one_percent_nor_a_prediction_over_every_key() -> None:
    tiny = {**BOUND, "bound": 0.002, "oracle_remote_bytes": 998.0, "share": 5.19}
    table = oracle_table("t", runs("p", 990.0), {("w", "p"): {"oracle": tiny}}, ["p"])
    assert table is not None and table.rows[0][4:] == ["–", "–"]
    every = {"oracle": {**BOUND, "share": -10.0}, "incidence": "not built (...): all keys counted"}
    table = oracle_table("t", runs("p", 700.0), {("w", "p"): every}, ["p"])
    assert table is not None and table.rows[0][4] == "–" and table.rows[0][5].startswith("50")


def test_a_dynamic_placement_that_never_decides_in_the_run_is_labelled_static() -> None:
    from psml_core.report.sections import _placement_label

    never = {"placement": {"name": "dynamic", "params": {"chunk": 24, "period": 10**9}}}
    every_100 = {"placement": {"name": "dynamic", "params": {"chunk": 24, "period": 100}}}
    assert _placement_label(never, 150) == "static"
    assert _placement_label(every_100, 150) == "dynamic"
    assert _placement_label({"placement": {"name": "metis"}}, 150) == "metis"
    parts = {("w", "p"): {"placement": "dynamic", "oracle": BOUND}}
    table = oracle_table("t", runs("p", 700.0), parts, ["p"], {"p": "static"})
    assert table is not None and table.rows[0][0] == "w · p (static)"
