"""Reported versus reproduced: each paper's claims measured on our runs, with a verdict.

A claim (``config/papers/<id>.yaml``, schema ``workflow/schemas/paper.schema.yaml``) fixes
before any run how it is judged: the experiment, the method, the baseline(s), the metric (the
first of ``metrics``; the others are shown beside it, never used in its place) and the
scenario(s). Nothing is chosen after the fact: with several baselines the verdict is against
the *strongest* (the one least favourable to the method), and with several scenarios every one
must pass (the verdict is the worst).

**Effects.** Per scenario and baseline, the method's and the baseline's runs are paired by
(workload, seed) and each pair gives one effect. Multiplicative effects are judged on a log
scale through the *gain* ``g``: ``log(baseline / ours)`` for a lower-is-better metric (times,
bytes), ``log(ours / baseline)`` for a higher-is-better one (accuracy, utilisation), so ``g > 0``
always means the method is better. ``reported.kind`` says how the gain is written:

* ``speedup``: ``exp(g)`` (``"41x faster"``);
* ``reduction``: ``100 (1 - exp(-g))`` % (``"74% less"``);
* ``ratio``: ``ours / baseline``;
* ``value``: the method's own metric (no baseline; judged on ``log(ours)``);
* ``qualitative``: a direction only, on every listed metric.

**Verdicts** (the interval is the two-sided 95% Student-t interval of the mean gain over seeds):

* REPRODUCED — at least 3 seeds, no censored run, and the whole interval inside the band
  ``|g - g_reported| <= log(1 + tolerance.reproduced)``. Exceeding the reported value beyond
  the band is no reproduction of it (the setup is more favourable than the paper's).
* EXCEEDED — an "up to" claim whose whole interval (3 or more seeds) lies above the band; the
  regime comparison beside it says how much more favourable our setup is.
  One-sided claims (a ``ratio`` of a higher-is-better metric, e.g. "accuracy falls by at most
  0.6%"): the interval's lower end at or above ``g_reported - log(1 + tolerance)``.
* PARTIAL — the effect clears the *partial floor* ``tolerance.partial * g_reported`` (default
  half the claimed effect on the log scale): the interval's lower end with 3 or more seeds,
  every seed with fewer. One-sided claims: the mean inside the band.
* NOT REPRODUCED — otherwise.
* NOT COMPARABLE (regime) — our measured regime lies outside the matching bounds of a field
  the paper reports or derives (:mod:`psml_core.analysis.regime`: comm/compute within 2x, the
  same bandwidth- or latency-bound side, the same density class); the detail names the field
  and by how much. Such a claim is never REPRODUCED or NOT REPRODUCED.
* NOT RUN — the tier has no runs for the claim (its experiment, method, baseline or scenario
  is not in the tier).
* SETUP FACT — ``setup_fact: true``: the quantity is set by our own choice of setup (a
  comm/compute ratio fixed by the link we chose); its value is stated, not judged.

Qualitative claims: per metric and scenario, the strongest baseline is the one with the best
mean; REPRODUCED needs 3 or more seeds and the method's worst seed beating the baseline's best
on every pair; PARTIAL, a better mean on every pair; otherwise NOT REPRODUCED.

**Censoring.** A run that never holds its target has no time (bytes, samples) to target: it is
censored at its end, where its total is a bound. Its pair's gain is then a bound too: at most
``log(baseline / our total)`` when the method's run is censored, at least ``log(baseline total
/ ours)`` when the baseline's is, unknown when both are. A claim with a censored run is never
REPRODUCED; one whose method is censored is NOT REPRODUCED (it did not reach the target); with
only the baseline censored it is PARTIAL when every bound clears the floor. The detail says
which seeds were censored.
"""

from __future__ import annotations

import glob
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from psml_core.analysis.claim_result import (
    CENSORED_BOUND,
    EXPLANATION_KEYS,
    HIGHER_IS_BETTER,
    MIN_SEEDS,
    NOT_COMPARABLE,
    VERDICT_RANK,
    ClaimResult,
)
from psml_core.analysis.gains import (
    Gains,
    censored_values,
    effect_to_gain,
    gain_interval,
    gain_to_effect,
    gains_of,
    metric_values,
)
from psml_core.analysis.regime import check_regime, measure_regime, paper_regime, regime_rows
from psml_core.config import load_yaml, validate
from psml_core.errors import ConfigError

__all__ = [
    "evaluate_claims",
    "explanation_for",
    "load_papers",
]

