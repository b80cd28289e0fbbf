"""The pieces of a worker's step that every backend shares.

:class:`~psml_core.engine.loop.WorkerLoop` runs a worker's iteration once for every backend;
these are its parts that do not depend on the transport:

1. **pull**: under a round policy (PCP) the answer grants the step budget, and a budget of 0
   ends the run (:func:`budget_spent`, :func:`fold_final_pull`);
2. **compute** one gradient, or the round's granted local steps (:func:`compute_step`);
3. **push** the result, encoded per shard under the contexts both ends know
   (:func:`encode_pushes`);
4. **record** the iteration (:func:`step_row`), later joined to the evaluations of the global
   model (:func:`to_records`).

Rows are plain dicts of :class:`~psml_core.metrics.records.IterationRecord` fields, so that
they pickle into checkpoints and across processes unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from psml_core.codecs.base import CodecContext, Payload
from psml_core.engine.server import BUDGET_KEY, codec_state
from psml_core.errors import Diverged
from psml_core.metrics.records import IterationRecord
from psml_core.models.base import Matrix

if TYPE_CHECKING:
    from psml_core.engine.job import Job
    from psml_core.engine.worker import Worker

__all__ = [
    "budget_spent",
    "compute_step",
    "encode_pushes",
    "fold_final_pull",
    "step_budget",
    "step_row",
    "to_records",
]


def step_budget(extra: Sequence[Mapping[str, Any]], rounds: bool) -> int:
    """Gradient steps this iteration: 1, or the budget shard 0's answer granted (rounds)."""
    return int(extra[0].get(BUDGET_KEY, 1)) if rounds else 1


def budget_spent(extra: Sequence[Mapping[str, Any]], rounds: bool) -> bool:
    """Whether a round policy's answer granted 0 steps: that pull ended the run."""
    return rounds and step_budget(extra, rounds) == 0


def compute_step(
    worker: Worker,
    steps: int,
    rounds: bool,
    step_cost: Callable[[Matrix], float],
    iteration: int = -1,
    check: bool = True,
    gradient: Callable[[], tuple[float, Any]] | None = None,
) -> tuple[float, np.ndarray, float]:
    """Step 2: one gradient, or a round policy's ``steps`` local steps.

    Args:
        worker: The worker, its replica at the pulled model.
        steps: Local steps granted (:func:`step_budget`); 1 without rounds.
        rounds: Whether the sync policy runs rounds of local steps.
        step_cost: Called once per step with its mini-batch: the step's modelled compute
            seconds (sim), or a hook that injects a straggler's delay and returns 0 where time
            is measured.
        iteration: The worker's iteration (named in a :class:`Diverged` error).
        check: Raise :class:`Diverged` on a non-finite step (a collective's ranks go on).
        gradient: Where the one gradient comes from (default ``worker.compute``): the sim's
            batched gradients (:mod:`psml_core.engine.sim.gradients`), which take the batch.

    Returns:
        The (mean) mini-batch loss, what the worker pushes (the gradient, or a round's change
        of the replica) and the summed ``step_cost``.

    Raises:
        Diverged: the loss or the pushed vector is non-finite (no codec can send it, and no
            later step can recover); the backend ends the run as diverged.
    """
    if rounds:
        loss, vector, cost = worker.local_round(steps, step_cost)
    else:
        loss, vector = (gradient or worker.compute)()
        assert worker.last_batch is not None
        cost = step_cost(worker.last_batch)
    if check and not (math.isfinite(loss) and _finite(vector)):
        raise Diverged(iteration, worker.rank, loss)
    return loss, vector, cost


def _finite(vector: Any) -> bool:
    """Every element finite: a host array, or a tensor on its device (kept on a GPU)."""
    if isinstance(vector, torch.Tensor):
        return bool(torch.isfinite(vector).all())
    return bool(np.isfinite(vector).all())


def encode_pushes(
    job: Job,
    worker: Worker,
    t: int,
    ratio: float,
    extra: Sequence[Mapping[str, Any]],
    vector: np.ndarray,
) -> tuple[list[CodecContext], list[Payload]]:
    """Step 3: the push's contexts (step, ratio, seed, each shard's published state) and payloads.

    Both ends know a context, so a shard decodes the payload with the same one.
    """
    ctxs = [job.ctx(t, ratio, codec_state(e)) for e in extra]
    return ctxs, worker.encode_push(vector, ctxs)


