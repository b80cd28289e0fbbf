"""Run a target's tuning sweep and choose its operating point (:mod:`.rule`).

Stage 0 runs the recipe's free parameter (its ``tune`` block: OmniReduce's block size, a
uniform ratio, DC2's target ratio of delay to compute) at each of its values with the declared
learning rate, momentum and warm-up; a recipe without one has a single stage-0 run, the
declared point. Stage 1 runs every learning rate of ``tuning.lr_factors`` (1 always included:
the declared point) with the momentum on and off *within the recipe's own mechanism*: the workload's
momentum on the server's optimizer for plain and error-feedback recipes, or as DGC's momentum
correction on the workers for recipes with ``momentum_correction: true``; off is momentum 0
in either. Switching a recipe from error feedback to momentum correction would make it another
recipe (``topk_ef`` into ``topk_mc``), so the sweep never does. An optimizer without momentum
(AdaGrad) tunes the learning rate only. Stage 2 runs stage 1's point with the other warm-up
(``tuning.warmup_fraction`` of the iterations when the workload declares none, else none).
Each stage continues from the previous one's choice under the key's objective (the metric its
claims judge, :mod:`.objective`); the final point is the rule over every candidate run.

Every candidate is a full run at the tuning seed, written like any run (``metrics.parquet``,
``summary.json``) under the target's tuning directory. The chosen candidate then runs at the
check seeds (``tuning.check_seeds``); one that diverges there is passed over and the rule
chooses again (:mod:`.rule`).

A candidate whose directory already holds a finished run of the same settings (its
``summary.json`` names the same settings hash) is read back, not trained again: the runs are
deterministic, so a killed or re-ruled sweep resumes where it stopped. Delete the directory
to train everything again.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from psml_core import __version__
from psml_core.config import RunSpec, TuningSpec
from psml_core.data.store import load_prepared
from psml_core.engine.job import corrects_momentum
from psml_core.engine.optim import optimizer_class
from psml_core.engine.progress import NullProgress
from psml_core.engine.training import train
from psml_core.metrics.divergence import divergence
from psml_core.tuning.rule import RULE, Candidate, Choice, choose
from psml_core.tuning.targets import TuneTarget

__all__ = [
    "DEFAULT_MOMENTUM",
    "candidate_spec",
    "free_values",
    "handling",
    "stage1_grid",
    "tune",
]

DEFAULT_MOMENTUM = 0.9
"""The momentum tried as "on" for a workload that declares none."""


def handling(spec: RunSpec, momentum: float) -> str:
    """How a run with ``momentum`` uses it: server, correction, none or n/a (AdaGrad)."""
    if not optimizer_class(spec.workload).uses_momentum:
        return "n/a"
    if momentum == 0:
        return "none"
    return "correction" if corrects_momentum(spec) else "server"


def stage1_grid(spec: RunSpec, tuning: TuningSpec) -> list[tuple[float, float]]:
    """Stage 1's (lr factor, momentum) pairs, the declared point's first."""
    wl = spec.workload
    factors = [1.0, *sorted(f for f in set(tuning.lr_factors) if f != 1.0)]
    if not optimizer_class(wl).uses_momentum:
        return [(f, wl.momentum) for f in factors]
    on = wl.momentum if wl.momentum > 0 else DEFAULT_MOMENTUM
    moms = [wl.momentum, on if wl.momentum == 0 else 0.0]
    return [(f, m) for f in factors for m in moms]


def candidate_spec(
    spec: RunSpec,
    key: str,
    factor: float,
    momentum: float,
    warmup: int,
    params: dict[str, Any] | None = None,
) -> RunSpec:
    """The target's run with a candidate's settings, and a run id naming the candidate."""
    wl = spec.workload
    changed = dataclasses.replace(
        wl, lr=wl.lr * factor, momentum=momentum, warmup_iterations=warmup
    )
    free = "".join(f"_{p.rsplit('.', 1)[-1]}{v:g}" for p, v in (params or {}).items())
    label = f"lr{factor:g}x_m{momentum:g}_w{warmup}{free}"
    method = spec.method.with_values(params or {})
    return dataclasses.replace(spec, workload=changed, method=method, run_id=f"tune/{key}/{label}")


def _run(
    spec: RunSpec,
    declared: RunSpec,
    stage: int,
    factor: float,
    params: dict[str, Any],
    data_dir: Path,
    out_dir: Path,
    tuning: TuningSpec,
    classes: int,
) -> Candidate:
    """Train one candidate and read its outcome.

    A candidate whose values blow up so far that a codec refuses them (NaN) stops there: it
    diverged, with no accuracy to score.
    """
    out = out_dir / spec.run_id.rsplit("/", 1)[-1]
    wl, base = spec.workload, declared.workload
    own = _declared_params(declared)
    settings = {
        "stage": stage,
        "lr_factor": factor,
        "lr": wl.lr,
        "momentum": wl.momentum,
        "momentum_handling": handling(spec, wl.momentum),
        "warmup_iterations": wl.warmup_iterations,
        "declared": (factor, wl.momentum, wl.warmup_iterations, params)
        == (1.0, base.momentum, base.warmup_iterations, own),
        "params": dict(params),
        "declared_params": params == own,
        "declared_momentum": wl.momentum == base.momentum,
        "declared_warmup": wl.warmup_iterations == base.warmup_iterations,
    }
    t0 = time.perf_counter()
    try:
        summary = _finished(spec, out) or train(spec, data_dir, out, progress=NullProgress())
    except ValueError as exc:
        if "non-finite" not in str(exc):
            raise
        return Candidate(
            **settings,
            final_accuracy=None,
            evaluations=(),
            samples_to_target=None,
            diverged=f"loss non-finite: the run stopped ({exc})",
            wall_clock_s=round(time.perf_counter() - t0, 2),
        )
    wall = time.perf_counter() - t0
    evals, losses = _series(out / "metrics.parquet")
    last = [acc for _it, _t, acc, _loss in evals[-tuning.final_evaluations :]]
    return Candidate(
        **settings,
        final_accuracy=sum(last) / len(last) if last else None,
        evaluations=tuple(last),
        samples_to_target=summary["samples_to_target"],
        time_to_target_s=summary.get("time_to_target_s"),
        bytes_to_target=summary.get("bytes_to_target"),
        diverged=divergence(evals, losses, classes),
        wall_clock_s=round(wall, 2),
    )


def _finished(spec: RunSpec, out: Path) -> dict[str, Any] | None:
    """The summary of a finished run of exactly ``spec`` in ``out``, if there is one."""
    path = out / "summary.json"
    if not (path.is_file() and (out / "metrics.parquet").is_file()):
        return None
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    same = summary.get("provenance", {}).get("config_hash") == spec.config_hash()
    return summary if same and summary.get("status") else None


def _declared_params(spec: RunSpec) -> dict[str, Any]:
    """The recipe's own values of its free parameters (empty without a ``tune`` block)."""
    free = spec.method.tune
    if free is None:
        return {}
    value = free.declared(dataclasses.asdict(spec.method))
    return dict.fromkeys(free.params, value)