"""A verdict's key in a claim's ``explanation`` mapping of the paper file."""
"""Seeds a REPRODUCED verdict needs (an interval over fewer is not evidence)."""

"""Metrics a run may not reach (censored), and the run total that bounds them from below."""


def load_papers(
    directory: str | Path, extra: Sequence[str | Path] = ()
) -> dict[str, dict[str, Any]]:
    """Every paper file, validated, by id.

    The files are ``<id>.yaml`` under ``directory``, then ``extra`` (plugins' paper files); a
    file's name must match its id, and an id defined twice is an error.
    """
    papers: dict[str, dict[str, Any]] = {}
    paths = [*sorted(glob.glob(str(Path(directory) / "*.yaml"))), *map(str, extra)]
    for path in paths:
        raw = load_yaml(path, "paper file")
        data = validate(raw, "paper", source=f"paper file {path!r}")
        if Path(path).stem != data["id"]:
            raise ConfigError(
                f"invalid paper file {path!r}: id {data['id']!r} must match the file name"
            )
        for claim in data["claims"]:
            kind = claim["reported"]["kind"]
            if kind not in ("qualitative",) and "value" not in claim["reported"]:
                raise ConfigError(
                    f"invalid paper file {path!r}: claim {claim['id']!r} of kind {kind!r} needs "
                    "reported.value"
                )
            if kind not in ("value", "qualitative") and not claim["measure"].get("baseline"):
                raise ConfigError(
                    f"invalid paper file {path!r}: claim {claim['id']!r} of kind {kind!r} needs "
                    "measure.baseline"
                )
        if data["id"] in papers:
            raise ConfigError(
                f"invalid paper file {path!r}: paper {data['id']!r} is defined twice (a "
                "plugin's paper file has the id of another paper); rename one"
            )
        papers[data["id"]] = data
    return papers


"""Per-seed gains of a method against one baseline under one scenario (regime maps use it)."""

# --------------------------------------------------------------------------- results


def _judge(claim: dict[str, Any], g: Gains, metric: str) -> tuple[str, str, dict[str, float]]:
    """(verdict, detail, numbers in gain space) of one scenario's strongest pairing."""
    rep = claim["reported"]
    tol = claim.get("tolerance", {})
    g_rep = effect_to_gain(rep["kind"], metric, float(rep["value"]))
    width = math.log(1.0 + float(tol.get("reproduced", 0.25)))
    one_sided = rep["kind"] == "ratio" and metric in HIGHER_IS_BETTER
    floor = g_rep - width if one_sided else float(tol.get("partial", 0.5)) * g_rep
    n = len(g.seeds)
    exact = np.array([b == "" for b in g.bound])
    ci = gain_interval(g.gains) if exact.all() else (math.nan, math.nan)
    nums = {"g_rep": g_rep, "width": width, "floor": floor, "ci_low": ci[0], "ci_high": ci[1]}
    censored = [s for s, b in zip(g.seeds, g.bound, strict=True) if b]
    cens_note = ""
    if censored:
        what = CENSORED_BOUND.get(metric, "its total")
        cens_note = (
            f"censored (target never held; bounded by {what}) in seed"
            f"{'s' if len(censored) > 1 else ''} {', '.join(map(str, censored))}"
        )
    mean = g.mean
    band = (g_rep - width, g_rep + width)
    if any(b in ("at most", "unknown") for b in g.bound):
        who = (
            "the method did not hold the target in every seed"
            if any(b == "at most" for b in g.bound)
            else "neither run held the target in some seed"
        )
        return "NOT REPRODUCED", f"{who}: {cens_note}", nums
    if censored:
        ok = bool(np.all(g.gains >= floor))
        verdict = "PARTIAL" if ok else "NOT REPRODUCED"
        side = "clears" if ok else "does not clear"
        return verdict, f"the baseline {cens_note}; the bound {side} the partial floor", nums
    if one_sided:
        if n >= MIN_SEEDS and ci[0] >= floor:
            return "REPRODUCED", "the interval's lower end is within tolerance (one-sided)", nums
        if mean >= floor:
            why = f"n = {n} < {MIN_SEEDS}" if n < MIN_SEEDS else "the interval reaches below it"
            nums["seed_limited"] = float(n < MIN_SEEDS)
            return "PARTIAL", f"the mean is within tolerance (one-sided), but {why}", nums
        return "NOT REPRODUCED", "below the reported value by more than the tolerance", nums
    inside = n >= MIN_SEEDS and band[0] <= ci[0] and ci[1] <= band[1]
    if inside:
        return "REPRODUCED", "the 95% interval lies inside the tolerance band", nums
    clears = bool(ci[0] >= floor) if n >= MIN_SEEDS else bool(np.all(g.gains >= floor))
    if g_rep <= 0:  # a claim of no gain: there is no floor to clear
        clears = False
    if clears and n >= MIN_SEEDS and ci[0] > band[1] and claim["reported"].get("up_to"):
        return "EXCEEDED", 'the whole interval lies above the tolerance band of an "up to"', nums
    if clears:
        if n < MIN_SEEDS and bool(np.all((band[0] <= g.gains) & (g.gains <= band[1]))):
            why = f"every seed within the tolerance band, but n = {n} < {MIN_SEEDS} seeds"
            nums["seed_limited"] = 1.0
        elif n < MIN_SEEDS:
            why = f"n = {n} < {MIN_SEEDS} seeds (no interval)"
        elif ci[0] > band[1]:
            why = "the interval lies above the tolerance band (a more favourable setup)"
        elif mean > band[1]:
            why = "the interval reaches above the tolerance band"
        else:
            why = "the interval reaches below the tolerance band"
        return "PARTIAL", f"clears the partial floor; {why}", nums
    where = "the interval reaches below" if n >= MIN_SEEDS else "a seed falls below"
    return "NOT REPRODUCED", f"{where} the partial floor", nums