def step_row(
    *,
    iteration: int,
    worker: int,
    time_s: float,
    compute_s: float,
    comm_s: float,
    wait_s: float,
    up: Sequence[int],
    down: Sequence[int],
    remote: Sequence[bool],
    ratio: float,
    staleness: int,
    loss: float,
    local_steps: int = 1,
    codec_s: float = 0.0,
    lossless_up: int | None = None,
    lossless_down: int | None = None,
    migration_bytes: int = 0,
    remote_down: int | None = None,
) -> dict[str, Any]:
    """Step 4: one iteration's record fields (all but the test metrics and the clock).

    Args:
        iteration: The worker's clock (a round under a round policy).
        worker: Worker rank.
        time_s: The clock at the end of the iteration.
        compute_s: Computing time.
        comm_s: Communication on the critical path.
        wait_s: Time held by the sync policy.
        up: Wire bytes sent to each shard (pull request plus push).
        down: Wire bytes received from each shard.
        remote: Per shard, whether it is on another machine (its bytes cross the network).
        ratio: The compression ratio in force.
        staleness: Clock distance to the slowest worker when this one proceeded.
        loss: The mini-batch loss.
        local_steps: Gradient steps the record covers.
        codec_s: The device's encode and decode time (sim; 0 where measured in comm_s).
        lossless_up: Snappy-coded ``up`` (``lossless: snappy``), else None.
        lossless_down: Snappy-coded ``down``, else None.
        migration_bytes: Part of ``down`` that is keys moving to this machine.
        remote_down: The remote part of ``down`` where it is not whole shards' bytes (sim:
            keys migrating to this machine); None sums the remote shards'.

    The fields are :class:`~psml_core.metrics.records.IterationRecord`'s.
    """
    return {
        "iteration": iteration,
        "worker": worker,
        "time_s": time_s,
        "compute_s": compute_s,
        "comm_s": comm_s,
        "wait_s": wait_s,
        "codec_s": codec_s,
        "bytes_up": sum(up),
        "bytes_down": sum(down),
        "shard_bytes_up": tuple(up),
        "shard_bytes_down": tuple(down),
        "remote_bytes_up": sum(b for b, r in zip(up, remote, strict=True) if r),
        "remote_bytes_down": (
            remote_down
            if remote_down is not None
            else sum(b for b, r in zip(down, remote, strict=True) if r)
        ),
        "ratio": ratio,
        "staleness": staleness,
        "loss": loss,
        "local_steps": local_steps,
        "lossless_bytes_up": lossless_up,
        "lossless_bytes_down": lossless_down,
        "migration_bytes": migration_bytes,
    }


def to_records(
    rows: list[dict[str, Any]], evals: Mapping[int, tuple[float, float]], clock: str
) -> list[IterationRecord]:
    """Rows joined to the test loss and accuracy of their iteration, in (iteration, worker) order.

    An iteration without an evaluation gets NaN for both.
    """
    out = []
    for row in sorted(rows, key=lambda r: (r["iteration"], r["worker"])):
        loss, acc = evals.get(row["iteration"], (math.nan, math.nan))
        out.append(IterationRecord(**row, test_loss=loss, test_accuracy=acc, clock=clock))
    return out


def fold_final_pull(
    row: dict[str, Any],
    *,
    up: Sequence[int],
    down: Sequence[int],
    remote: Sequence[bool],
    end: float,
    comm: float,
    wait: float,
    codec: float = 0.0,
    lossless_up: int | None = None,
    lossless_down: int | None = None,
) -> None:
    """Add a round policy's last pull to ``row`` (the worker's last record), in place.

    A round policy (PCP) ends when its step budget is spent; the workers learn it from the
    pull that brings them the merged model (a budget of 0 steps). That pull moved bytes and
    took time but has no iteration of its own, so both join the worker's last record: byte
    totals stay exact, and ``time_s`` ends when the worker does, with
    ``compute_s + codec_s + comm_s + wait_s`` still its duration.

    Args:
        row: The record's fields (:func:`step_row`).
        up: Bytes of the pull requests, per shard.
        down: Bytes of the answers, per shard.
        remote: Per shard, whether it is on another machine.
        end: The time the pull ended (the record's new ``time_s``).
        comm: Its communication time.
        wait: Its time held by a sync policy.
        codec: Its decoding time on the worker's device.
        lossless_up: The requests' Snappy-coded size (None when not measured).
        lossless_down: The answers' Snappy-coded size.
    """
    row["shard_bytes_up"] = tuple(a + b for a, b in zip(row["shard_bytes_up"], up, strict=True))
    row["shard_bytes_down"] = tuple(
        a + b for a, b in zip(row["shard_bytes_down"], down, strict=True)
    )
    row["bytes_up"] += sum(up)
    row["bytes_down"] += sum(down)
    row["remote_bytes_up"] += sum(b for b, r in zip(up, remote, strict=True) if r)
    row["remote_bytes_down"] += sum(b for b, r in zip(down, remote, strict=True) if r)
    if row.get("lossless_bytes_up") is not None and lossless_up is not None:
        row["lossless_bytes_up"] += lossless_up
    if row.get("lossless_bytes_down") is not None and lossless_down is not None:
        row["lossless_bytes_down"] += lossless_down
    row["time_s"] = end
    row["comm_s"] += comm
    row["wait_s"] += wait
    row["codec_s"] = row.get("codec_s", 0.0) + codec
