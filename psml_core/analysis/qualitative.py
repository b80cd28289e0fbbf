"""Qualitative claims: the method against one configuration of the comparator, metric by metric.

A qualitative claim ("better than stale synchronous parallel on training time, quality and
resource usage") has no number to reach, so the rule decides what "better" means:

* **One configuration.** The comparator is one of our configurations of what the paper names
  (for SSP, one staleness bound): the best single one on the claim's *primary* metric (the
  first listed), by its mean over seeds. A composite of the best configuration per metric is
  no configuration anyone could run, so it is never the baseline.
* **The primary metric** must be better: on average for PARTIAL; for REPRODUCED, with 3 or
  more seeds, beyond the seed spread (the method's worst seed beats the baseline's best) *and*
  by at least the claim's pre-registered minimum effect (:mod:`.min_effect`: a relative floor,
  or a share of the cut the oracle placement allows on the data), the mean difference over the
  baseline's mean. On an accuracy, "better" means by more than one test sample: a win of a
  single test sample is within the test set's resolution.
* **Secondary metrics** must be *non-inferior*: the method's mean no worse than the
  baseline's by more than a stated margin (``measure.margins`` in the paper file; by default
  one test sample on accuracy, 0.01 on other fractions, 1% of the baseline's value on times
  and bytes), and never a margin below the test set's resolution on an accuracy.

Censored runs: a method run that never held its target counts as never reaching it; a
censored baseline run keeps its bound (it looks faster than it was).

The method's accuracy is also held to its workload's own target (:mod:`.accuracy_checks`, in
:mod:`.claims`): a method whose mean final accuracy is below it is NOT REPRODUCED.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from psml_core.analysis.claim_result import ABSOLUTE_METRICS, HIGHER_IS_BETTER, MIN_SEEDS
from psml_core.analysis.gains import censored_values
from psml_core.analysis.min_effect import MinEffect, effect_size, fmt_effect

__all__ = ["ABSOLUTE_METRICS", "DEFAULT_MARGIN", "QualitativeOutcome", "judge_qualitative"]

DEFAULT_MARGIN = 0.01
"""The non-inferiority margin of a secondary metric the claim states none for (see doc)."""


@dataclass
class QualitativeOutcome:
    """What :func:`judge_qualitative` found (counts over the claim's scenarios)."""

    verdict: str = "NOT RUN"
    detail: str = ""
    baseline: str = ""
    better: int = 0  # scenarios where the primary metric is better on average
    beyond: int = 0  # ... beyond the seed spread
    cleared: int = 0  # ... by at least the minimum effect
    total: int = 0
    seeds: int = 0
    censored: int = 0
    seed_limited: bool = False
    missing: list[str] = field(default_factory=list)
    per_metric: list[dict[str, Any]] = field(default_factory=list)
    min_effect: MinEffect | None = None


def _test_step(rows: pd.DataFrame) -> float:
    """One test sample as an accuracy (0 where the runs do not say their test-set size)."""
    if "test_samples" not in rows:
        return 0.0
    n = pd.to_numeric(rows["test_samples"], errors="coerce").dropna()
    return 1.0 / float(n.min()) if len(n) and n.min() > 0 else 0.0


def _margin(metric: str, margins: dict[str, float], base_mean: float, step: float) -> float:
    """The absolute non-inferiority margin of a secondary metric."""
    stated = float(margins.get(metric, DEFAULT_MARGIN))
    if metric in ABSOLUTE_METRICS:
        return max(stated, step) if metric == "final_test_accuracy" else stated
    return stated * abs(base_mean)


def judge_qualitative(
    claim: dict[str, Any],
    scenarios: list[str],
    runs: pd.DataFrame,
    baselines: list[str],
    floor: MinEffect | None = None,
) -> QualitativeOutcome:
    """Judge a qualitative claim against the best single one of ``baselines`` per scenario.

    Args:
        claim: The claim (``measure.metrics``: primary first; ``measure.margins``).
        scenarios: Its fixed scenarios; every one must pass.
        runs: The runs (restricted to the experiment's workloads), diverged ones removed by
            the caller.
        baselines: The candidate configurations (the named comparator's).
        floor: The primary metric's minimum effect (:func:`.min_effect.min_effect_of`); None:
            the claim states none, and the seed spread alone decides.
    """
    meas = claim["measure"]
    metrics = list(meas["metrics"])
    margins = dict(meas.get("margins") or {})
    out = QualitativeOutcome(min_effect=floor)
    ok_secondary = True
    chosen = []
    for sc in scenarios:
        sel = runs[runs["scenario"] == sc]
        if meas.get("workload"):
            sel = sel[sel["workload"] == meas["workload"]]
        mine = sel[sel["method"] == meas["method"]]
        if mine.empty:
            out.missing.append(f"{meas['method']} under {sc}")
            continue
        strongest = _strongest(sel, baselines, metrics[0], sc, out)
        if strongest is None:
            continue
        name, base_rows = strongest
        chosen.append(name)
        step = _test_step(pd.concat([mine, base_rows]))
        out.total += 1
        for i, metric in enumerate(metrics):
            fine = _judge_metric(out, metric, i == 0, sc, name, mine, base_rows, step, margins)
            ok_secondary = ok_secondary and fine
    out.baseline = ", ".join(sorted(set(chosen)))
    _conclude(out, meas["method"], metrics[0], ok_secondary)
    return out


def _strongest(
    sel: pd.DataFrame, baselines: list[str], primary: str, sc: str, out: QualitativeOutcome
) -> tuple[str, pd.DataFrame] | None:
    """The baseline with the best mean primary metric under one scenario (missing ones noted)."""
    sign = 1 if primary in HIGHER_IS_BETTER else -1
    cands = []
    for b in baselines:
        rows = sel[sel["method"] == b]
        if rows.empty:
            out.missing.append(f"{b} under {sc}")
            continue
        vals, _ = censored_values(rows, primary)
        cands.append((sign * float(np.mean(vals)), b, rows))
    if not cands:
        return None
    _, name, base_rows = max(cands, key=lambda c: c[0])
    return name, base_rows


def _judge_metric(
    out: QualitativeOutcome,
    metric: str,
    primary: bool,
    sc: str,
    name: str,
    mine: pd.DataFrame,
    base_rows: pd.DataFrame,
    step: float,
    margins: dict[str, Any],
) -> bool:
    """One metric under one scenario into ``out``; False where a secondary one is inferior."""
    sgn = 1 if metric in HIGHER_IS_BETTER else -1
    ours, our_c = censored_values(mine, metric)
    ours = np.where(our_c, -sgn * math.inf, ours)
    base, base_c = censored_values(base_rows, metric)
    if primary:
        out.censored += int(our_c.sum()) + int(base_c.sum())
        out.seeds = max(out.seeds, len(ours))
    with np.errstate(invalid="ignore"):
        diff = sgn * (float(np.mean(ours)) - float(np.mean(base)))
    entry = {
        "metric": metric, "scenario": sc, "method": float(np.mean(ours)),
        "baseline": float(np.mean(base)), "strongest": name,
        "role": "primary" if primary else "secondary",
    }  # fmt: skip
    fine = True
    if primary:
        need = step if metric == "final_test_accuracy" else 0.0
        worst = ours.min() if sgn > 0 else ours.max()
        best = base.max() if sgn > 0 else base.min()
        better = bool(diff > need)
        spread = bool(sgn * (worst - best) > need)
        size = effect_size(metric, diff, float(np.mean(base)))
        floor = out.min_effect
        cleared = floor is None or bool(size >= floor.value)  # NaN clears nothing
        out.better += better
        out.beyond += spread
        out.cleared += cleared
        entry["beyond_spread"] = spread
        entry["outcome"] = (
            "better beyond the seed spread" if spread
            else "better on average" if better else "not better"
        ) + _effect(metric, diff, float(np.mean(base)))  # fmt: skip
        if floor is not None and better and not cleared:
            entry["outcome"] += f", below the minimum effect {fmt_effect(metric, floor.value)}"
    else:
        margin = _margin(metric, margins, float(np.mean(base)), step)
        fine = bool(diff >= -margin) if math.isfinite(diff) else False
        entry["beyond_spread"] = False
        entry["margin"] = margin
        entry["outcome"] = (
            f"non-inferior (margin {margin:.3g})" if fine
            else f"inferior by more than the margin {margin:.3g}"
        )  # fmt: skip
    out.per_metric.append(entry)
    return fine


def _effect(metric: str, diff: float, base: float) -> str:
    """The mean difference in words (accuracy in points, others relative to the baseline).

    A qualitative claim has no number to meet, so the reader judges the size: "beyond the seed
    spread" says the difference is real, this says how large it is.
    """
    if not math.isfinite(diff) or diff == 0:
        return ""
    word = "by" if diff > 0 else "worse by"
    if metric == "final_test_accuracy":
        return f" ({word} {abs(diff) * 100:.2g} points on average)"
    if base == 0 or not math.isfinite(base):
        return ""
    return f" ({word} {100 * abs(diff) / abs(base):.3g}% on average)"


def _conclude(out: QualitativeOutcome, method: str, primary: str, ok_secondary: bool) -> None:
    """The verdict and its one-paragraph detail from the counts in ``out``."""
    if out.missing or out.total == 0:
        out.verdict = "NOT RUN"
        out.detail = "not run in this tier: no runs of " + ", ".join(out.missing or [method])
        return
    all_better = out.better == out.total
    clear = out.beyond == out.total and out.cleared == out.total
    if clear and ok_secondary and out.seeds >= MIN_SEEDS:
        out.verdict = "REPRODUCED"
    elif all_better and ok_secondary:
        out.verdict = "PARTIAL"
        out.seed_limited = clear and out.seeds < MIN_SEEDS
    else:
        out.verdict = "NOT REPRODUCED"
    secondary = [m for m in out.per_metric if m["role"] == "secondary"]
    floor = out.min_effect
    by = f", {out.cleared} by at least the minimum effect {floor.text}" if floor is not None else ""
    out.detail = (
        f"against the best single configuration on {primary} ({out.baseline}): better in "
        f"{out.better} of {out.total} scenario(s) on average, {out.beyond} beyond the seed "
        f"spread{by}; n = {out.seeds}"
    )
    if secondary:
        out.detail += "; secondary metrics: " + ", ".join(
            f"{m['metric']} {m['outcome']}" for m in secondary
        )
    if out.seed_limited:
        out.detail += f" (REPRODUCED needs {MIN_SEEDS} seeds)"
    if out.censored:
        out.detail += f"; {out.censored} censored run(s) (never held the target) counted as bounds"
