"""A delay-variation claim's scenario must change state often enough before it is decided."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from psml_core.config.claim_uses import ClaimUse
from psml_core.errors import ConfigError
from psml_core.net.cross_traffic import make_cross_traffic
from psml_core.recipes import load_experiment
from psml_core.tuning.periods import check_periods, count_periods, dense_reference

REPO = Path(__file__).resolve().parents[3]


# A chain of its own (40 ms periods on average), not the tier's, which may change.
CHAIN = {"kind": "markov", "flows": [0, 63], "switch_prob": 0.05, "period_ms": 2, "scope": "shared"}


def _use(smoke, k: int = 3) -> ClaimUse:
    real = next(c for c in smoke.claims if c.claim == "dc2_vs_none")
    return dataclasses.replace(real, min_periods=k)


def _tier(smoke, *uses: ClaimUse):
    sc = dataclasses.replace(smoke.scenarios["dc_cross_high"], cross_traffic=CHAIN)
    return dataclasses.replace(smoke, claims=uses, scenarios={**smoke.scenarios, sc.name: sc})


def _entry(time_s: float | None, scenario: str = "dc_cross_high") -> dict:
    chosen = {"lr": 0.1, "momentum": 0.9, "momentum_handling": "server", "warmup_iterations": 0,
              "params": {}, "why": "t"}  # fmt: skip
    cand = {**chosen, "time_to_target_s": time_s, "samples_to_target": 640}
    return {"scenario": scenario, "chosen": chosen, "candidates": [cand]}


def test_periods_are_the_chains_state_segments_that_begin_before_the_horizon(smoke):
    sc = _tier(smoke).scenarios["dc_cross_high"]
    chain = make_cross_traffic(sc.cross_traffic, 3, 4)
    starts, t = [0.0], 0.0
    while (t := chain.next_change(t)) < 30.0:
        starts.append(t)
    for until in (0.5, 5.0, 12.0, 30.0):
        segments = [s for s in starts if s < until]
        states = [int(chain.link_flows(s)[0] > 0) for s in segments]
        got = count_periods(sc, 3, 4, until)
        assert (got.congested, got.free) == (sum(states), len(states) - sum(states))
        assert got.unit == "s"
    assert count_periods(smoke.scenarios["dc_10g"], 0, 4, 10.0) is None  # no variation


def test_a_scenario_that_does_not_vary_before_dense_reaches_its_target_is_refused(smoke):
    exp = _tier(smoke, _use(smoke))
    key = exp.tuning_key("digits_mlp", "dense_bsp")
    assert dense_reference(exp, exp.claims[0]) == "dense_bsp"
    with pytest.raises(ConfigError) as err:
        check_periods(exp, {key: _entry(0.05)}, "record operating_points/smoke.yaml")
    msg = str(err.value)
    assert msg.startswith("claim 'dc2_vs_none' (config/papers/dc2.yaml): scenario 'dc_cross_high'")
    assert "in seed 0 before dense_bsp reaches its target (0.05 s" in msg and "\n" not in msg
    # Long enough for every verdict seed: no error, nothing to note.
    assert check_periods(exp, {key: _entry(1e4)}, "r") == []


def test_a_claim_that_cannot_be_checked_yet_is_noted_not_refused(smoke):
    exp = _tier(smoke, _use(smoke))
    key = exp.tuning_key("digits_mlp", "dense_bsp")
    assert "not tuned under it" in check_periods(exp, {}, "r")[0]
    assert "not tuned under it" in check_periods(exp, {key: _entry(1.0, "slow_100m")}, "r")[0]
    assert "never held its target" in check_periods(exp, {key: _entry(None)}, "r")[0]


def test_min_periods_on_a_scenario_without_variation_is_a_config_error(smoke):
    exp = _tier(smoke, dataclasses.replace(_use(smoke), scenarios=("dc_10g",)))
    with pytest.raises(ConfigError, match=r"scenario 'dc_10g' has no two-state process"):
        check_periods(exp, {}, "r")


def test_the_committed_records_pass_the_check_for_every_tier(smoke):
    """The smoke and small tiers' dc2 claims meet their min_periods on their own records."""
    from psml_core.tuning.record import with_operating_points

    small = load_experiment({"tier": "small"}, REPO / "config")
    for exp in (smoke, small):
        assert {u.claim for u in exp.claims if u.min_periods} >= {"dc2_vs_none", "dc2_vs_uniform"}
        _exp, res = with_operating_points(exp, REPO / "config")
        assert not res.notes, res.notes
