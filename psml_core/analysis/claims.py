"""Reported versus reproduced: each paper's claims measured on our runs, with a verdict.

A claim (``config/papers/<id>.yaml``, schema ``workflow/schemas/paper.schema.yaml``) names the
quantity the paper reports and how we measure the same quantity: an experiment of the tier, the
method, the baseline(s), the summary metrics (the first is the headline) and how scenarios are
combined. Per scenario, runs of the method and the baseline are paired by seed; the effect is
computed per seed, and its mean and range over seeds are reported.

Effects (``reported.kind``), for a metric where lower is better (times, bytes, waiting):

* ``reduction``: ``100 * (1 - ours / baseline)`` (%);
* ``speedup``: ``baseline / ours``;
* ``ratio``: ``ours / baseline``;
* ``value``: the method's own metric (no baseline);
* ``qualitative``: the method is better than the baseline on every metric.

For higher-is-better metrics (accuracy, utilisation) ``reduction`` and ``speedup`` invert so
that a positive reduction and a speed-up above 1 always mean "better".

Verdicts:

* REPRODUCED — within the claim's relative tolerance of the reported value (an "up to" claim
  also when we exceed it); qualitative: better on every metric beyond the seed spread (the
  method's worst seed beats the baseline's best);
* PARTIAL — the effect has the claimed direction but misses the tolerance; qualitative: better
  on every metric on average, or beyond the spread on some;
* NOT REPRODUCED — otherwise, or when the runs needed are missing (said so).

Time to target falls back to the next metric when a run of the pair never reached the target.
"""

from __future__ import annotations

import glob
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from psml_core.config import load_yaml, validate
from psml_core.errors import ConfigError

__all__ = [
    "HIGHER_IS_BETTER",
    "VERDICTS",
    "ClaimResult",
    "evaluate_claims",
    "load_papers",
    "metric_values",
]

VERDICTS = ("REPRODUCED", "PARTIAL", "NOT REPRODUCED")
HIGHER_IS_BETTER = frozenset({"final_test_accuracy", "utilisation"})
DEFAULT_TOLERANCE = 0.25


def load_papers(directory: str | Path) -> dict[str, dict[str, Any]]:
    """Every ``<id>.yaml`` under ``directory``, validated, by id (the file name must match)."""
    papers: dict[str, dict[str, Any]] = {}
    for path in sorted(glob.glob(str(Path(directory) / "*.yaml"))):
        raw = load_yaml(path, "paper file")
        data = validate(raw, "paper", source=f"paper file {path!r}")
        if Path(path).stem != data["id"]:
            raise ConfigError(
                f"invalid paper file {path!r}: id {data['id']!r} must match the file name"
            )
        papers[data["id"]] = data
    return papers


def metric_values(runs: pd.DataFrame, metric: str) -> pd.Series:
    """A summary metric per run, derived ones included (see the paper schema's ``metrics``)."""
    num = {c: pd.to_numeric(runs[c], errors="coerce") for c in runs.columns if c.endswith("_s")}
    busy = num["compute_s"] + num["comm_s"] + num["wait_s"]
    if metric == "remote_bytes_total":
        return pd.to_numeric(runs["remote_bytes_up"]) + pd.to_numeric(runs["remote_bytes_down"])
    if metric == "wait_fraction":
        return num["wait_s"] / busy
    if metric == "utilisation":
        return num["compute_s"] / busy
    if metric == "comm_compute_ratio":
        return num["comm_s"] / num["compute_s"]
    return pd.to_numeric(runs[metric], errors="coerce").astype(float)


@dataclass
class ClaimResult:
    """One claim's outcome (all numbers read from the runs)."""

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
    seeds: int = 0
    scenario: str = ""
    baseline: str = ""
    verdict: str = "NOT REPRODUCED"
    detail: str = ""
    explanation: str = ""
    per_metric: list[dict[str, Any]] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        """A flat dict for tables (``per_metric`` as text)."""
        out = {k: v for k, v in self.__dict__.items() if k != "per_metric"}
        out["per_metric"] = "; ".join(
            f"{m['metric']}: {m['method']:.4g} vs {m['baseline']:.4g}" for m in self.per_metric
        )
        return out


def _effect(kind: str, metric: str, ours: float, base: float) -> float:
    if kind == "value":
        return ours
    if kind == "ratio":
        return ours / base if base else math.nan
    higher = metric in HIGHER_IS_BETTER
    if kind == "reduction":
        if not base:
            return math.nan
        return 100.0 * ((ours / base - 1.0) if higher else (1.0 - ours / base))
    if kind == "speedup":
        if not ours or not base:
            return math.nan
        return ours / base if higher else base / ours
    raise ValueError(f"no effect for kind {kind!r}")


