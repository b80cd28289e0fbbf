"""Conformance of the head-to-head combinations no paper tried: DFS + DC2 and PCP + DC2."""

from __future__ import annotations

from conformance import MethodConformance


class TestCombinationsConformance(MethodConformance):
    paper = None
    role = "method"
    recipes = ("dfs_dc2", "pcp_dc2")
    dist_recipes = ("pcp_dc2",)
    multipliers = (1.0, 1.0, 1.0, 4.0)
