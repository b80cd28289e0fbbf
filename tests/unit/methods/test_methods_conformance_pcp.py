"""Conformance of PCP-SP (Zeng et al., CollaborateCom 2023) and its SSP/DSSP baselines.

Heterogeneous workers (worker 3 four times slower), so that every policy's freedom is used:
SSP and DSSP run ahead, PCP grants local steps; the invariants then bound something real.
"""

from __future__ import annotations

import pytest
from conformance import MethodConformance, RunCache


class TestPCPConformance(MethodConformance):
    paper = "pcp"
    recipes = ("pcp", "ssp_1", "ssp_2", "ssp_4", "ssp_8", "dssp")
    dist_recipes = ("pcp",)
    iterations = 10
    multipliers = (1.0, 1.0, 1.0, 4.0)

    @pytest.mark.parametrize("s", [1, 2, 4])
    def test_ssp_fast_workers_run_exactly_to_the_bound(self, runs: RunCache, s: int) -> None:
        """The bound is tight: in 10 steps against a 4x slower worker, staleness reaches s."""
        assert max(r.staleness for r in runs.sim(f"ssp_{s}").records) == s

    def test_pcp_rounds_hold_no_stale_worker(self, runs: RunCache) -> None:
        """PCP synchronises every round (staleness 0) and the slow worker takes 1 step each."""
        recs = runs.sim("pcp").records
        assert {r.staleness for r in recs} == {0}
        assert {r.local_steps for r in recs if r.worker == 3} == {1}
