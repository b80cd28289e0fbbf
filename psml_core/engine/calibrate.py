"""``psml calibrate-sweep``: fit a calibrated sweep's factor (tuning seed; see config.calibration).

The factor ``f`` is searched by bisection in ``log f`` over ``[low, high]``: each trial trains
the method with every calibrated path at ``point x f`` on the tuning seed and measures its
reduction of the metric against the baseline's run on the same seed; a larger factor filters
more, so the reduction rises with ``f``. The search stops within ``tolerance`` percentage points
of the reported reduction, or after ``max_trials``; the trial closest to the target gives the
factor. Every trial's run is kept under the output's ``<name>.runs/`` directory (metrics and
summary, as any run), and the result file lists them all, so the fit is auditable. A target
the bracket cannot reach is an error that says which reductions were reached.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from psml_core.config import RunSpec
from psml_core.config.calibration import CalibrationSpec, apply_calibration
from psml_core.engine.training import train
from psml_core.errors import RunError

__all__ = ["fit_factor", "search_factor"]


def search_factor(
    reduction_at: Callable[[float], float], cal: CalibrationSpec
) -> tuple[float, list[tuple[float, float]]]:
    """Bisection in log factor for ``reduction_at(f) == cal.reduction`` (percent).

    ``low`` and ``high`` are tried first, so a target outside what they reach fails at once.

    Returns:
        The factor of the trial closest to the target, and every ``(factor, reduction)`` tried.

    Raises:
        RunError: The target lies outside what ``[low, high]`` reaches.
    """
    target, tol = cal.reduction, cal.tolerance
    trials: list[tuple[float, float]] = []

    def tried(f: float) -> float:
        r = reduction_at(f)
        trials.append((f, r))
        return r

    # The ends first: a target outside them fails after two runs, not after max_trials.
    if tried(cal.low) > target + tol:
        raise RunError(
            f"calibration {cal.key!r}: at the smallest factor ({cal.low:g}) the reduction is "
            f"already {trials[-1][1]:.1f}%, above the reported {target:g}%: the method's floor on "
            "this workload (what it drops at any positive setting, e.g. values that are exactly "
            "zero) lies above the calibration row, which cannot be matched here; lower the "
            "paper file's calibrations search.low only if a smaller factor can still change it"
        )
    if abs(trials[-1][1] - target) > tol and tried(cal.high) < target - tol:
        raise RunError(
            f"calibration {cal.key!r}: at the largest factor ({cal.high:g}) the reduction is "
            f"only {trials[-1][1]:.1f}%, below the reported {target:g}%; raise the paper file's "
            "calibrations search.high"
        )
    lo, hi = math.log(cal.low), math.log(cal.high)
    while len(trials) < cal.max_trials and min(abs(r - target) for _, r in trials) > tol:
        f = math.exp(0.5 * (lo + hi))
        if tried(f) < target:
            lo = math.log(f)
        else:
            hi = math.log(f)
    best = min(trials, key=lambda t: abs(t[1] - target))
    return best[0], trials


def fit_factor(
    cal: CalibrationSpec, method: RunSpec, baseline: RunSpec, data_dir: str, runs_dir: Path
) -> dict[str, Any]:
    """Train the baseline and the method's trials on the tuning seed; the result file's content."""
    base = train(baseline, data_dir, runs_dir / "baseline")
    base_value = float(base[cal.metric])
    rows: list[dict[str, Any]] = []

    def reduction_at(f: float) -> float:
        spec = apply_calibration(method, f)
        out = runs_dir / f"trial{len(rows):02d}"
        value = float(train(spec, data_dir, out)[cal.metric])
        red = 100.0 * (1.0 - value / base_value)
        rows.append({"factor": f, "value": cal.point * f, cal.metric: value, "reduction": red})
        return red

    factor, _ = search_factor(reduction_at, cal)
    reached = next(r["reduction"] for r in rows if r["factor"] == factor)
    return {
        "key": cal.key,
        "factor": factor,
        "statement": cal.statement,
        "source": cal.source,
        "point": cal.point,
        "params": list(cal.params),
        "target_reduction": cal.reduction,
        "reached_reduction": reached,
        "tolerance": cal.tolerance,
        "metric": cal.metric,
        "seed": cal.seed,
        "workload": cal.workload,
        "scenario": cal.scenario,
        "method": method.run_id,
        "baseline": {"run_id": baseline.run_id, cal.metric: base_value},
        "trials": rows,
        "clock": base["clock"],
        "note": "the calibration point and its tuning seed are never evidence for a verdict",
    }
