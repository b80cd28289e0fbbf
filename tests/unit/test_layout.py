"""The results layout: one pattern per kind of file, filled in whole or as rule wildcards."""

from __future__ import annotations

import pytest

from psml_core import layout


def test_a_rules_pattern_keeps_the_fields_it_is_not_given_as_wildcards() -> None:
    run = layout.wildcards(layout.RUN, tier="smoke", run_id=layout.RUN_ID)
    assert run == "results/smoke/runs/{workload}/{method}/{scenario}/seed{seed}"
    assert layout.wildcards(layout.PARTITION, tier="small", ext="npz") == (
        "results/small/partition/{workload}/{placement}.npz"
    )
    assert (
        layout.wildcards(layout.HASHED, tier="t") == "data/t/hashed/{dataset}/{hashing}/seed{seed}"
    )


def test_a_path_fills_every_field_and_names_the_one_missing() -> None:
    got = layout.path(layout.SPEC_RUN, tier="smoke", kind="tuned", run_id="w/m/s/seed3")
    assert got == "results/smoke/specs/tuned/w/m/s/seed3.json"
    assert (
        layout.path(layout.RUN_ID, workload="w", method="m", scenario="s", seed=0) == "w/m/s/seed0"
    )
    with pytest.raises(KeyError, match="no value for placement"):
        layout.path(layout.PARTITION, tier="smoke", workload="w", ext="npz")


def test_every_pattern_lives_under_data_or_results_of_its_tier() -> None:
    patterns = [getattr(layout, name) for name in layout.__all__ if name.isupper()]
    assert len(patterns) == 13
    for pattern in patterns:
        if pattern is layout.RUN_ID:
            continue
        assert pattern.split("/")[:2] in (["data", "{tier}"], ["results", "{tier}"]), pattern
        assert layout.fields(pattern)[0] == "tier"
