"""Operating points: the tuning settings of a tier and the point a run trains at.

A recipe's *operating point* is its learning rate, its momentum handling, its warm-up and the
values of its free parameters (a recipe's ``tune`` block: OmniReduce's block size, a uniform
compression ratio, DC2's target ratio of delay to compute). The
tier's ``tuning`` block says how points are chosen (a small sweep on a seed no verdict uses,
:mod:`psml_core.tuning`); a run's :class:`OperatingPoint` says which point it trains at and
where that point came from (the tier's record file, or the workflow's tune job).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["MOMENTUM_HANDLINGS", "OperatingPoint", "TuningSpec"]

MOMENTUM_HANDLINGS = ("server", "correction", "none", "n/a")
"""How a point uses momentum: on the server's optimizer (and the workers' replicas), as DGC's
momentum correction on the workers, not at all, or not applicable (an optimizer without
momentum, AdaGrad)."""


@dataclass(frozen=True)
class TuningSpec:
    """How a tier chooses its operating points (``tuning``; meanings in config.schema.yaml).

    Attributes:
        enabled: Tune at all; false runs every recipe at its declared point.
        seed: The tuning seed; no experiment may use it for a verdict.
        lr_factors: The learning rates tried, as multiples of the workload's.
        warmup_fraction: The warm-up tried at the best point, as a fraction of the iterations.
        final_evaluations: Evaluations averaged into a candidate's final accuracy.
        accuracy_margin: How far below the best candidate's final accuracy a candidate may end
            and still be chosen for a shorter time (or fewer bytes) to target; never less than
            one test sample.
        check_seeds: How many further seeds (the tuning seed + 1, + 2, ...) the chosen
            candidate must also train at without diverging; one that diverges is passed over.
        use_record: Use the tier's record where its fingerprint matches; false tunes every
            (workload, recipe) in the workflow (tune jobs), as a forced re-tuning.
    """

    enabled: bool = True
    seed: int = 1000
    lr_factors: tuple[float, ...] = (0.5, 1.0, 2.0)
    warmup_fraction: float = 0.1
    final_evaluations: int = 3
    accuracy_margin: float = 0.01
    check_seeds: int = 3
    use_record: bool = True

    @property
    def seeds_checked(self) -> tuple[int, ...]:
        """The check seeds, after the tuning seed."""
        return tuple(self.seed + 1 + i for i in range(self.check_seeds))

    def warmup_iterations(self, iterations: int) -> int:
        """The warm-up candidate's length for a run of ``iterations``.

        At least 2: a warm-up of one iteration trains at the full rate from the start.
        """
        return max(2, round(self.warmup_fraction * iterations))


@dataclass(frozen=True)
class OperatingPoint:
    """The point a run trains at, and its source (part of the run's settings and provenance).

    Attributes:
        lr: The learning rate (the run's ``workload.lr``).
        momentum: The momentum (the run's ``workload.momentum``): the server's, or the workers'
            under momentum correction; 0 for none.
        warmup_iterations: Linear learning-rate warm-up length (the run's workload's).
        momentum_handling: One of :data:`MOMENTUM_HANDLINGS`.
        tuned_as: The ``<workload>/<method>`` whose tuning chose the point; a derived workload
            or recipe (an experiment's sweep) inherits its base's.
        fingerprint: SHA-256 of the settings the point was tuned for.
        source: Where it was read: ``record <file>`` or ``tune job <file>``.
        params: The chosen values of the recipe's free parameters, by dotted path in the
            recipe (``codec.params.block_size``); empty for a recipe without a ``tune`` block.
    """

    lr: float
    momentum: float
    warmup_iterations: int
    momentum_handling: str
    tuned_as: str
    fingerprint: str
    source: str
    params: dict[str, Any] = field(default_factory=dict)
