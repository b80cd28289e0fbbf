"""Run summaries (summary.json): the headline numbers of a run plus its provenance."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from psml_core.atomic import write_json
from psml_core.config import RunSpec, validate
from psml_core.metrics.divergence import divergence
from psml_core.metrics.records import IterationRecord
from psml_core.provenance import git_state, versions

__all__ = ["build_summary", "target_reached", "write_summary"]


def target_reached(
    evals: list[tuple[int, float, float, float]], target: float, window: int | None = None
) -> tuple[int, float] | None:
    """The evaluation at which the target accuracy is reached and held.

    A transient crossing does not count: the target must hold from that evaluation to the end
    of the run or, with ``window``, for ``window`` consecutive evaluations (or to the end of the
    run, if that comes first).

    Args:
        evals: ``(iteration, time, accuracy, loss)`` of every evaluation, in order.
        target: The target accuracy.
        window: Consecutive evaluations the target must hold; None: to the end of the run.

    Returns:
        ``(iteration, time)`` of the first evaluation of the held stretch, or None (censored:
        the run never held the target; its end is the censoring time).
    """
    ok = [acc >= target for (_, _, acc, _) in evals]
    if window is None:
        start = len(ok)
        while start > 0 and ok[start - 1]:
            start -= 1
        return None if start == len(ok) else (evals[start][0], evals[start][1])
    run = 0
    for i, hit in enumerate(ok):
        run = run + 1 if hit else 0
        if run == window or (hit and i == len(ok) - 1):
            j = i - run + 1
            return evals[j][0], evals[j][1]
    return None


def _finite(x: float) -> float | None:
    """``x``, or None (JSON null) where a diverged run left it non-finite."""
    return float(x) if math.isfinite(x) else None


def _lossless_total(records: list[IterationRecord], direction: str) -> int | None:
    """Snappy-compressed bytes in ``direction`` over the records; None where none measured."""
    values = [getattr(r, f"lossless_bytes_{direction}") for r in records]
    measured = [int(v) for v in values if v is not None]
    return sum(measured) if measured else None


def _evaluations(records: list[IterationRecord]) -> list[tuple[int, float, float, float]]:
    """(iteration, time, test accuracy, test loss) of every evaluation, in iteration order.

    An evaluated model exists once its round's last push has landed: its time is the latest
    ``time_s`` of that iteration over the workers.
    """
    done_at: dict[int, float] = {}
    for r in records:
        done_at[r.iteration] = max(done_at.get(r.iteration, r.time_s), r.time_s)
    evals = sorted(
        {
            (r.iteration, done_at[r.iteration], r.test_accuracy, r.test_loss)
            for r in records
            if not math.isnan(r.test_accuracy)
        }
    )
    if not evals:
        raise ValueError("a run must evaluate at least once (at its last iteration)")
    return evals


def _totals(records: list[IterationRecord]) -> dict[str, Any]:
    """The run's totals over every worker's records: time, bytes and where the time went."""
    return {
        "total_time_s": max(r.time_s for r in records),
        "bytes_up": sum(r.bytes_up for r in records),
        "bytes_down": sum(r.bytes_down for r in records),
        "bytes_total": sum(r.bytes_up + r.bytes_down for r in records),
        "remote_bytes_up": sum(r.remote_bytes_up for r in records),
        "remote_bytes_down": sum(r.remote_bytes_down for r in records),
        "compute_s": sum(r.compute_s for r in records),
        "comm_s": sum(r.comm_s for r in records),
        "wait_s": sum(r.wait_s for r in records),
        "codec_s": sum(r.codec_s for r in records),
        "lossless_bytes_up": _lossless_total(records, "up"),
        "lossless_bytes_down": _lossless_total(records, "down"),
    }


def _provenance(
    spec: RunSpec,
    data_sha256: dict[str, str],
    wall_clock_s: float,
    compute_model: dict[str, Any],
) -> dict[str, Any]:
    """What produced the run: its settings' hash, the code, the packages, the data files."""
    commit, dirty = git_state()
    return {
        "config_hash": spec.config_hash(),
        "git_commit": commit,
        "git_dirty": dirty,
        "versions": versions(),
        "backend": spec.backend,
        "seed": spec.seed,
        "data_sha256": dict(sorted(data_sha256.items())),
        "run_spec": spec.to_dict(),
        "wall_clock_s": wall_clock_s,
        "compute_model": compute_model,
    }