def _favourable(kind: str, reported: float | None) -> int:
    """+1 if a larger effect supports the claim, -1 if a smaller one does."""
    if kind in ("reduction", "speedup") or reported is None:
        return 1
    return 1 if reported >= 1 or kind == "value" else -1


def _pairs(
    runs: pd.DataFrame, method: str, baseline: str | None, scenario: str, workload: str | None
) -> pd.DataFrame:
    sel = runs[runs["scenario"] == scenario]
    if workload is not None:
        sel = sel[sel["workload"] == workload]
    # Pair the method's and the baseline's runs of the same workload and seed.
    m = sel[sel["method"] == method].set_index(["workload", "seed"])
    if baseline is None:
        return m.add_prefix("m_")
    b = sel[sel["method"] == baseline].set_index(["workload", "seed"])
    return m.add_prefix("m_").join(b.add_prefix("b_"), how="inner")


def _scenario_effects(
    claim: dict[str, Any],
    runs: pd.DataFrame,
    baseline: str | None,
    scenario: str,
) -> tuple[str, list[float]] | None:
    """(metric used, per-seed effects) under one scenario, falling back past unreached targets."""
    meas, kind = claim["measure"], claim["reported"]["kind"]
    pairs = _pairs(runs, meas["method"], baseline, scenario, meas.get("workload"))
    if pairs.empty:
        return None
    mine = pairs.filter(regex="^m_").rename(columns=lambda c: c[2:])
    theirs = pairs.filter(regex="^b_").rename(columns=lambda c: c[2:])
    for metric in meas["metrics"]:
        ours = [float(v) for v in metric_values(mine, metric)]
        base = (
            [float(v) for v in metric_values(theirs, metric)]
            if baseline
            else [math.nan] * len(ours)
        )
        effects = [_effect(kind, metric, o, b) for o, b in zip(ours, base, strict=True)]
        if effects and all(math.isfinite(e) for e in effects):
            return metric, effects
    return None


def _quantitative(claim: dict[str, Any], res: ClaimResult, scenarios: list[str],
                  runs: pd.DataFrame) -> None:  # fmt: skip
    meas, rep = claim["measure"], claim["reported"]
    baselines = meas.get("baseline")
    baselines = [baselines] if isinstance(baselines, str) or baselines is None else baselines
    sign = _favourable(rep["kind"], rep.get("value"))
    best_case = meas.get("combine", "mean") == "best" or rep.get("up_to", False)
    per_scenario = []
    for sc in scenarios:
        options = []
        for b in baselines:
            got = _scenario_effects(claim, runs, b, sc)
            if got is not None:
                metric, eff = got
                options.append((sign * sum(eff) / len(eff), b, metric, eff))
        if not options:
            continue
        # "Up to": the pairing most favourable to the claim; otherwise the strongest baseline.
        chosen = max(options) if best_case else min(options)
        per_scenario.append((chosen[0], sc, *chosen[1:]))
    if not per_scenario:
        res.detail = "the runs this claim needs are missing (run the experiment's tier)"
        return
    if best_case:
        score, sc, base, metric, eff = max(per_scenario)
        res.scenario, res.baseline, res.metric = sc, base or "", metric
        values = eff
    else:
        res.scenario = ", ".join(p[1] for p in per_scenario)
        res.baseline = ", ".join(sorted({p[2] or "" for p in per_scenario}))
        res.metric = ", ".join(sorted({p[3] for p in per_scenario}))
        values = [e for p in per_scenario for e in p[4]]
    res.ours = sum(values) / len(values)
    res.low, res.high = min(values), max(values)
    res.seeds = len(values) if best_case else len(per_scenario[0][4])
    reported = rep.get("value")
    tol = claim.get("tolerance", {}).get("reproduced", DEFAULT_TOLERANCE)
    if reported is None:
        res.verdict = "NOT REPRODUCED"
        res.detail = "no reported value to compare with"
        return
    rel = abs(res.ours - reported) / abs(reported) if reported else math.inf
    exceeds = sign * (res.ours - reported) >= 0
    beyond = rep.get("up_to", False) and exceeds and rel > tol
    if rel <= tol or beyond:
        res.verdict = "REPRODUCED"
    elif _right_direction(rep["kind"], res.ours, reported, claim):
        res.verdict = "PARTIAL"
    else:
        res.verdict = "NOT REPRODUCED"
    if beyond:  # an "up to" bound that we exceed holds; the distance is no miss
        res.detail = (
            f"beyond the reported upper bound by {100 * rel:.0f}% (an 'up to' claim: "
            "exceeding it reproduces it)"
        )
    else:
        res.detail = f"{100 * rel:.0f}% from the reported value (tolerance {100 * tol:.0f}%)"


