"""Whether a run diverged: the test that marks a run DIVERGED instead of merely slow.

A baseline that never trains is not a baseline, and a method that blows up is not a slow
method: both must be visible as such, never averaged into a time or an accuracy. The test
reads what every run has anyway (its evaluations and its training losses) and is the same on
every backend.

A run is **diverged** when

* a loss becomes non-finite (NaN or infinite: training or test loss), or
* its final test loss lies within :data:`CHANCE_BAND` of chance, ``ln C`` for C classes, or
  above it. That covers a run whose loss fell and came back to chance (the random-k family
  under server momentum: the loss reached 6.05, then stayed at ln 10) and a run that never
  left chance at all; both end at chance, which is what makes them useless as baselines.

The reason says which, with the iteration or the losses, so a reader can check it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["CHANCE_BAND", "divergence"]

CHANCE_BAND = 0.05
"""A final test loss at or above ``(1 - CHANCE_BAND) ln C`` counts as chance."""


def divergence(
    evals: Sequence[tuple[int, float, float, float]],
    train_losses: Sequence[tuple[int, float]],
    n_classes: int,
) -> str | None:
    """Why the run diverged, or None if it did not.

    Args:
        evals: ``(iteration, time, test accuracy, test loss)`` of every evaluation, in order.
        train_losses: ``(iteration, mini-batch loss)`` of every record, in any order.
        n_classes: Number of classes C (chance loss ``ln C``; 2 for binary problems).

    Returns:
        A one-line reason ("loss non-finite at iteration 41", "final test loss 2.301 is at
        chance (ln 10 = 2.303) after falling to 0.412") or None.
    """
    bad = sorted(it for it, loss in train_losses if not math.isfinite(loss))
    bad_eval = [it for it, _, _, loss in evals if not math.isfinite(loss)]
    if bad or bad_eval:
        first = min([*bad[:1], *bad_eval[:1]])
        return f"loss non-finite from iteration {first}"
    if not evals:
        return None
    chance = math.log(max(2, int(n_classes)))
    final = float(evals[-1][3])
    if final < (1.0 - CHANCE_BAND) * chance:
        return None
    low = min(float(loss) for *_, loss in evals)
    where = f"ln {max(2, int(n_classes))} = {chance:.3f}"
    if low < (1.0 - CHANCE_BAND) * chance:
        return f"final test loss {final:.4g} is back at chance ({where}) after falling to {low:.4g}"
    return f"test loss never left chance ({where}); final {final:.4g}"
