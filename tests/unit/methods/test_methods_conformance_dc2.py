"""Conformance of DC2 (Abdelmoniem & Canini, INFOCOM 2021) and its uniform baselines.

Eight iterations: the checks hold at any ratio the controller sets (one per step, within
[r_min, r_max], as its history records). Its moves are checked in tests/unit/control: on
synthetic plants (test_control_dc2_law.py, test_control_dc2_target.py) and on the sim backend
(a slow, a free and a changing link: test_control_dc2_sim.py, test_control_dc2_signal.py).
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
        "uniform_topk",
        "uniform_randomk",
        "uniform_dgc",
    )
    dist_recipes = ("dc2_topk",)
