"""A qualitative claim's minimum effect: the floor its primary effect must clear, fixed in advance.

"Better" with no number is decided by the seed spread (the method's worst seed beats the
baseline's best) and by a floor stated in the paper file before any run
(``measure.min_effect``, keyed by the claim's primary metric):

* a number: the floor itself, as a fraction of the baseline's mean (``time_to_target_s: 0.10``:
  a 10% shorter time to target), absolute for fractions such as accuracy
  (:data:`~psml_core.analysis.claim_result.ABSOLUTE_METRICS`);
* ``{relative: r, oracle_share: s, why: ...}``: for remote traffic, a share ``s`` of the cut
  the oracle placement allows on the method's data (``1 - oracle / random`` remote bytes per
  step, read from its placement file: :mod:`.partition_files`), where such a bound exists;
  else the stated ``relative`` floor ``r``. ``why`` is the reason, printed with the claim.

The effect is the difference of the two sides' means over seeds, better-is-positive, over the
baseline's mean (absolute for fractions), as :func:`effect_size` computes it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from psml_core.analysis.claim_result import ABSOLUTE_METRICS

__all__ = ["MinEffect", "effect_size", "fmt_effect", "min_effect_of"]


@dataclass(frozen=True)
class MinEffect:
    """The floor a qualitative claim's primary effect must clear.

    Attributes:
        metric: The claim's primary metric.
        value: The floor, a fraction of the baseline's mean (absolute for fractions).
        text: Where it came from, e.g. "25% of the oracle's 14% cut = 3.5%".
        why: The paper file's reason for it ("" where it gives none).
    """

    metric: str
    value: float
    text: str
    why: str = ""


def effect_size(metric: str, diff: float, base_mean: float) -> float:
    """A mean difference (positive: better) in the terms of a minimum effect."""
    if metric in ABSOLUTE_METRICS:
        return diff
    if base_mean == 0 or not math.isfinite(base_mean):
        return math.nan
    return diff / abs(base_mean)


def fmt_effect(metric: str, value: float) -> str:
    """An effect as text: points for fractions, a percentage of the baseline otherwise."""
    if metric in ABSOLUTE_METRICS:
        return f"{100 * value:.2g} points"
    return f"{100 * value:.2g}%"


def _oracle(
    claim: dict[str, Any], runs: pd.DataFrame, scenarios: list[str],
    oracles: Mapping[tuple[str, str], Mapping[str, Any]],
) -> tuple[str, Mapping[str, Any]] | None:  # fmt: skip
    """(workload, bound) of the method's data with the smallest oracle cut, or None."""
    meas = claim["measure"]
    mine = runs[(runs["method"] == meas["method"]) & runs["scenario"].isin(scenarios)]
    if meas.get("workload"):
        mine = mine[mine["workload"] == meas["workload"]]
    found = [
        (str(w), oracles[(str(w), meas["method"])])
        for w in sorted(set(mine["workload"].astype(str)))
        if (str(w), meas["method"]) in oracles
    ]
    return min(found, key=lambda wb: float(wb[1]["bound"])) if found else None


def min_effect_of(
    claim: dict[str, Any],
    runs: pd.DataFrame,
    scenarios: list[str],
    oracles: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
) -> MinEffect | None:
    """The claim's minimum effect on its primary metric, or None where it states none.

    Args:
        claim: The claim (``measure.min_effect``; the loader checks its keys).
        runs: The runs (restricted to the claim's experiment's workloads).
        scenarios: The claim's fixed scenarios.
        oracles: ``(workload, method) -> oracle bound`` (:func:`.partition_files.oracle_bounds`).
    """
    meas = claim["measure"]
    metric = meas["metrics"][0]
    stated = (meas.get("min_effect") or {}).get(metric)
    if stated is None:
        return None
    if not isinstance(stated, Mapping):
        value = float(stated)
        return MinEffect(metric, value, f"{fmt_effect(metric, value)} (stated)")
    relative, why = float(stated["relative"]), str(stated.get("why") or "")
    share = stated.get("oracle_share")
    found = _oracle(claim, runs, scenarios, oracles or {}) if share is not None else None
    if share is None:
        return MinEffect(metric, relative, f"{fmt_effect(metric, relative)} (stated)", why)
    if found is None:
        text = (
            f"{fmt_effect(metric, relative)} (the stated fallback: no oracle bound for "
            f"{meas['method']}'s data in this tier)"
        )
        return MinEffect(metric, relative, text, why)
    workload, bound = found
    cut = float(bound["bound"])
    value = float(share) * cut
    text = (
        f"{100 * float(share):.2g}% of the oracle's {100 * cut:.2g}% cut = "
        f"{fmt_effect(metric, value)} (the oracle bound of {meas['method']}'s data, {workload})"
    )
    return MinEffect(metric, value, text, why)
