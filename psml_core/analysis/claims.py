"""Reported versus reproduced: each paper's claims measured on our runs, with a verdict.

A claim (``config/papers/<id>.yaml``, schema ``workflow/schemas/paper.schema.yaml``) fixes
before any run how it is judged: the experiment, the method, the comparator the paper names
(``measure.baseline``), our other baselines (``measure.robustness``), the metric (the first
of ``metrics``; the others are shown beside it, never used in its place) and the
scenario(s). Nothing is chosen after the fact.

**Against what.** The verdict is against the comparator the paper names: "DFS beats
OmniReduce" is judged against our OmniReduce, not against whichever of our baselines happens
to be strongest. Where the paper names a family (uniform compression at some ratio, SSP at
some bound), each of our configurations of it is listed and the verdict is against the
strongest member (quantitative claims) or the best single member on the primary metric
(qualitative claims, :mod:`.qualitative`). Against the strongest of the named comparator
and our other baselines the same rule gives a second row, labelled *robustness*: it says
whether the effect survives a stronger rival, and is never the verdict. With several
scenarios every one must pass (the verdict is the worst).

**Runs that diverged** (:mod:`psml_core.metrics.divergence`) are never a baseline: a claim
whose named comparator diverged is NOT RUN (baseline diverged), and a diverged member of a
family or a robustness baseline is left out and named. A claim whose method diverged is NOT
REPRODUCED (diverged).

**Effects.** Per scenario and baseline, the method's and the baseline's runs are paired by
(workload, seed) and each pair gives one effect. Multiplicative effects are judged on a log
scale through the *gain* ``g``: ``log(baseline / ours)`` for a lower-is-better metric (times,
bytes), ``log(ours / baseline)`` for a higher-is-better one (accuracy, utilisation), so ``g > 0``
always means the method is better. ``reported.kind`` says how the gain is written:

* ``speedup``: ``exp(g)`` (``"41x faster"``);
* ``reduction``: ``100 (1 - exp(-g))`` % (``"74% less"``);
* ``ratio``: ``ours / baseline``;
* ``value``: the method's own metric (no baseline; judged on ``log(ours)``);
* ``qualitative``: a direction only (:mod:`.qualitative`).

**Verdicts** (:mod:`.judge`; the interval is the two-sided 95% Student-t interval of the mean
gain over seeds):

* REPRODUCED — at least 3 seeds, no censored run, and the whole interval inside the band
  ``|g - g_reported| <= log(1 + tolerance.reproduced)``. An accuracy ratio is judged
  two-sided around the paper's ratio in a band as wide as the largest of the tolerance, the
  test set's binomial error and the seed spread, and REPRODUCED when its *mean* lies inside
  (:mod:`.judge`). A qualitative claim needs its primary effect beyond the seed spread and at
  least its pre-registered minimum effect, and the method at its workload's target accuracy
  (:mod:`.qualitative`, :mod:`.min_effect`, :mod:`.accuracy_checks`).
* EXCEEDED — an "up to" claim (or an accuracy drop) whose whole interval (3 or more seeds)
  lies above the band: a setup more favourable than the paper's is no reproduction.
* PARTIAL — the effect clears the *partial floor* ``tolerance.partial * g_reported`` (default
  half the claimed effect on the log scale): the interval's lower end with 3 or more seeds,
  every seed with fewer.
* NOT REPRODUCED — otherwise.
* INCONSISTENT (paper) — the paper's own regime numbers bound the effect below the claimed
  value (:mod:`.consistency`: Amdahl from comm/compute and density); the arithmetic is printed.
  Where the paper gives several values for the claim's setting, the range of bounds is printed
  and only a claim above all of them is inconsistent.
* NOT COMPARABLE (regime) — our measured regime lies outside the matching bounds of a field
  the paper reports or derives (:mod:`psml_core.analysis.regime`).
* NOT RUN — the tier has no runs for the claim, or its named comparator diverged.
* SETUP FACT — ``setup_fact: true``: the quantity is set by our own choice of setup.

**Censoring.** A run that never holds its target has no time (bytes, samples) to target: it is
censored at its end, where its total is a bound. Its pair's gain is then a bound too: at most
``log(baseline / our total)`` when the method's run is censored, at least ``log(baseline total
/ ours)`` when the baseline's is, unknown when both are. A claim with a censored run is never
REPRODUCED; one whose method is censored is NOT REPRODUCED; with only the baseline censored it
is PARTIAL when every bound clears the floor.

**Cause and resolution.** Every verdict but REPRODUCED names what decided it (``cause``,
prefixed by its class, ``cause_class``; :mod:`.causes`): a property of the method
(``method``), a regime field (``regime``), the paper's bound (``bound``), a setting or rule of
ours (``ours``: a defect to fix), or mechanically a run's fate (``run``), the seeds
(``seeds``) or a missing run (``not run``). Every claim states its resolution: the time to
target's grid step against the dense baseline's time, and the test set's size. A claim judged
on a time or bytes to target carries both sides' mean final accuracy beside its effect.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from psml_core.analysis.accuracy_checks import below_target, final_accuracies, is_to_target
from psml_core.analysis.causes import cause_class, cause_of, explanation_for
from psml_core.analysis.claim_result import (
    CENSORED_BOUND,
    INCONSISTENT,
    NOT_COMPARABLE,
    VERDICT_RANK,
    ClaimResult,
)
from psml_core.analysis.consistency import consistency_bound
from psml_core.analysis.gains import (
    Gains,
    censored_values,
    effect_to_gain,
    gain_to_effect,
    gains_of,
    metric_values,
)
from psml_core.analysis.judge import band_source
from psml_core.analysis.min_effect import min_effect_of
from psml_core.analysis.pairing import strongest_pairing, worst
from psml_core.analysis.paper_files import load_papers
from psml_core.analysis.qualitative import judge_qualitative
from psml_core.analysis.regime import check_regime, measure_regime, paper_regime, regime_rows
from psml_core.analysis.resolution import resolution_text
from psml_core.analysis.run_status import as_list, diverged_note, diverged_runs, usable_baselines
from psml_core.analysis.second_rows import codec_free_row, robustness_row

__all__ = [
    "Oracles",
    "evaluate_claims",
    "explanation_for",
    "load_papers",
]

Oracles = Mapping[tuple[str, str], Mapping[str, Any]]
"""``(workload, method) -> oracle bound`` (:func:`.partition_files.oracle_bounds`)."""


# --------------------------------------------------------------------------- quantitative


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
    res.band_set_by = band_source(nums)
    if res.band_set_by:  # an accuracy ratio: its noise figures, as log gains
        res.noise_test_se, res.noise_seed_sd = nums["noise_test"], nums["noise_seeds"]


def _quantitative(claim: dict[str, Any], res: ClaimResult, scenarios: list[str],
                  runs: pd.DataFrame) -> None:  # fmt: skip
    meas = claim["measure"]
    metric = meas["metrics"][0]
    named = as_list(meas.get("baseline")) or [None]  # None: a value of the method alone
    res.metric, res.baselines = metric, ", ".join(b for b in named if b)
    mine = diverged_runs(runs, meas["method"], scenarios)
    if not mine.empty:
        res.verdict = "NOT REPRODUCED"
        res.detail = diverged_note(mine, f"the method {meas['method']}")
        res.cause = "run: the method diverged"
        res.seeds = int(len(set(runs.loc[runs["method"] == meas["method"], "seed"])))
        return
    usable, notes = usable_baselines(runs, [b for b in named if b], scenarios)
    if named != [None] and not usable:
        res.verdict = "NOT RUN"
        res.detail = "baseline diverged: " + "; ".join(notes)
        res.cause = "run: the named comparator diverged"
        return
    outcomes, missing = strongest_pairing(claim, usable or [None], scenarios, runs)
    if not outcomes or missing:
        res.verdict = "NOT RUN"
        gone = ", ".join(missing) if missing else f"the runs of {meas['method']}"
        res.detail = f"not run in this tier: no runs of {gone}"
        return
    verdict, sc, g, detail, nums = worst(outcomes)
    res.verdict, res.scenario, res.baseline = verdict, sc, g.baseline
    res.seed_limited = bool(nums.pop("seed_limited", 0.0))
    res.above_band = bool(nums.pop("above_band", 0.0))
    _set_numbers(res, g, metric, nums)
    res.detail = detail
    if len(outcomes) > 1:
        res.detail += "; " + ", ".join(f"{o[1]}: {o[0]}" for o in outcomes)
    if notes:
        res.detail += "; left out of the named family: " + "; ".join(notes)
    robustness_row(claim, res, [b for b in usable if b], scenarios, runs)
    codec_free_row(claim, res, list(usable) or [None], scenarios, runs)
    if g.baseline:  # the judged metric leads the means; accuracy next, then the others
        res.per_metric.append(_judged_means(runs, meas["method"], g.baseline, metric, sc))
    extras = sorted(meas["metrics"][1:], key=lambda m: m != "final_test_accuracy")
    for extra in extras:  # shown beside the headline, never in its place
        other = gains_of(runs, meas, extra, g.baseline or None, sc)
        if other is not None and math.isfinite(other.mean):
            sel = runs[runs["scenario"] == sc]
            ours = metric_values(sel[sel["method"] == meas["method"]], extra).mean()
            theirs = metric_values(sel[sel["method"] == g.baseline], extra).mean()
            res.per_metric.append(
                {"metric": extra, "scenario": sc, "method": float(ours),
                 "baseline": float(theirs), "strongest": g.baseline, "beyond_spread": False}
            )  # fmt: skip


def _judged_means(
    runs: pd.DataFrame, method: str, baseline: str, metric: str, scenario: str
) -> dict[str, Any]:
    """Both sides' mean of the claim's own metric in its deciding scenario.

    A run that never held its target counts at its bound (its total), as the verdict counts it,
    and the entry says so: that side's mean is then a lower bound.
    """
    sel = runs[runs["scenario"] == scenario]
    means, notes = [], []
    for who, name in (("the method", method), ("the comparator", baseline)):
        values, censored = censored_values(sel[sel["method"] == name], metric)
        means.append(float(values.mean()) if values.size else math.nan)
        if censored.any():
            notes.append(
                f"{who} censored in {int(censored.sum())} of {values.size} seed(s), counted at "
                f"its {CENSORED_BOUND[metric]}: at least"
            )
    return {"metric": metric, "scenario": scenario, "method": means[0], "baseline": means[1],
            "strongest": baseline, "role": "judged", "outcome": "; ".join(notes)}  # fmt: skip


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


def _qualitative(
    claim: dict[str, Any], res: ClaimResult, scenarios: list[str], runs: pd.DataFrame,
    config: dict[str, Any] | None, oracles: Oracles,
) -> None:  # fmt: skip
    meas = claim["measure"]
    named = as_list(meas.get("baseline"))
    res.baselines = ", ".join(named)
    res.metric = ", ".join(meas["metrics"])
    res.scenario = ", ".join(scenarios)
    mine = diverged_runs(runs, meas["method"], scenarios)
    if not mine.empty:
        res.verdict = "NOT REPRODUCED"
        res.detail = diverged_note(mine, f"the method {meas['method']}")
        res.cause = "run: the method diverged"
        return
    usable, notes = usable_baselines(runs, named, scenarios)
    if not usable:
        res.verdict = "NOT RUN"
        res.detail = "baseline diverged: " + "; ".join(notes)
        res.cause = "run: the named comparator diverged"
        return
    ok = runs[runs.get("status", pd.Series("ok", index=runs.index)) != "diverged"]
    floor = min_effect_of(claim, ok, scenarios, oracles)
    if floor is not None:
        res.min_effect, res.min_effect_text = floor.value, floor.text
    out = judge_qualitative(claim, scenarios, ok, usable, floor)
    res.verdict, res.detail, res.baseline = out.verdict, out.detail, out.baseline
    if out.verdict == "NOT RUN":
        return
    res.seeds, res.censored, res.seed_limited = out.seeds, out.censored, out.seed_limited
    res.per_metric = out.per_metric
    res.ours, res.low, res.high = float(out.better), float(out.beyond), float(out.total)
    if notes:
        res.detail += "; left out of the named family: " + "; ".join(notes)
    short = below_target(claim, ok, scenarios, config)
    if short:  # the method falls short of its own workload's target, whatever the baseline
        res.verdict, res.seed_limited = "NOT REPRODUCED", False
        res.detail += f"; {short}"
        res.cause = f"run: {short}"
    extra = as_list(meas.get("robustness"))
    if extra:
        pool, _ = usable_baselines(runs, list(dict.fromkeys([*usable, *extra])), scenarios)
        rob = judge_qualitative(claim, scenarios, ok, pool, floor)
        res.robust_verdict, res.robust_baseline = rob.verdict, rob.baseline
        res.robust_ours = float(rob.better)
        res.robust_detail = rob.detail
        if short and rob.verdict != "NOT RUN":
            res.robust_verdict, res.robust_detail = "NOT REPRODUCED", f"{rob.detail}; {short}"


# --------------------------------------------------------------------------- regime, bounds


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
        status, why = check_regime(theirs, ours, claim["measure"]["metrics"][0])
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
        res.cause = "regime: " + res.regime_notes


def _bound(paper: dict[str, Any], claim: dict[str, Any], res: ClaimResult) -> None:
    """The bound the paper's own numbers put on the claim; INCONSISTENT above all of it."""
    found = consistency_bound(claim, paper_regime(paper, claim))
    if found is None:
        return
    res.bound_low, res.bound_value, res.bound_text = found.low, found.high, found.text
    metric = claim["measure"]["metrics"][0]
    g_rep = effect_to_gain(res.kind, metric, float(claim["reported"]["value"]))
    g_max = effect_to_gain(res.kind, metric, found.high)
    if g_rep > g_max + 1e-9 and res.verdict not in ("NOT RUN", "SETUP FACT"):
        res.detail = f"measured {res.verdict} ({res.detail}); the paper's value exceeds its bound"
        res.verdict = INCONSISTENT
        res.cause = f"bound: {res.bound_text}; the claimed {res.reported:g} exceeds it"


