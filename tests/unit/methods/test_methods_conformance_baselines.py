"""Conformance of the shared baselines (recipes of no paper): dense BSP/ASP and top-k."""

from __future__ import annotations

from conformance import MethodConformance


class TestBaselinesConformance(MethodConformance):
    paper = None
    role = "baseline"
    recipes = ("dense_bsp", "topk_ef", "dense_asp")
    dist_recipes = ("dense_bsp",)