def _set_numbers(res: ClaimResult, g: Gains, metric: str, nums: dict[str, float]) -> None:
    kind = res.kind

    def eff(x: float) -> float:
        return gain_to_effect(kind, metric, x)

    vals = [eff(x) for x in g.gains if math.isfinite(x)]
    res.ours = eff(g.mean)
    res.low, res.high = (min(vals), max(vals)) if vals else (math.nan, math.nan)
    lo, hi = sorted((eff(nums["ci_low"]), eff(nums["ci_high"])))
    res.ci_low, res.ci_high = lo, hi
    res.floor = eff(nums["floor"])
    res.band_low, res.band_high = sorted(
        (eff(nums["g_rep"] - nums["width"]), eff(nums["g_rep"] + nums["width"]))
    )
    res.seeds = len(g.seeds)
    res.censored = sum(1 for b in g.bound if b)
    bounds = sorted({b for b in g.bound if b})
    res.bound = "/".join(bounds)


def _quantitative(claim: dict[str, Any], res: ClaimResult, scenarios: list[str],
                  runs: pd.DataFrame) -> None:  # fmt: skip
    meas = claim["measure"]
    metric = meas["metrics"][0]
    baselines = meas.get("baseline")
    baselines = [baselines] if isinstance(baselines, str) or baselines is None else baselines
    res.metric, res.baselines = metric, ", ".join(b for b in baselines if b)
    outcomes = []
    missing = []
    for sc in scenarios:
        options = []
        for b in baselines:
            got = gains_of(runs, meas, metric, b, sc)
            if got is None:
                missing.append(f"{b or meas['method']} under {sc}")
                continue
            options.append(got)
        if not options:
            continue
        # The strongest baseline: the least favourable to the method (bounds count as values).
        strongest = min(options, key=lambda o: o.mean if math.isfinite(o.mean) else -math.inf)
        verdict, detail, nums = _judge(claim, strongest, metric)
        outcomes.append((verdict, sc, strongest, detail, nums))
    if not outcomes or missing:
        res.verdict = "NOT RUN"
        gone = ", ".join(missing) if missing else f"the runs of {meas['method']}"
        res.detail = f"not run in this tier: no runs of {gone}"
        return
    # Every fixed scenario must pass: the worst decides (ties: the first listed).
    verdict, sc, g, detail, nums = min(outcomes, key=lambda o: VERDICT_RANK[o[0]])
    res.verdict, res.scenario, res.baseline = verdict, sc, g.baseline
    res.seed_limited = bool(nums.pop("seed_limited", 0.0))
    _set_numbers(res, g, metric, nums)
    res.detail = detail
    if len(outcomes) > 1:
        res.detail += "; " + ", ".join(f"{o[1]}: {o[0]}" for o in outcomes)
    for extra in meas["metrics"][1:]:  # shown beside the headline, never in its place
        other = gains_of(runs, meas, extra, g.baseline or None, sc)
        if other is not None and math.isfinite(other.mean):
            sel = runs[runs["scenario"] == sc]
            mine = metric_values(sel[sel["method"] == meas["method"]], extra).mean()
            theirs = metric_values(sel[sel["method"] == g.baseline], extra).mean()
            res.per_metric.append(
                {"metric": extra, "scenario": sc, "method": float(mine),
                 "baseline": float(theirs), "strongest": g.baseline, "beyond_spread": False}
            )  # fmt: skip


