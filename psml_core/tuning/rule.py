"""The selection rule, fixed before any tuning run: which candidate becomes the operating point.

Stage 1 (learning rate x momentum handling), among the candidates that did not diverge
(:func:`psml_core.metrics.divergence.divergence`, the runs' DIVERGED test):

1. the highest final test accuracy (the mean of the last ``final_evaluations`` evaluations);
2. candidates within one test sample (1 / test samples) of the highest are tied; among them
   the recipe's declared point wins, then the smaller learning rate, then the declared
   momentum handling.

Stage 2 (warm-up) tries a linear warm-up at stage 1's point. It replaces that point only when
it did not diverge and either beats it by more than one test sample, or stage 1 has no
candidate that did not diverge. A diverged candidate is never chosen; when every candidate
diverged, the declared point stays, marked so.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RULE", "Candidate", "Choice", "choose_stage1", "choose_warmup"]

RULE = (
    "v1: highest mean test accuracy over the last evaluations among non-diverged candidates; "
    "ties within one test sample to the declared point, then the smaller lr, then the declared "
    "momentum; warm-up only if it beats that by more than one test sample"
)
"""The rule's text, part of every record's fingerprint: a new rule makes every record stale."""

_EPS = 1e-9  # float noise in a mean of accuracies


@dataclass(frozen=True)
class Candidate:
    """One tuning run: its settings and outcome.

    Attributes:
        stage: 1 (lr x momentum) or 2 (warm-up at stage 1's point).
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
            warm-up).
        wall_clock_s: Wall-clock seconds the run took.
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


def choose_stage1(candidates: list[Candidate], declared_handling: str, resolution: float) -> Choice:
    """Stage 1's point (module docstring).

    Args:
        candidates: Stage 1's candidates; exactly one is ``declared``.
        declared_handling: The recipe's own momentum handling (the tie-break after the lr).
        resolution: One test sample, as accuracy (1 / test samples).
    """
    declared = next(c for c in candidates if c.declared)
    alive = [c for c in candidates if c.diverged is None]
    if not alive:
        return Choice(declared, "every candidate diverged: the declared point stays", True)
    best = max(_score(c) for c in alive)
    tied = [c for c in alive if _score(c) >= best - resolution - _EPS]
    pick = min(
        tied,
        key=lambda c: (not c.declared, c.lr, c.momentum_handling != declared_handling),
    )
    if len(tied) == 1:
        why = f"highest final accuracy ({best:.4f})"
    elif pick.declared:
        why = f"within one test sample of the best ({best:.4f}): the declared point"
    else:
        why = f"within one test sample of the best ({best:.4f}): the smallest lr of {len(tied)}"
    return Choice(pick, why)


def choose_warmup(stage1: Choice, warm: Candidate, resolution: float) -> Choice:
    """Stage 2: the warm-up candidate replaces stage 1's point, or not (module docstring)."""
    if warm.diverged is not None:
        return stage1
    if stage1.all_diverged:
        return Choice(warm, "the only candidate that did not diverge: warm-up")
    gain = _score(warm) - _score(stage1.candidate)
    if gain > resolution + _EPS:
        return Choice(warm, f"warm-up beats stage 1's point by {gain:.4f} (> one test sample)")
    return stage1
