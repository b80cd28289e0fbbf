"""The selection rule, fixed before any tuning run: which candidate becomes the operating point.

Every candidate is a full run at the tuning seed. Among those that did not diverge
(:func:`psml_core.metrics.divergence.divergence`, the runs' DIVERGED test), by the key's
objective (:mod:`.objective`):

* **Final accuracy** (no claim judges the key on a time, bytes or samples to target): the
  highest final test accuracy (the mean of the last ``final_evaluations`` evaluations);
  candidates within one test sample of it are tied.
* **To target** (its claims judge a time, bytes or samples to target): the candidates whose
  final accuracy is within the accuracy margin (``tuning.accuracy_margin``, never less than
  one test sample) of the best candidate's are eligible; the one with the least time (bytes,
  samples) to target wins, a candidate that never held the target ranking after every one
  that did. Where no eligible candidate held the target, the final-accuracy rule decides and
  the choice says so.

Ties go to the recipe's declared point, then to its declared free-parameter value, then to
the smaller learning rate, then to the declared momentum handling, then to the declared
warm-up. A diverged candidate is never chosen; when every candidate diverged, the declared
point stays, marked so.

**Checked at further seeds.** The chosen candidate trains again at ``tuning.check_seeds``
further seeds (the tuning seed + 1, + 2, ...; no verdict uses them). If it diverges at any of
them it is *unstable*, passed over like a diverged candidate, and the rule chooses again among
the rest, until a choice holds at every check seed. The check decides only whether a point is
trained stably, never how fast: a learning rate at the edge of stability is the fastest on
one seed and diverges on others, and a verdict over seeds would then judge our choice of
learning rate, not the method.

The stages only decide which candidates run (a coordinate search): stage 0 tries the recipe's
free parameter (its ``tune`` block) at the declared learning rate, stage 1 the learning rate
and momentum handling at stage 0's choice, stage 2 a warm-up at stage 1's. The final choice is
the rule over every candidate run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RULE", "Candidate", "Choice", "choose"]

RULE = (
    "v3: by the objective of the claims that judge the key; final accuracy: the highest, ties "
    "within one test sample; to target: the least time (bytes, samples) to target among the "
    "candidates within the accuracy margin (at least one test sample) of the best final "
    "accuracy, censored last, none reached: final accuracy; non-diverged only; ties to the "
    "declared point, declared free parameter, smaller lr, declared momentum, declared warm-up; "
    "the choice must not diverge at any check seed, else it is passed over and the rule "
    "chooses again"
)
"""The rule's text, part of every record's fingerprint: a new rule makes every record stale."""

_EPS = 1e-9  # float noise in a mean of accuracies, or in two equal times


@dataclass(frozen=True)
class Candidate:
    """One tuning run: its settings and outcome.

    Attributes:
        stage: 0 (free parameter), 1 (lr x momentum) or 2 (warm-up at stage 1's point).
        lr_factor: Its lr as a multiple of the workload's.
        lr: Learning rate.
        momentum: Momentum (server's, or the workers' under momentum correction; 0: none).
        momentum_handling: ``server``, ``correction``, ``none`` or ``n/a``.
        warmup_iterations: Warm-up length.
        final_accuracy: Mean test accuracy of the last evaluations (None: the run stopped
            on a non-finite value; it diverged).
        evaluations: Those last evaluations' accuracies.
        samples_to_target: Samples processed until the target was reached and held (None:
            censored).
        diverged: Why it diverged, or None.
        declared: Whether these are the recipe's own settings (lr factor 1, its momentum, no
            warm-up, its free parameter's own value).
        wall_clock_s: Wall-clock seconds the run took.
        params: The free parameters' values by dotted path (empty without a ``tune`` block).
        time_to_target_s: Time to target (simulated on the sim backend; None: censored).
        bytes_to_target: Bytes to target (None: censored).
        declared_params: Whether ``params`` are the recipe's own values.
        declared_momentum: Whether the momentum handling is the recipe's own.
        declared_warmup: Whether the warm-up is the workload's own.
        checks: Its runs at the check seeds (``seed``, ``final_accuracy``,
            ``time_to_target_s``, ``diverged``), for a candidate the rule chose.
        unstable: Why it was passed over (it diverged at a check seed), or None.
    """

    stage: int
    lr_factor: float
    lr: float
    momentum: float
    momentum_handling: str
    warmup_iterations: int
    final_accuracy: float | None
    evaluations: tuple[float, ...]
    samples_to_target: int | None
    diverged: str | None
    declared: bool
    wall_clock_s: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)
    time_to_target_s: float | None = None
    bytes_to_target: float | None = None
    declared_params: bool = True
    declared_momentum: bool = True
    declared_warmup: bool = True
    checks: tuple[dict[str, Any], ...] = ()
    unstable: str | None = None

    def reached(self, metric: str) -> float | None:
        """Its time, bytes or samples to target (None: it never held the target)."""
        value = getattr(self, metric)
        return None if value is None or not math.isfinite(float(value)) else float(value)

    def settings(self) -> str:
        """Its settings in a few words, for a choice's reason."""
        free = "".join(f", {p.rsplit('.', 1)[-1]} {v:g}" for p, v in self.params.items())
        return (
            f"lr {self.lr:g}, momentum {self.momentum_handling} {self.momentum:g}, "
            f"warm-up {self.warmup_iterations}{free}"
        )


@dataclass(frozen=True)
class Choice:
    """The chosen candidate and why."""

    candidate: Candidate
    why: str
    all_diverged: bool = False


def _score(c: Candidate) -> float:
    """A candidate's final accuracy; one that did not diverge always has one."""
    assert c.final_accuracy is not None, "a run without evaluations diverged"
    return c.final_accuracy


def _tie_break(c: Candidate) -> tuple[Any, ...]:
    return (
        not c.declared,
        not c.declared_params,
        c.lr,
        not c.declared_momentum,
        not c.declared_warmup,
    )


def _by_accuracy(alive: list[Candidate], resolution: float) -> Choice:
    best = max(_score(c) for c in alive)
    tied = [c for c in alive if _score(c) >= best - resolution - _EPS]
    pick = min(tied, key=_tie_break)
    if len(tied) == 1:
        why = f"highest final accuracy ({best:.4f})"
    elif pick.declared:
        why = f"within one test sample of the best final accuracy ({best:.4f}): the declared point"
    else:
        why = (
            f"within one test sample of the best final accuracy ({best:.4f}): by the tie-break "
            f"among {len(tied)} ({pick.settings()})"
        )
    return Choice(pick, why)


def choose(
    candidates: Sequence[Candidate],
    metric: str,
    margin: float,
    resolution: float,
) -> Choice:
    """The rule (module docstring) over ``candidates``.

    Args:
        candidates: The candidates to choose among; one of them may be ``declared``.
        metric: The key's objective: ``final_test_accuracy`` or a to-target metric
            (``time_to_target_s``, ``bytes_to_target``, ``samples_to_target``).
        margin: The accuracy margin (``tuning.accuracy_margin``).
        resolution: One test sample, as accuracy (1 / test samples).
    """
    alive = [
        c
        for c in candidates
        if c.diverged is None and c.unstable is None and c.final_accuracy is not None
    ]
    if not alive:
        declared = next((c for c in candidates if c.declared), candidates[0])
        why = "every candidate diverged (at the tuning seed or a check seed): the declared point"
        why += " stays"
        return Choice(declared, why, True)
    if metric == "final_test_accuracy":
        return _by_accuracy(alive, resolution)
    best = max(_score(c) for c in alive)
    width = max(margin, resolution)
    eligible = [c for c in alive if _score(c) >= best - width - _EPS]
    reached = [c for c in eligible if c.reached(metric) is not None]
    if not reached:
        fallback = _by_accuracy(alive, resolution)
        why = (
            f"no candidate within {width:.3g} of the best final accuracy ({best:.4f}) held the "
            f"target, so the highest accuracy decides: {fallback.why}"
        )
        return Choice(fallback.candidate, why)
    least = min(c.reached(metric) or 0.0 for c in reached)
    tied = [c for c in reached if (c.reached(metric) or 0.0) <= least * (1 + _EPS)]
    pick = min(tied, key=_tie_break)
    why = (
        f"least {metric} ({least:.4g}) among the {len(eligible)} candidates within {width:.3g} "
        f"of the best final accuracy ({best:.4f}); its final accuracy {_score(pick):.4f}"
    )
    return Choice(pick, why)