def free_values(spec: RunSpec) -> list[dict[str, Any]]:
    """Stage 0's free-parameter settings, the recipe's own first (one empty dict without any)."""
    free = spec.method.tune
    if free is None:
        return [{}]
    own = _declared_params(spec)
    rest = [dict.fromkeys(free.params, v) for v in free.values]
    return [own, *(r for r in rest if r != own)]


Evals = list[tuple[int, float, float, float]]


def _series(metrics: Path) -> tuple[Evals, list[tuple[int, float]]]:
    """What the divergence test reads, from a run's ``metrics.parquet``.

    The evaluations ``(iteration, time, accuracy, test loss)`` and the training losses
    ``(iteration, loss)``, as the run summary reads them from the records.
    """
    cols = ["iteration", "time_s", "loss", "test_accuracy", "test_loss"]
    df = pd.read_parquet(metrics, columns=cols)
    done = df.groupby("iteration")["time_s"].max()
    ev = df.dropna(subset=["test_accuracy"]).drop_duplicates("iteration").sort_values("iteration")
    evals = [
        (int(it), float(done[it]), float(acc), float(loss))
        for it, acc, loss in zip(ev["iteration"], ev["test_accuracy"], ev["test_loss"], strict=True)
    ]
    losses = [(int(it), float(v)) for it, v in zip(df["iteration"], df["loss"], strict=True)]
    return evals, losses