def build_summary(
    records: list[IterationRecord],
    spec: RunSpec,
    *,
    clock: str,
    data_sha256: dict[str, str],
    wall_clock_s: float,
    compute_model: dict[str, Any],
    placement_decisions: list[dict[str, Any]] | None = None,
    n_classes: int = 2,
    test_samples: int | None = None,
) -> dict[str, Any]:
    """Summarise a run's records.

    Args:
        records: Every worker's iteration records.
        spec: The run's settings.
        clock: "simulated" or "wall-clock".
        data_sha256: File name -> SHA-256 of every data file the run read.
        wall_clock_s: Real seconds the run took (labelled as wall-clock in the summary).
        compute_model: The compute-time model's description (``ComputeModel.describe()``).
        placement_decisions: The dynamic placement's decisions (``Decision`` fields), if any.
        n_classes: The model's classes (chance loss ``ln C``, for the divergence test).
        test_samples: Size of the test set (one sample is the accuracy's resolution).
    """
    last_it = max(r.iteration for r in records)
    last = [r for r in records if r.iteration == last_it]
    evals = _evaluations(records)
    target = spec.workload.target_accuracy
    reached = target_reached(evals, target, spec.workload.target_window)
    # Samples and bytes up to the evaluated iteration at which the target is reached and held.
    batch = spec.workload.batch_size
    upto = reached[0] if reached is not None else last_it
    samples = sum(r.local_steps for r in records) * batch
    samples_upto = sum(r.local_steps for r in records if r.iteration <= upto) * batch
    bytes_upto = sum(r.bytes_up + r.bytes_down for r in records if r.iteration <= upto)
    first = next(((it, t) for (it, t, acc, _) in evals if acc >= target), None)
    why = divergence(evals, [(r.iteration, r.loss) for r in records], n_classes)
    summary = {
        "run_id": spec.run_id,
        "tier": spec.tier,
        "backend": spec.backend,
        "clock": clock,
        "seed": spec.seed,
        "method": spec.method.name,
        "workload": spec.workload.name,
        "scenario": spec.scenario.name,
        "dataset": spec.dataset.name,
        "workers": spec.workers,
        "shards": spec.shards,
        "iterations": last_it + 1,
        "status": "ok" if why is None else "diverged",
        "status_reason": why,
        "test_samples": test_samples,
        "eval_every": spec.workload.eval_every,
        "final_test_accuracy": _finite(evals[-1][2]),
        "final_test_loss": _finite(evals[-1][3]),
        "final_train_loss": _finite(sum(r.loss for r in last) / len(last)),
        "target_accuracy": target,
        "time_to_target_s": reached[1] if reached is not None else None,
        "target_censored": reached is None,
        "first_target_s": first[1] if first is not None else None,
        "iteration_to_target": reached[0] if reached is not None else None,
        "bytes_to_target": bytes_upto if reached is not None else None,
        "samples_to_target": samples_upto if reached is not None else None,
        "samples_processed": samples,
        **_totals(records),
        "provenance": _provenance(spec, data_sha256, wall_clock_s, compute_model),
    }
    if placement_decisions is not None:
        summary["placement_decisions"] = placement_decisions
    return validate(summary, "summary", source="run summary")


def write_summary(path: str | Path, summary: dict[str, Any]) -> None:
    """Write a summary atomically as sorted JSON."""
    write_json(path, summary)