def evaluate_claims(
    papers: dict[str, dict[str, Any]],
    runs: pd.DataFrame,
    experiments: dict[str, dict[str, Any]],
    scenarios: list[str] | None = None,
    config: dict[str, Any] | None = None,
    oracles: Oracles | None = None,
) -> list[ClaimResult]:
    """Measure every claim on the runs and give it a verdict.

    Args:
        papers: :func:`load_papers`.
        runs: The runs table (``runs.csv``).
        experiments: The tier's experiments (name -> its config block).
        scenarios: Unused (kept for callers); every claim names its own scenarios.
        config: The effective config (scenarios and workloads, sweeps resolved), for each
            claim's regime and its workloads' target accuracies; without it neither is used.
        oracles: The oracle bounds of the placement files (:func:`.partition_files.oracle_bounds`),
            for a qualitative claim's minimum effect stated as a share of the oracle's cut;
            without them its stated fallback applies.

    Returns:
        One :class:`ClaimResult` per claim, in paper and claim order. A claim whose experiment
        or runs the tier lacks is NOT RUN, with a detail saying what is missing.
    """
    out = []
    for pid, paper in papers.items():
        for claim in paper["claims"]:
            res = _result(pid, claim)
            ex = experiments.get(claim["measure"]["experiment"])
            if ex is None:
                res.detail = (
                    f"not run in this tier: it has no experiment "
                    f"{claim['measure']['experiment']!r} (run the small or paper tier)"
                )
                res.cause, res.cause_class = "not run: " + res.detail, "not run"
                out.append(res)
                continue
            _evaluate(paper, claim, res, ex, runs, config, oracles or {})
            out.append(res)
    return out