def _setup_fact(claim: dict[str, Any], res: ClaimResult, scenarios: list[str],
                runs: pd.DataFrame) -> None:  # fmt: skip
    meas = claim["measure"]
    metric = meas["metrics"][0]
    res.metric = metric
    vals = []
    for sc in scenarios:
        sel = runs[(runs["scenario"] == sc) & (runs["method"] == meas["method"])]
        if meas.get("workload"):
            sel = sel[sel["workload"] == meas["workload"]]
        vals.append((sc, metric_values(sel, metric).dropna()))
    if not any(len(v) for _, v in vals):
        res.verdict = "NOT RUN"
        res.detail = f"not run in this tier: no runs of {meas['method']}"
        return
    res.verdict = "SETUP FACT"
    # The first fixed scenario's value (a mean over scenarios would describe no setup).
    first_sc, first = next((sc, v) for sc, v in vals if len(v))
    res.scenario = first_sc
    res.ours, res.low, res.high = float(first.mean()), float(first.min()), float(first.max())
    res.seeds = int(first.size)
    res.detail = "set by our own choice of setup, not a finding: " + "; ".join(
        f"{sc}: {v.mean():.3g}" for sc, v in vals if len(v)
    )


def _qualitative(claim: dict[str, Any], res: ClaimResult, scenarios: list[str],
                 runs: pd.DataFrame) -> None:  # fmt: skip
    meas = claim["measure"]
    baselines = meas.get("baseline")
    baselines = [baselines] if isinstance(baselines, str) else list(baselines or [])
    res.baselines = ", ".join(baselines)
    better_mean = better_spread = total = 0
    seeds = 0
    censored = 0
    missing = []
    for metric in meas["metrics"]:
        sign = 1 if metric in HIGHER_IS_BETTER else -1
        for sc in scenarios:
            sel = runs[runs["scenario"] == sc]
            if meas.get("workload"):
                sel = sel[sel["workload"] == meas["workload"]]
            mine = sel[sel["method"] == meas["method"]]
            if mine.empty:
                missing.append(f"{meas['method']} under {sc}")
                continue
            ours, our_c = censored_values(mine, metric)
            # A censored run of ours took longer than its bound: count it as never (conservative);
            # a censored baseline run keeps its bound (it looks faster than it was).
            ours = np.where(our_c, -sign * math.inf, ours)
            censored += int(our_c.sum())
            cands = []
            for b in baselines:
                rows = sel[sel["method"] == b]
                if rows.empty:
                    missing.append(f"{b} under {sc}")
                    continue
                vals, vc = censored_values(rows, metric)
                censored += int(vc.sum())
                cands.append((sign * float(np.mean(vals)), b, vals))
            if not cands:
                continue
            _, name, base = max(cands)
            total += 1
            seeds = max(seeds, len(ours))
            with np.errstate(invalid="ignore"):
                mean_better = sign * (float(np.mean(ours)) - float(np.mean(base))) > 0
            worst = ours.min() if sign > 0 else ours.max()
            best = base.max() if sign > 0 else base.min()
            spread_better = sign * (worst - best) > 0
            better_mean += bool(mean_better)
            better_spread += bool(spread_better)
            res.per_metric.append(
                {
                    "metric": metric,
                    "scenario": sc,
                    "baseline": float(np.mean(base)),
                    "method": float(np.mean(ours)),
                    "strongest": name,
                    "beyond_spread": bool(spread_better),
                }  # fmt: skip
            )
    if missing or total == 0:
        res.verdict = "NOT RUN"
        res.detail = "not run in this tier: no runs of " + ", ".join(missing or [meas["method"]])
        return
    res.metric = ", ".join(meas["metrics"])
    res.scenario = ", ".join(scenarios)
    res.baseline = ", ".join(sorted({m["strongest"] for m in res.per_metric}))
    res.seeds, res.censored = seeds, censored
    if better_spread == total and seeds >= MIN_SEEDS:
        res.verdict = "REPRODUCED"
    elif better_mean == total:
        res.verdict = "PARTIAL"
    else:
        res.verdict = "NOT REPRODUCED"
    res.ours, res.low, res.high = float(better_mean), float(better_spread), float(total)
    res.detail = (
        f"better on {better_mean} of {total} metric-scenario pairs on average, "
        f"{better_spread} beyond the seed spread (worst seed of the method beats the best of "
        f"the strongest baseline); n = {seeds}"
    )
    if better_spread == total and seeds < MIN_SEEDS:
        res.detail += f" (REPRODUCED needs {MIN_SEEDS} seeds)"
        res.seed_limited = True
    if censored:
        res.detail += f"; {censored} censored run(s) (never held the target) counted as bounds"


