"""What the tier's pre-registered claims ask of its runs, read from the paper files.

A claim in ``config/papers/<id>.yaml`` names its experiment, method, comparators, metric and
scenarios before any run. The settings read that much when a tier loads: to schedule every run
a claim needs (:func:`psml_core.config.load.build_experiment`), to tune each (workload,
recipe) for the metric its claims judge (:mod:`psml_core.tuning.objective`), and to check that
a delay-variation claim's scenario varies while the claim is decided
(:mod:`psml_core.tuning.periods`). The verdicts themselves are the analysis's
(:mod:`psml_core.analysis.claims`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from psml_core.config.schema import load_yaml, validate

__all__ = ["ClaimUse", "read_claim_uses"]


@dataclass(frozen=True)
class ClaimUse:
    """One claim of a paper file whose experiment the tier runs.

    Attributes:
        paper: The paper's id.
        claim: The claim's id.
        experiment: The experiment it is measured on.
        method: The method's recipe.
        comparators: The comparator the paper names (several: a family, the strongest decides).
        robustness: Our other baselines (the robustness row, never the verdict).
        metric: The metric the verdict is judged on (the first of ``measure.metrics``).
        scenarios: Its fixed scenarios.
        workload: The workload it is restricted to, if any (else the experiment's).
        min_periods: For a claim about delay variation: the congested and the free periods its
            scenario must hold before the dense baseline reaches its target (None: no check).
    """

    paper: str
    claim: str
    experiment: str
    method: str
    comparators: tuple[str, ...]
    robustness: tuple[str, ...]
    metric: str
    scenarios: tuple[str, ...]
    workload: str | None = None
    min_periods: int | None = None

    def roles(self) -> list[tuple[str, str]]:
        """(recipe, role) of every recipe the claim judges: method, comparator, robustness."""
        return [
            (self.method, "method"),
            *((c, "comparator") for c in self.comparators),
            *((r, "robustness") for r in self.robustness),
        ]


def _names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(v for v in value or () if isinstance(v, str))


def read_claim_uses(paths: Sequence[str | Path], experiments: dict[str, Any]) -> list[ClaimUse]:
    """The claims of the paper files at ``paths`` whose experiment is one of ``experiments``.

    Each file is validated against ``workflow/schemas/paper.schema.yaml`` (one line naming the
    file and key otherwise). Claims of an experiment the tier lacks, and of a regime map (which
    runs what it lists), are left out; a claim with no baseline (a value or a setup fact) has
    no comparators. The order is the files', then the claims' in each file.

    Raises:
        ConfigError: a paper file that is not valid YAML or breaks the schema.
    """
    out: list[ClaimUse] = []
    for path in paths:
        raw = load_yaml(path, "paper file")
        paper = validate(raw, "paper", source=f"paper file {str(path)!r}")
        for claim in paper["claims"]:
            meas = claim["measure"]
            ex = experiments.get(meas["experiment"])
            if ex is None or ex.get("regime_map"):
                continue
            out.append(
                ClaimUse(
                    paper=paper["id"],
                    claim=claim["id"],
                    experiment=meas["experiment"],
                    method=meas["method"],
                    comparators=_names(meas.get("baseline")),
                    robustness=_names(meas.get("robustness")),
                    metric=meas["metrics"][0],
                    scenarios=_names(meas.get("scenarios")),
                    workload=meas.get("workload"),
                    min_periods=meas.get("min_periods"),
                )
            )
    return out