def _result(pid: str, claim: dict[str, Any]) -> ClaimResult:
    """A claim's result before any measurement (NOT RUN)."""
    rep, meas = claim["reported"], claim["measure"]
    return ClaimResult(
        paper=pid,
        claim=claim["id"],
        statement=claim["statement"],
        source=claim["source"],
        kind=rep["kind"],
        reported=rep.get("value"),
        unit=rep.get("unit", ""),
        up_to=rep.get("up_to", False),
        comparator=str(meas.get("comparator") or ""),
    )


def _evaluate(
    paper: dict[str, Any], claim: dict[str, Any], res: ClaimResult, ex: dict[str, Any],
    runs: pd.DataFrame, config: dict[str, Any] | None, oracles: Oracles,
) -> None:  # fmt: skip
    """Measure one claim of a tier experiment ``ex`` into ``res`` (see :func:`evaluate_claims`)."""
    meas = claim["measure"]
    wanted = list(meas["scenarios"])
    res.workload = meas.get("workload") or ", ".join(ex.get("workloads") or [])
    mine = runs
    if ex.get("workloads"):  # only the experiment's workloads (others may share names)
        mine = runs[runs["workload"].isin(ex["workloads"])]
    if claim.get("setup_fact"):
        _setup_fact(claim, res, wanted, mine)
    elif claim["reported"]["kind"] == "qualitative":
        _qualitative(claim, res, wanted, mine, config, oracles)
    else:
        _quantitative(claim, res, wanted, mine)
    if config is not None and res.verdict != "NOT RUN":
        _regime(paper, claim, res, wanted, mine, config)
    _bound(paper, claim, res)
    res.resolution = resolution_text(claim, mine, wanted)
    if is_to_target(claim) and res.verdict != "NOT RUN":
        res.method_accuracy, res.baseline_accuracy = final_accuracies(claim, res, mine)
    res.explanation = explanation_for(
        claim, res.verdict, res.seeds, res.seed_limited, res.above_band
    )
    res.cause = cause_of(res)
    res.cause_class = cause_class(res.cause)
