"""What a claim's measurement yields: the verdicts, their keys and :class:`ClaimResult`."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CENSORED_BOUND",
    "EXPLANATION_KEYS",
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
HIGHER_IS_BETTER = frozenset({"final_test_accuracy", "utilisation"})
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
    bound the paper's own numbers put on the claim (:mod:`.consistency`). ``cause``: what
    decided a verdict that is not REPRODUCED (a regime field, a bound, a run's fate, the
    seeds or the resolution, or a property of the method). ``resolution``: the grid of the
    time to target and the test set's resolution.
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
    bound_text: str = ""
    cause: str = ""
    resolution: str = ""
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
