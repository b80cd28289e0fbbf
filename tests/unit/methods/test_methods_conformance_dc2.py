"""Conformance of DC2 (Abdelmoniem & Canini, INFOCOM 2021) and its uniform baselines.

Eight iterations stay inside the controller's 20-step warm-up (ratio r0); the controller's
moves are checked by the convergence test on the slow scenario.
"""

from __future__ import annotations

from conformance import MethodConformance


class TestDC2Conformance(MethodConformance):
    paper = "dc2"
    recipes = (
        "dc2_topk",
        "dc2_aimd_topk",
        "dc2_randomk",
        "dc2_dgc",
        "uniform_topk_r0p1",
        "uniform_topk_r0p01",
        "uniform_topk_r0p001",
        "uniform_randomk_r0p1",
        "uniform_randomk_r0p01",
        "uniform_randomk_r0p001",
        "uniform_dgc_r0p1",
        "uniform_dgc_r0p01",
        "uniform_dgc_r0p001",
    )
    dist_recipes = ("dc2_topk",)