def _right_direction(kind: str, ours: float, reported: float, claim: dict[str, Any]) -> bool:
    floor = claim.get("tolerance", {}).get("partial", 0.0) * abs(reported)
    if kind == "reduction":
        return ours > floor
    if kind == "speedup":
        return ours > 1.0 + floor
    # ratio / value: the same side of 1 (ratio) or of 0 (value), at least `partial` of it.
    ref = 1.0 if kind == "ratio" else 0.0
    return (ours - ref) * (reported - ref) > 0 and abs(ours - ref) >= floor


def _qualitative(claim: dict[str, Any], res: ClaimResult, scenarios: list[str],
                 runs: pd.DataFrame) -> None:  # fmt: skip
    meas = claim["measure"]
    baselines = meas.get("baseline")
    baselines = [baselines] if isinstance(baselines, str) else list(baselines or [])
    better_mean = better_spread = total = 0
    for metric in meas["metrics"]:
        sign = 1 if metric in HIGHER_IS_BETTER else -1
        for sc in scenarios:
            sel = runs[runs["scenario"] == sc]
            if meas.get("workload"):
                sel = sel[sel["workload"] == meas["workload"]]
            ours = metric_values(sel[sel["method"] == meas["method"]], metric).dropna()
            if ours.empty:
                continue
            # The strongest baseline on this metric (best mean).
            cands = []
            for b in baselines:
                vals = metric_values(sel[sel["method"] == b], metric).dropna()
                if not vals.empty:
                    cands.append((sign * vals.mean(), b, vals))
            if not cands:
                continue
            _, name, base = max(cands)
            total += 1
            mean_better = sign * (ours.mean() - base.mean()) > 0
            spread_better = sign * ((ours.min() if sign > 0 else ours.max())
                                    - (base.max() if sign > 0 else base.min())) > 0  # fmt: skip
            better_mean += mean_better
            better_spread += spread_better
            res.per_metric.append(
                {
                    "metric": metric,
                    "scenario": sc,
                    "baseline": float(base.mean()),
                    "method": float(ours.mean()),
                    "strongest": name,
                    "beyond_spread": bool(spread_better),
                }  # fmt: skip
            )
    if total == 0:
        res.detail = "the runs this claim needs are missing (run the experiment's tier)"
        return
    res.metric = ", ".join(meas["metrics"])
    res.scenario = ", ".join(scenarios)
    res.baseline = ", ".join(baselines)
    res.seeds = int(runs[runs["method"] == meas["method"]]["seed"].nunique())
    if better_spread == total:
        res.verdict = "REPRODUCED"
    elif better_mean == total or better_spread > 0:
        res.verdict = "PARTIAL"
    else:
        res.verdict = "NOT REPRODUCED"
    res.ours, res.low, res.high = float(better_mean), float(better_spread), float(total)
    res.detail = (
        f"better on {better_mean} of {total} metric-scenario pairs on average, "
        f"{better_spread} beyond the seed spread"
    )


def evaluate_claims(
    papers: dict[str, dict[str, Any]],
    runs: pd.DataFrame,
    experiments: dict[str, dict[str, Any]],
    scenarios: list[str],
) -> list[ClaimResult]:
    """Measure every claim on the runs and give it a verdict.

    Args:
        papers: :func:`load_papers`.
        runs: The runs table (``runs.csv``).
        experiments: The tier's experiments (name -> its config block).
        scenarios: Every scenario of the tier (an experiment's default).

    Returns:
        One :class:`ClaimResult` per claim, in paper and claim order. A claim whose experiment
        the tier does not define is NOT REPRODUCED with a detail saying so.
    """
    out = []
    for pid, paper in papers.items():
        for claim in paper["claims"]:
            rep = claim["reported"]
            res = ClaimResult(
                paper=pid,
                claim=claim["id"],
                statement=claim["statement"],
                source=claim["source"],
                kind=rep["kind"],
                reported=rep.get("value"),
                unit=rep.get("unit", ""),
                up_to=rep.get("up_to", False),
                explanation=claim.get("explanation", ""),
            )
            ex = experiments.get(claim["measure"]["experiment"])
            if ex is None:
                res.detail = (
                    f"this tier has no experiment {claim['measure']['experiment']!r}; "
                    "run the small or paper tier"
                )
                out.append(res)
                continue
            wanted = claim["measure"].get("scenarios") or ex.get("scenarios") or scenarios
            # Only the experiment's workloads (runs of other experiments may share names).
            mine = runs
            if ex.get("workloads"):
                mine = runs[runs["workload"].isin(ex["workloads"])]
            if rep["kind"] == "qualitative":
                _qualitative(claim, res, list(wanted), mine)
            else:
                _quantitative(claim, res, list(wanted), mine)
            out.append(res)
    return out
