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
  left chance at all; both end at chance, which is what makes them useless as baselines;
  unless its final test accuracy still holds at least half of its best gain over 1/C
  (:data:`ACCURACY_HOLD`). A model that overfits grows confident on the test samples it gets
  wrong, so its test loss can climb past ``ln C`` while its accuracy stays where it was (the
  small tier's sparse DNN: test loss 1.19 > ln 2, accuracy 0.72 against a best of 0.73): that
  run learned, and is judged on its accuracy like any other.

The reason says which, with the iteration or the losses, so a reader can check it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["ACCURACY_HOLD", "CHANCE_BAND", "divergence"]

CHANCE_BAND = 0.05
"""A final test loss at or above ``(1 - CHANCE_BAND) ln C`` counts as chance."""
ACCURACY_HOLD = 0.5
"""A run at chance loss whose final accuracy keeps this share of its best gain over 1/C (and
gained at least :data:`MIN_GAIN`) overfits; it has not diverged."""
MIN_GAIN = 0.05
"""The least gain in test accuracy over 1/C that counts as having learned."""


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
    if _accuracy_holds([float(acc) for _, _, acc, _ in evals], max(2, int(n_classes))):
        return None
    low = min(float(loss) for *_, loss in evals)
    where = f"ln {max(2, int(n_classes))} = {chance:.3f}"
    if low < (1.0 - CHANCE_BAND) * chance:
        return f"final test loss {final:.4g} is back at chance ({where}) after falling to {low:.4g}"
    return f"test loss never left chance ({where}); final {final:.4g}"


def _accuracy_holds(accuracies: list[float], classes: int) -> bool:
    """Whether the final accuracy keeps :data:`ACCURACY_HOLD` of the best gain over 1/C."""
    finite = [a for a in accuracies if math.isfinite(a)]
    if not finite:
        return False
    base = 1.0 / classes
    best = max(finite) - base
    return best >= MIN_GAIN and finite[-1] - base >= ACCURACY_HOLD * best
