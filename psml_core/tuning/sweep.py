"""Run a target's tuning sweep and choose its operating point (:mod:`.rule`).

Stage 1 runs every learning rate of ``tuning.lr_factors`` (1 always included: the declared
point) with the momentum on and off *within the recipe's own mechanism*: the workload's
momentum on the server's optimizer for plain and error-feedback recipes, or as DGC's momentum
correction on the workers for recipes with ``momentum_correction: true``; off is momentum 0
in either. Switching a recipe from error feedback to momentum correction would make it another
recipe (``topk_ef`` into ``topk_mc``), so the sweep never does. An optimizer without momentum
(AdaGrad) tunes the learning rate only. Stage 2 runs stage 1's point with the other warm-up
(``tuning.warmup_fraction`` of the iterations when the workload declares none, else none).

Every candidate is a full run at the tuning seed, written like any run (``metrics.parquet``,
``summary.json``) under the target's tuning directory.
"""

from __future__ import annotations

import dataclasses
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
from psml_core.tuning.rule import RULE, Candidate, choose_stage1, choose_warmup
from psml_core.tuning.targets import TuneTarget

__all__ = ["DEFAULT_MOMENTUM", "candidate_spec", "handling", "stage1_grid", "tune"]

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


def candidate_spec(spec: RunSpec, key: str, factor: float, momentum: float, warmup: int) -> RunSpec:
    """The target's run with a candidate's settings, and a run id naming the candidate."""
    wl = spec.workload
    changed = dataclasses.replace(
        wl, lr=wl.lr * factor, momentum=momentum, warmup_iterations=warmup
    )
    label = f"lr{factor:g}x_m{momentum:g}_w{warmup}"
    return dataclasses.replace(spec, workload=changed, run_id=f"tune/{key}/{label}")


def _run(
    spec: RunSpec,
    declared: RunSpec,
    stage: int,
    factor: float,
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
    settings = {
        "stage": stage,
        "lr_factor": factor,
        "lr": wl.lr,
        "momentum": wl.momentum,
        "momentum_handling": handling(spec, wl.momentum),
        "warmup_iterations": wl.warmup_iterations,
        "declared": (factor, wl.momentum, wl.warmup_iterations)
        == (1.0, base.momentum, base.warmup_iterations),
    }
    t0 = time.perf_counter()
    try:
        summary = train(spec, data_dir, out, progress=NullProgress())
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
        diverged=divergence(evals, losses, classes),
        wall_clock_s=round(wall, 2),
    )


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
    log(
        f"tune {key}: stage {c.stage}, lr {c.lr:g} ({c.lr_factor:g}x), momentum "
        f"{c.momentum_handling} {c.momentum:g}, warm-up {c.warmup_iterations}: final accuracy "
        f"{acc}{why} ({c.wall_clock_s:.1f} s wall-clock)"
    )


def tune(
    target: TuneTarget,
    tuning: TuningSpec,
    data_dir: str | Path,
    out_dir: str | Path,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run a target's sweep and return its record entry (schema ``operating_points``).

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

    def run(stage: int, factor: float, momentum: float, warmup: int) -> Candidate:
        cand = _run(
            candidate_spec(spec, key, factor, momentum, warmup),
            spec, stage, factor, Path(data_dir), out, tuning, classes,
        )  # fmt: skip
        _say(key, cand, say)
        return cand

    warm0 = spec.workload.warmup_iterations
    stage1 = [run(1, f, m, warm0) for f, m in stage1_grid(spec, tuning)]
    choice = choose_stage1(stage1, handling(spec, spec.workload.momentum), resolution)
    best = choice.candidate
    other = 0 if warm0 else tuning.warmup_iterations(spec.workload.iterations)
    warm = run(2, best.lr_factor, best.momentum, other)
    final = choose_warmup(choice, warm, resolution)
    chosen = final.candidate
    say(
        f"tune {key}: chose lr {chosen.lr:g}, momentum {chosen.momentum_handling} "
        f"{chosen.momentum:g}, warm-up {chosen.warmup_iterations} ({final.why})"
    )
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
            "why": final.why,
        },
        "all_diverged": final.all_diverged and chosen.diverged is not None,
        "candidates": [
            {**dataclasses.asdict(c), "evaluations": list(c.evaluations)} for c in [*stage1, warm]
        ],
    }
