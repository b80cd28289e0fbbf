"""Conformance of Ratatouille / PF and its baselines.

Ten iterations, so that the value-bounded filter (8 warm-up steps) is on for the last two.
"""

from __future__ import annotations

import numpy as np
from conformance import MethodConformance, RunCache


class TestRatatouilleConformance(MethodConformance):
    paper = "ratatouille"
    recipes = (
        "ratatouille",
        "ratatouille_async",
        "snappy_bsp",
        "snappy_asp",
        "fixed_threshold",
        "topk_matched",
    )
    dist_recipes = ("ratatouille",)
    iterations = 10

    def test_filter_engages_after_the_warm_up(self, runs: RunCache) -> None:
        """Steps 0-7 send every non-zero; from step 8 the bound cuts the pushes (measured to
        about 0.2 of the warm-up's bytes; required: below half)."""
        recs = runs.sim("ratatouille").records
        warm = np.mean([r.bytes_up for r in recs if r.iteration < 8])
        on = np.mean([r.bytes_up for r in recs if r.iteration >= 8])
        assert on < 0.5 * warm
