"""What a (workload, recipe)'s operating point is chosen for: the metric its claims judge.

A point chosen on final accuracy for a recipe whose claims judge a time to target can cost the
recipe (or its comparator) half its speed for a few test samples of accuracy, and the verdict
then measures our choice, not the method. So each tuning key is tuned for the metric of the
claims that use it (docs/measurement.md, Operating points):

* its **claim** is the first claim, in paper-file and claim order, that judges the key as its
  method or its named comparator; where none does, the first that uses it as a robustness
  baseline; where none uses it at all, there is no claim;
* its **metric** is that claim's first metric when it is a time, bytes or samples to target
  (the rule then takes the least among the candidates whose final accuracy is within the
  accuracy margin of the best), else the final test accuracy (a claim on a run's total
  traffic, or on accuracy itself, is not served by a faster learning rate; and tuning a
  filter's learning rate for fewer bytes would tune it toward its verdict);
* its **scenario**: a time depends on the link, so a key tuned for a time runs under its
  claim's first scenario where it runs there at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from psml_core.config import Experiment
from psml_core.config.claim_uses import ClaimUse

__all__ = ["ACCURACY", "TO_TARGET", "Objective", "objective_for", "uses_of"]

ACCURACY = "final_test_accuracy"
TO_TARGET = ("time_to_target_s", "bytes_to_target", "samples_to_target")
"""Metrics a candidate minimises (among those within the accuracy margin of the best)."""


@dataclass(frozen=True)
class Objective:
    """What a tuning key's candidates are ranked by.

    Attributes:
        metric: ``final_test_accuracy``, or one of :data:`TO_TARGET`.
        claim: ``<paper>/<claim>`` that set it ("" where no claim uses the key).
        role: The key's role in that claim: ``method``, ``comparator`` or ``robustness``.
        scenario: The claim's scenario the key is tuned under (None: the key's first).
        serves: Every claim that uses the key, as ``<claim> (<role>, <metric>)``.
    """

    metric: str = ACCURACY
    claim: str = ""
    role: str = ""
    scenario: str | None = None
    serves: tuple[str, ...] = ()

    @property
    def to_target(self) -> bool:
        """Whether the rule minimises a time, bytes or samples to target."""
        return self.metric in TO_TARGET

    def describe(self) -> str:
        """One line: the metric and the claim that chose it."""
        if not self.claim:
            return f"{self.metric} (no claim judges this recipe on this workload)"
        return f"{self.metric}, from {self.claim} ({self.role})"


def uses_of(exp: Experiment, key: str) -> list[tuple[ClaimUse, str, str]]:
    """Every (claim, role, workload) in which tuning key ``key`` is judged, in claim order."""
    out: list[tuple[ClaimUse, str, str]] = []
    for use in exp.claims:
        ex = exp.experiments.get(use.experiment)
        if ex is None:
            continue
        workloads = [use.workload] if use.workload else list(ex.workloads or exp.workloads)
        for recipe, role in use.roles():
            for w in workloads:
                if exp.tuning_key(w, recipe) == key:
                    out.append((use, role, w))
                    break
    return out


def objective_for(exp: Experiment, key: str, scenarios: list[str]) -> Objective:
    """The objective of tuning key ``key`` (module docstring).

    Args:
        exp: The tier (its ``claims``).
        key: ``<workload>/<method>``.
        scenarios: The scenarios the key's runs use, in grid order.
    """
    uses = uses_of(exp, key)
    if not uses:
        return Objective()
    main = [u for u in uses if u[1] != "robustness"] or uses
    use, role, _w = main[0]
    metric = use.metric if use.metric in TO_TARGET else ACCURACY
    scenario = None
    if metric == "time_to_target_s":
        scenario = next((s for s in use.scenarios if s in scenarios), None)
    serves = tuple(dict.fromkeys(f"{u.claim} ({r}, {u.metric})" for u, r, _w in uses))
    return Objective(metric, f"{use.paper}/{use.claim}", role, scenario, serves)