def _settings(spec: RunSpec) -> dict[str, Any]:
    wl = spec.workload
    return {
        "lr": wl.lr,
        "momentum": wl.momentum,
        "momentum_handling": handling(spec, wl.momentum),
        "warmup_iterations": wl.warmup_iterations,
    }


def _say(key: str, c: Candidate, log: Callable[[str], None]) -> None:
    why = f", DIVERGED: {c.diverged}" if c.diverged else ""
    acc = "none" if c.final_accuracy is None else f"{c.final_accuracy:.4f}"
    reached = "never held" if c.time_to_target_s is None else f"{c.time_to_target_s:.4g} s"
    log(
        f"tune {key}: stage {c.stage}, {c.settings()}: final accuracy {acc}, time to target "
        f"{reached}{why} ({c.wall_clock_s:.1f} s wall-clock)"
    )


def tune(
    target: TuneTarget,
    tuning: TuningSpec,
    data_dir: str | Path,
    out_dir: str | Path,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run a target's sweep and return its record entry (schema ``operating_points``).

    Stage 0 tries the recipe's free parameter at the declared lr, momentum and warm-up; stage 1
    the lr and momentum at stage 0's choice; stage 2 the other warm-up at stage 1's. Each stage's
    choice is :func:`~psml_core.tuning.rule.choose` over its candidates, the final one the rule
    over every candidate run. A candidate with the same settings as one already run is not run
    again (a run is deterministic).

    Args:
        target: What to tune (its run at the tuning seed and the declared point).
        tuning: The tier's tuning settings.
        data_dir: The prepared (raw) data set of the target's workload.
        out_dir: Where the candidates' runs go, one directory each.
        log: Where each candidate's line goes (default: stdout).
    """
    say = log or (lambda line: print(line, file=sys.stdout, flush=True))
    spec, key, out = target.spec, target.key, Path(out_dir)
    data = load_prepared(data_dir)
    resolution = 1.0 / len(data.y_test)
    classes = max(2, int(data.n_classes))
    metric = target.objective.metric
    done: dict[str, Candidate] = {}
    data_path = Path(data_dir)

    def run(stage: int, factor: float, momentum: float, warmup: int, params: dict) -> Candidate:
        cspec = candidate_spec(spec, key, factor, momentum, warmup, params)
        if cspec.run_id not in done:
            cand = _run(cspec, spec, stage, factor, params, data_path, out, tuning, classes)
            _say(key, cand, say)
            done[cspec.run_id] = cand
        return done[cspec.run_id]

    def pick(cands: list[Candidate]) -> Candidate:
        return choose(cands, metric, tuning.accuracy_margin, resolution).candidate

    wl = spec.workload
    stage0 = [run(0, 1.0, wl.momentum, wl.warmup_iterations, p) for p in free_values(spec)]
    params = pick(stage0).params
    stage1 = [run(1, f, m, wl.warmup_iterations, params) for f, m in stage1_grid(spec, tuning)]
    best = pick(stage1)
    other = 0 if wl.warmup_iterations else tuning.warmup_iterations(wl.iterations)
    run(2, best.lr_factor, best.momentum, other, params)

    final = _choose_checked(
        done,
        metric,
        tuning,
        resolution,
        key,
        say,
        lambda c: _checked(c, spec, key, tuning, (data_path, out, classes), say),
    )
    chosen = final.candidate
    say(f"tune {key}: chose {chosen.settings()} ({final.why})")
    return _entry(target, tuning, data, chosen, final, list(done.values()))


def _checked(
    c: Candidate,
    spec: RunSpec,
    key: str,
    tuning: TuningSpec,
    where: tuple[Path, Path, int],
    say: Callable[[str], None],
) -> Candidate:
    """``c`` with its runs at the check seeds, stopping at the first divergence."""
    data_path, out, classes = where
    cspec = candidate_spec(spec, key, c.lr_factor, c.momentum, c.warmup_iterations, c.params)
    runs: list[dict[str, Any]] = []
    for seed in tuning.seeds_checked:
        sspec = dataclasses.replace(cspec, seed=seed, run_id=f"{cspec.run_id}_s{seed}")
        r = _run(sspec, spec, c.stage, c.lr_factor, c.params, data_path, out, tuning, classes)
        runs.append({"seed": seed, "final_accuracy": r.final_accuracy,
                     "time_to_target_s": r.time_to_target_s, "diverged": r.diverged})  # fmt: skip
        _say(f"{key} (check seed {seed})", r, say)
        if r.diverged:
            why = f"diverged at check seed {seed}: {r.diverged}"
            return dataclasses.replace(c, checks=tuple(runs), unstable=why)
    return dataclasses.replace(c, checks=tuple(runs))


def _choose_checked(
    done: dict[str, Candidate],
    metric: str,
    tuning: TuningSpec,
    resolution: float,
    key: str,
    say: Callable[[str], None],
    check: Callable[[Candidate], Candidate],
) -> Choice:
    """The rule over ``done``, again after each choice that diverged at a check seed."""
    while True:
        final = choose(list(done.values()), metric, tuning.accuracy_margin, resolution)
        if final.all_diverged or not tuning.check_seeds:
            break
        rid = next(k for k, v in done.items() if v is final.candidate)
        done[rid] = check(done[rid])
        if done[rid].unstable is None:
            final = dataclasses.replace(final, candidate=done[rid])
            break
        say(f"tune {key}: passed over {done[rid].settings()} ({done[rid].unstable})")
    why = final.why
    if tuning.check_seeds and not final.all_diverged:
        why += f"; held at check seeds {', '.join(map(str, tuning.seeds_checked))}"
    passed = sum(1 for c in done.values() if c.unstable)
    if passed:
        why += f"; {passed} candidate(s) passed over, diverged at a check seed"
    return dataclasses.replace(final, why=why)


def _entry(
    target: TuneTarget,
    tuning: TuningSpec,
    data: Any,
    chosen: Candidate,
    final: Any,
    candidates: list[Candidate],
) -> dict[str, Any]:
    """The record entry of a finished sweep (schema ``operating_points``)."""
    spec, obj = target.spec, target.objective
    return {
        "workload": spec.workload.name,
        "method": spec.method.name,
        "scenario": target.scenario,
        "scenario_free": target.scenario_free,
        "seed": spec.seed,
        "fingerprint": target.fingerprint,
        "rule": RULE,
        "psml_version": __version__,
        "test_samples": len(data.y_test),
        "declared": _settings(spec),
        "chosen": {
            "lr": chosen.lr,
            "momentum": chosen.momentum,
            "momentum_handling": chosen.momentum_handling,
            "warmup_iterations": chosen.warmup_iterations,
            "params": dict(chosen.params),
            "why": final.why,
        },
        "all_diverged": final.all_diverged and chosen.diverged is not None,
        "objective": {
            "metric": obj.metric,
            "claim": obj.claim,
            "role": obj.role,
            "margin": tuning.accuracy_margin,
            "serves": list(obj.serves),
        },
        "candidates": [
            {**dataclasses.asdict(c), "evaluations": list(c.evaluations), "checks": list(c.checks)}
            for c in candidates
        ],
    }