def _regime(
    paper: dict[str, Any], claim: dict[str, Any], res: ClaimResult, scenarios: list[str],
    runs: pd.DataFrame, config: dict[str, Any],
) -> None:  # fmt: skip
    """Measure the claim's regime in each fixed scenario; off-regime verdicts: NOT COMPARABLE."""
    theirs = paper_regime(paper, claim)
    shown = res.scenario.split(", ")[0] if res.scenario else scenarios[0]
    statuses, notes = [], []
    for sc in scenarios:
        ours = measure_regime(claim, runs, config, sc)
        status, why = check_regime(theirs, ours)
        statuses.append(status)
        notes += [f"{sc}: {w}" if len(scenarios) > 1 else w for w in why]
        if sc == shown:
            res.regime = regime_rows(theirs, ours)
    res.regime_status = (
        "off" if "off" in statuses else "matched" if "matched" in statuses else "unknown"
    )
    res.regime_notes = "; ".join(notes)
    if res.regime_status == "off" and res.verdict in VERDICT_RANK:
        res.detail = f"measured {res.verdict} ({res.detail}), but outside the paper's regime"
        res.verdict = NOT_COMPARABLE


def evaluate_claims(
    papers: dict[str, dict[str, Any]],
    runs: pd.DataFrame,
    experiments: dict[str, dict[str, Any]],
    scenarios: list[str] | None = None,
    config: dict[str, Any] | None = None,
) -> list[ClaimResult]:
    """Measure every claim on the runs and give it a verdict.

    Args:
        papers: :func:`load_papers`.
        runs: The runs table (``runs.csv``).
        experiments: The tier's experiments (name -> its config block).
        scenarios: Unused (kept for callers); every claim names its own scenarios.
        config: The effective config (scenarios and workloads, sweeps resolved), for each
            claim's regime; without it the regime is not measured.

    Returns:
        One :class:`ClaimResult` per claim, in paper and claim order. A claim whose experiment
        or runs the tier lacks is NOT RUN, with a detail saying what is missing.
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
            )
            meas = claim["measure"]
            ex = experiments.get(meas["experiment"])
            if ex is None:
                res.detail = (
                    f"not run in this tier: it has no experiment {meas['experiment']!r} "
                    "(run the small or paper tier)"
                )
                out.append(res)
                continue
            wanted = list(meas["scenarios"])
            res.workload = meas.get("workload") or ", ".join(ex.get("workloads") or [])
            mine = runs
            if ex.get("workloads"):  # only the experiment's workloads (others may share names)
                mine = runs[runs["workload"].isin(ex["workloads"])]
            if claim.get("setup_fact"):
                _setup_fact(claim, res, wanted, mine)
            elif rep["kind"] == "qualitative":
                _qualitative(claim, res, wanted, mine)
            else:
                _quantitative(claim, res, wanted, mine)
            if config is not None and res.verdict != "NOT RUN":
                _regime(paper, claim, res, wanted, mine, config)
            res.explanation = explanation_for(claim, res.verdict, res.seeds, res.seed_limited)
            out.append(res)
    return out


def explanation_for(
    claim: dict[str, Any], verdict: str, seeds: int = MIN_SEEDS, seed_limited: bool = False
) -> str:
    """The paper file's explanation of this verdict, or "" if it gives none for it.

    ``explanation`` maps verdict keys (``not_reproduced``, ``partial``, ``exceeded``,
    ``not_comparable``, ``reproduced``) to text, so that an explanation written for one outcome
    is never printed beside another. A PARTIAL held back only by its number of seeds
    (``seed_limited``: every seed inside the band, or beyond the spread) is explained as such,
    not by the text written for a smaller effect.
    """
    if verdict == "PARTIAL" and seed_limited:
        ran = "the one seed run" if seeds == 1 else f"each of the {seeds} seeds run"
        return (
            f"the claim holds in {ran}, but REPRODUCED needs "
            f"{MIN_SEEDS} seeds and a 95% interval; run this tier with more seeds (for example "
            "--config 'seeds=[0,1,2]')"
        )
    by_verdict = claim.get("explanation") or {}
    key = EXPLANATION_KEYS.get(verdict)
    return str(by_verdict.get(key) or "") if key else ""
