"""Conformance of DFS (Yang et al., Computer Networks 2023) and its baselines."""

from __future__ import annotations

from conformance import MethodConformance


class TestDFSConformance(MethodConformance):
    paper = "dfs"
    recipes = ("dfs", "dfs_fixed_b", "omnireduce", "topk_omnireduce", "topk_mc")
    dist_recipes = ("dfs",)
