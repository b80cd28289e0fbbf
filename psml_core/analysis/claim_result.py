"""What a claim's measurement yields: the verdicts, their keys and :class:`ClaimResult`."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ABSOLUTE_METRICS",
    "CAUSE_CLASSES",
    "CENSORED_BOUND",
    "DEFECT",
    "EXPLANATION_KEYS",
    "MECHANICAL_CAUSES",
    "HIGHER_IS_BETTER",
    "MIN_SEEDS",
    "INCONSISTENT",
    "NOT_COMPARABLE",
    "VERDICTS",
    "VERDICT_RANK",
    "ClaimResult",
]


NOT_COMPARABLE = "NOT COMPARABLE (regime)"
INCONSISTENT = "INCONSISTENT (paper)"
EXPLANATION_KEYS = {
    "REPRODUCED": "reproduced",
    "EXCEEDED": "exceeded",
    "PARTIAL": "partial",
    "NOT REPRODUCED": "not_reproduced",
    NOT_COMPARABLE: "not_comparable",
    INCONSISTENT: "inconsistent",
}
VERDICTS = (
    "REPRODUCED",
    "EXCEEDED",
    "PARTIAL",
    "NOT REPRODUCED",
    NOT_COMPARABLE,
    INCONSISTENT,
    "NOT RUN",
    "SETUP FACT",
)
CAUSE_CLASSES = ("method", "regime", "bound", "ours")
"""The classes a paper file's explanation names its cause by (docs/measurement.md, "Cause"):
``method``, a property of the method as the paper describes it; ``regime``, our measured regime
against the paper's; ``bound``, a bound from the paper's own numbers; ``ours``, a setting or rule
of ours: a defect to fix."""
MECHANICAL_CAUSES = ("run", "seeds", "not run")
"""The causes the analysis names itself: a run's fate, the number of seeds, a missing run."""
DEFECT = "ours"
"""The cause class that is a defect of ours (``psml compare`` warns, the report marks it)."""
HIGHER_IS_BETTER = frozenset({"final_test_accuracy", "utilisation"})
ABSOLUTE_METRICS = frozenset({"final_test_accuracy", "utilisation", "wait_fraction"})
"""Fractions in [0, 1]: their margins and minimum effects are absolute, others' relative."""
MIN_SEEDS = 3
CENSORED_BOUND = {
    "time_to_target_s": "total_time_s",
    "bytes_to_target": "bytes_total",
    "samples_to_target": "samples_processed",
}
VERDICT_RANK = {"NOT REPRODUCED": 0, "PARTIAL": 1, "EXCEEDED": 2, "REPRODUCED": 3}


@dataclass
class ClaimResult:
    """One claim's outcome (all numbers read from the runs).

    ``ours``, ``ci_low``/``ci_high`` (95% interval of the mean) and ``low``/``high`` (range over
    seeds) are in the claim's own unit (``kind``); ``floor`` is the partial floor and
    ``band_low``/``band_high`` the REPRODUCED band, in the same unit. ``baseline`` is the
    comparator the paper names (the strongest member where it names a family, such as uniform
    ratios); ``scenario`` the deciding one of the fixed scenarios. The ``robust_*`` fields are
    the second row: the same rule against the strongest of the named comparator and our other
    baselines (``measure.robustness``), never the verdict; the ``nocodec_*`` fields the same
    rule on the tier's codec-free runs (:mod:`.second_rows`), where it has them.
    ``bound_value``/``bound_text``: the
    bound the paper's own numbers put on the claim (:mod:`.consistency`); where the paper gives
    several values for its setting, ``bound_low`` to ``bound_value`` is the range of bounds and
    the largest decides. ``cause``: what decided a verdict that is not REPRODUCED, prefixed by
    its class (``cause_class``: :data:`CAUSE_CLASSES` or :data:`MECHANICAL_CAUSES`).
    ``resolution``: the grid of the time to target and the test set's resolution.

    An accuracy ratio's band (:mod:`.judge`) is as wide as the largest of the claim's tolerance
    and our noise: ``noise_test_se``, the test set's binomial standard error of the log ratio,
    and ``noise_seed_sd``, the sample standard deviation of the per-seed log gains (both log
    gains, about a relative figure); ``band_set_by`` names the one that set it (``tolerance``,
    ``test set`` or ``seeds``). A qualitative claim's ``min_effect`` is the floor its primary
    effect must clear (a fraction: relative, or absolute on an accuracy), with
    ``min_effect_text`` saying where it came from (:mod:`.min_effect`). A claim judged on a
    time or bytes to target carries the method's and the comparator's mean final test accuracy
    (``method_accuracy``, ``baseline_accuracy``), so that an accuracy cost shows beside a gain.
    """

    paper: str
    claim: str
    statement: str
    source: str
    kind: str
    reported: float | None
    unit: str
    up_to: bool
    metric: str = ""
    ours: float = math.nan
    low: float = math.nan
    high: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    seeds: int = 0
    censored: int = 0
    bound: str = ""
    scenario: str = ""
    workload: str = ""
    baseline: str = ""
    baselines: str = ""
    floor: float = math.nan
    band_low: float = math.nan
    band_high: float = math.nan
    verdict: str = "NOT RUN"
    detail: str = ""
    explanation: str = ""
    seed_limited: bool = False
    above_band: bool = False
    regime_status: str = ""
    regime_notes: str = ""
    regime_map: str = ""
    comparator: str = ""
    robust_verdict: str = ""
    robust_baseline: str = ""
    robust_ours: float = math.nan
    robust_ci_low: float = math.nan
    robust_ci_high: float = math.nan
    robust_detail: str = ""
    nocodec_verdict: str = ""
    nocodec_ours: float = math.nan
    nocodec_ci_low: float = math.nan
    nocodec_ci_high: float = math.nan
    nocodec_detail: str = ""
    bound_value: float = math.nan
    bound_low: float = math.nan
    bound_text: str = ""
    cause: str = ""
    cause_class: str = ""
    resolution: str = ""
    noise_test_se: float = math.nan
    noise_seed_sd: float = math.nan
    band_set_by: str = ""
    min_effect: float = math.nan
    min_effect_text: str = ""
    method_accuracy: float = math.nan
    baseline_accuracy: float = math.nan
    per_metric: list[dict[str, Any]] = field(default_factory=list)
    regime: list[dict[str, Any]] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        """A flat dict for tables (``per_metric`` as text, ``regime`` as JSON)."""
        out = {k: v for k, v in self.__dict__.items() if k not in ("per_metric", "regime")}
        out["regime"] = json.dumps(self.regime, sort_keys=True)
        out["per_metric"] = "; ".join(
            f"{m['metric']} ({m['scenario']}): {m['method']:.4g} vs {m['baseline']:.4g} "
            f"({m['strongest']}{', ' + m['outcome'] if m.get('outcome') else ''})"
            for m in self.per_metric
        )
        return out
