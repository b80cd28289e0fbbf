"""Conformance of jpdc (Duan & Wu, JPDC 2023) and its placement/hashing baselines.

The sparse workload: hashing needs a sparse data set, and placements only matter there.
"""

from __future__ import annotations

from conformance import MethodConformance


class TestJPDCConformance(MethodConformance):
    paper = "jpdc"
    recipes = ("jpdc", "jpdc_metis", "partition_only", "hashing_only", "random_partition")
    dist_recipes = ("jpdc",)
    workload = "rcv1_logreg"
