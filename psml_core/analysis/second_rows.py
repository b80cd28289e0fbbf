"""The rows printed beside a claim's verdict, never in its place.

* **Robustness**: the same rule against the strongest of the named comparator and our other
  baselines (``measure.robustness``): does the effect survive a stronger rival?
* **Codec-free sensitivity**: for a claim judged on a time, the same rule on the runs of the
  same scenarios with codec work priced at 0 s of simulated time (scenario ``<name>__nocodec``,
  ``codec_costs: false``), where the tier has them: how much of the verdict the codec cost
  model decides. A tier without such runs prints no row.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from psml_core.analysis.claim_result import MIN_SEEDS, ClaimResult
from psml_core.analysis.gains import gain_to_effect
from psml_core.analysis.pairing import strongest_pairing, worst
from psml_core.analysis.run_status import as_list, usable_baselines

__all__ = ["NOCODEC", "TIME_METRICS", "codec_free_row", "robustness_row"]

NOCODEC = "nocodec"  # the scenario_sweep label of the codec-free runs
TIME_METRICS = frozenset({"time_to_target_s", "total_time_s", "time_per_iteration_s"})


def robustness_row(
    claim: dict[str, Any], res: ClaimResult, named: list[str], scenarios: list[str],
    runs: pd.DataFrame,
) -> None:  # fmt: skip
    """Set ``res.robust_*``: against the strongest of the named comparator and ``robustness``."""
    extra = as_list(claim["measure"].get("robustness"))
    if not extra:
        return
    pool, notes = usable_baselines(runs, list(dict.fromkeys([*named, *extra])), scenarios)
    outcomes, missing = strongest_pairing(claim, list(pool), scenarios, runs)
    if not outcomes or missing:
        res.robust_verdict = "NOT RUN"
        res.robust_detail = "no runs of " + ", ".join(missing or ["any baseline"])
        return
    verdict, _sc, g, detail, nums = worst(outcomes)
    metric = claim["measure"]["metrics"][0]

    def eff(x: float) -> float:
        return gain_to_effect(res.kind, metric, x)

    res.robust_verdict, res.robust_baseline = verdict, g.baseline
    res.robust_ours = eff(g.mean)
    res.robust_ci_low, res.robust_ci_high = _interval(g, nums, eff)
    res.robust_detail = f"against the strongest of {', '.join(pool)} ({g.baseline}): {detail}"
    if notes:
        res.robust_detail += "; left out: " + "; ".join(notes)


def codec_free_row(
    claim: dict[str, Any], res: ClaimResult, baselines: list[str | None], scenarios: list[str],
    runs: pd.DataFrame,
) -> None:  # fmt: skip
    """Set ``res.nocodec_*``: the verdict's rule on the ``<scenario>__nocodec`` runs, if any."""
    metric = claim["measure"]["metrics"][0]
    if metric not in TIME_METRICS:
        return  # bytes and accuracy do not depend on the price of codec work
    free = [f"{sc}__{NOCODEC}" for sc in scenarios]
    if not runs["scenario"].astype(str).isin(free).any():
        return
    outcomes, missing = strongest_pairing(claim, baselines, free, runs)
    if not outcomes or missing:
        res.nocodec_verdict = "NOT RUN"
        res.nocodec_detail = "no codec-free runs of " + ", ".join(missing or ["the method"])
        return
    verdict, _sc, g, detail, nums = worst(outcomes)

    def eff(x: float) -> float:
        return gain_to_effect(res.kind, metric, x)

    res.nocodec_verdict = verdict
    res.nocodec_ours = eff(g.mean)
    res.nocodec_ci_low, res.nocodec_ci_high = _interval(g, nums, eff)
    res.nocodec_detail = (
        f"codec work at 0 s ({', '.join(free)}), against {g.baseline or 'the value alone'}: "
        f"{detail}"
    )


def _interval(g: Any, nums: dict[str, float], eff: Any) -> tuple[float, float]:
    """The 95% interval in the claim's units, or none below MIN_SEEDS seeds (as the verdict's).

    With two seeds a t interval has one degree of freedom (t = 12.7): printed in brackets it
    reads as a measurement, where the rule itself says there is no interval.
    """
    if len(g.seeds) < MIN_SEEDS:
        return math.nan, math.nan
    lo, hi = sorted((eff(nums["ci_low"]), eff(nums["ci_high"])))
    return lo, hi
