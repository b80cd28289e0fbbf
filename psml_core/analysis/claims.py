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
  two-sided around the paper's drop, the band one test sample wide on each side.
* EXCEEDED — an "up to" claim (or an accuracy drop) whose whole interval (3 or more seeds)
  lies above the band: a setup more favourable than the paper's is no reproduction.
* PARTIAL — the effect clears the *partial floor* ``tolerance.partial * g_reported`` (default
  half the claimed effect on the log scale): the interval's lower end with 3 or more seeds,
  every seed with fewer.
* NOT REPRODUCED — otherwise.
* INCONSISTENT (paper) — the paper's own regime numbers bound the effect below the claimed
  value (:mod:`.consistency`: Amdahl from comm/compute and density); the arithmetic is printed.
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

**Cause and resolution.** Every verdict but REPRODUCED names what decided it (``cause``): a
regime field, the paper's bound, a run's fate (diverged, censored), the seeds, or a property
of the method (the paper file's explanation). Every claim states its resolution: the time to
target's grid step against the dense baseline's time, and the test set's size.
"""

from __future__ import annotations

import glob
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from psml_core.analysis.claim_result import (
    EXPLANATION_KEYS,
    INCONSISTENT,
    MIN_SEEDS,
    NOT_COMPARABLE,
    VERDICT_RANK,
    ClaimResult,
)
from psml_core.analysis.consistency import consistency_bound
from psml_core.analysis.gains import (
    Gains,
    effect_to_gain,
    gain_to_effect,
    gains_of,
    metric_values,
)
from psml_core.analysis.pairing import strongest_pairing, worst
from psml_core.analysis.qualitative import judge_qualitative
from psml_core.analysis.regime import check_regime, measure_regime, paper_regime, regime_rows
from psml_core.analysis.resolution import resolution_text
from psml_core.analysis.run_status import as_list, diverged_note, diverged_runs, usable_baselines
from psml_core.analysis.second_rows import codec_free_row, robustness_row
from psml_core.config import load_yaml, validate
from psml_core.errors import ConfigError

__all__ = [
    "CAUSE_KINDS",
    "evaluate_claims",
    "explanation_for",
    "load_papers",
]


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
    for extra in meas["metrics"][1:]:  # shown beside the headline, never in its place
        other = gains_of(runs, meas, extra, g.baseline or None, sc)
        if other is not None and math.isfinite(other.mean):
            sel = runs[runs["scenario"] == sc]
            ours = metric_values(sel[sel["method"] == meas["method"]], extra).mean()
            theirs = metric_values(sel[sel["method"] == g.baseline], extra).mean()
            res.per_metric.append(
                {"metric": extra, "scenario": sc, "method": float(ours),
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
    out = judge_qualitative(claim, scenarios, ok, usable)
    res.verdict, res.detail, res.baseline = out.verdict, out.detail, out.baseline
    if out.verdict == "NOT RUN":
        return
    res.seeds, res.censored, res.seed_limited = out.seeds, out.censored, out.seed_limited
    res.per_metric = out.per_metric
    res.ours, res.low, res.high = float(out.better), float(out.beyond), float(out.total)
    if notes:
        res.detail += "; left out of the named family: " + "; ".join(notes)
    extra = as_list(meas.get("robustness"))
    if extra:
        pool, _ = usable_baselines(runs, list(dict.fromkeys([*usable, *extra])), scenarios)
        rob = judge_qualitative(claim, scenarios, ok, pool)
        res.robust_verdict, res.robust_baseline = rob.verdict, rob.baseline
        res.robust_ours = float(rob.better)
        res.robust_detail = rob.detail


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
    """The bound the paper's own numbers put on the claim; INCONSISTENT when it exceeds it."""
    found = consistency_bound(claim, paper_regime(paper, claim))
    if found is None:
        return
    res.bound_value, res.bound_text = found
    metric = claim["measure"]["metrics"][0]
    g_rep = effect_to_gain(res.kind, metric, float(claim["reported"]["value"]))
    g_max = effect_to_gain(res.kind, metric, res.bound_value)
    if g_rep > g_max + 1e-9 and res.verdict not in ("NOT RUN", "SETUP FACT"):
        res.detail = f"measured {res.verdict} ({res.detail}); the paper's value exceeds its bound"
        res.verdict = INCONSISTENT
        res.cause = f"bound: {res.bound_text}; the claimed {res.reported:g} exceeds it"


CAUSE_KINDS = ("regime", "bound", "run", "seeds", "method")
"""What a cause may name (docs/measurement.md): a paper file's explanation that starts with one
of these and a colon names its own kind (a data set's ceiling is a regime, not the method)."""


def _cause(res: ClaimResult) -> str:
    """What decided a verdict that is not REPRODUCED (see the module docstring)."""
    if res.cause or res.verdict in ("REPRODUCED", "SETUP FACT"):
        return res.cause
    if res.verdict == "NOT RUN":
        return "not run: " + res.detail
    if "did not hold the target" in res.detail or "neither run held" in res.detail:
        return "run: the method never held its target in some seed (censored)"
    if res.seed_limited:
        return f"seeds: the effect holds in every seed, but REPRODUCED needs {MIN_SEEDS}"
    if res.verdict == "EXCEEDED" or res.above_band:
        return "regime: a setup more favourable than the paper's (see the regime rows)"
    key = EXPLANATION_KEYS.get(res.verdict, "")
    why = " ".join(res.explanation.split()) if res.explanation else ""
    first = why.split(". ")[0].rstrip(".")
    if first.split(":")[0] in CAUSE_KINDS:  # the paper file names the kind: "regime: ..."
        return first
    if why:
        return f"method: {first}"
    return f"method: no explanation recorded (explanation.{key} in the paper file)"


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
            meas = claim["measure"]
            res = ClaimResult(
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
            ex = experiments.get(meas["experiment"])
            if ex is None:
                res.detail = (
                    f"not run in this tier: it has no experiment {meas['experiment']!r} "
                    "(run the small or paper tier)"
                )
                res.cause = "not run: " + res.detail
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
            _bound(paper, claim, res)
            res.resolution = resolution_text(claim, mine, wanted)
            res.explanation = explanation_for(
                claim, res.verdict, res.seeds, res.seed_limited, res.above_band
            )
            res.cause = _cause(res)
            out.append(res)
    return out


def explanation_for(
    claim: dict[str, Any],
    verdict: str,
    seeds: int = MIN_SEEDS,
    seed_limited: bool = False,
    above_band: bool = False,
) -> str:
    """The paper file's explanation of this verdict, or "" if it gives none for it.

    ``explanation`` maps verdict keys (``not_reproduced``, ``partial``, ``exceeded``,
    ``not_comparable``, ``inconsistent``, ``reproduced``) to text, so that an explanation
    written for one outcome is never printed beside another. A PARTIAL held back only by its
    number of seeds (``seed_limited``: every seed inside the band, or beyond the spread) is
    explained as such, not by the text written for a smaller effect; nor is a PARTIAL whose
    whole interval lies above the band (``above_band``), which takes the text written for
    EXCEEDED, or says that the setup favours the method more than the paper's did.
    """
    if verdict == "PARTIAL" and seed_limited:
        ran = "the one seed run" if seeds == 1 else f"each of the {seeds} seeds run"
        return (
            f"the claim holds in {ran}, but REPRODUCED needs "
            f"{MIN_SEEDS} seeds and a 95% interval; run this tier with more seeds (for example "
            "--config 'seeds=[0,1,2]')"
        )
    by_verdict = claim.get("explanation") or {}
    if verdict == "PARTIAL" and above_band:
        return str(
            by_verdict.get("exceeded")
            or "the whole 95% interval lies above the paper's tolerance band: our setup favours "
            "the method more than the paper's did (see the regime rows); a larger effect than "
            "reported is no reproduction of the reported one"
        )
    key = EXPLANATION_KEYS.get(verdict)
    return str(by_verdict.get(key) or "") if key else ""
