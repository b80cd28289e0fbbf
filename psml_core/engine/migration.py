"""Moving keys between server shards mid-run: jpdc's dynamic partition, applied to a job.

The :class:`~psml_core.placement.dynamic.DynamicChunkPartition` decides which chunks of keys
change shard; this module moves everything that is kept per key so that training goes on as if
the keys had always lived on their new shards:

* on each shard: the parameter values and the optimizer's per-key state (momentum, AdaGrad
  accumulators);
* on each worker: its per-shard key lists, the error-feedback residual of each shard's up
  codec and, in ``aggregate`` pull mode, the per-shard optimizer replicas.

It must run where nothing is in flight: every pull of the step delivered and no push of it sent
(the sim backend waits for all workers there). Under BSP the result is then exactly the model
and state a run on the new placement from the start would hold, because every per-key update
is element-wise and sums over workers in a fixed order; only a codec whose selection depends on
the shard's key set (top-k per shard) picks differently afterwards.

Only state that is a plain per-key vector can be moved this way, so the dynamic placement is
limited to the codecs below (optionally with ``error_feedback: true``; not with
``momentum_correction``, whose velocity is not moved), BSP, and the ``params``, ``aggregate``
and ``touched`` pull modes: :func:`psml_core.recipes.check_movable` says so with the fix. In
``touched`` mode a worker's batch of the step keeps its keys, located in the new shards' lists
(:meth:`~psml_core.engine.worker.Worker.rekey`), so its push covers what it pulled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from psml_core.codecs.base import Codec
from psml_core.codecs.error_feedback import ErrorFeedback

if TYPE_CHECKING:
    from psml_core.engine.job import Job

__all__ = ["chunk_traffic", "move_keys"]


def _regroup(
    parts: list[np.ndarray], old: list[np.ndarray], new: list[np.ndarray], n: int
) -> list[np.ndarray]:
    """Per-shard vectors on the old key lists -> per-shard vectors on the new ones."""
    full = np.zeros(n, dtype=parts[0].dtype)
    for keys, part in zip(old, parts, strict=True):
        full[keys] = part
    return [full[keys].copy() for keys in new]


def move_keys(job: Job, key_owner: np.ndarray) -> list[np.ndarray]:
    """Give every key the shard ``key_owner`` names, moving all its per-key state.

    Args:
        job: The run (nothing in flight; see the module docstring).
        key_owner: New shard of each key (length n_params).

    Returns:
        The new key list of each shard (ascending).
    """
    n = job.model.n_params
    key_owner = np.asarray(key_owner)
    shards, workers = job.shards, job.workers
    old = [s.keys for s in shards]
    new = [np.flatnonzero(key_owner == s).astype(old[s].dtype) for s in range(len(shards))]
    values = _regroup([s.values for s in shards], old, new, n)
    for shard, part in zip(shards, values, strict=True):
        shard.keys, shard.values = new[shard.rank], part
    for attr in shards[0].optimizer.per_key_state:
        moved = _regroup([getattr(s.optimizer, attr) for s in shards], old, new, n)
        for shard, part in zip(shards, moved, strict=True):
            setattr(shard.optimizer, attr, part)
    for w in workers:
        w.rekey(new)
        _move_residuals(w.codecs, old, new, n)
        if w.optimizers is not None:
            for attr in w.optimizers[0].per_key_state:
                moved = _regroup([getattr(o, attr) for o in w.optimizers], old, new, n)
                for opt, part in zip(w.optimizers, moved, strict=True):
                    setattr(opt, attr, part)
    job.assignment.key_owner[:] = key_owner
    return new


def _move_residuals(
    codecs: list[Codec], old: list[np.ndarray], new: list[np.ndarray], n: int
) -> None:
    ef = [c for c in codecs if isinstance(c, ErrorFeedback)]
    if not ef or all(c.residual is None for c in ef):
        return
    parts = [
        np.zeros(len(keys)) if c.residual is None else c.residual  # type: ignore[union-attr]
        for c, keys in zip(codecs, old, strict=True)
    ]
    for codec, part in zip(codecs, _regroup(parts, old, new, n), strict=True):
        codec.residual = part  # type: ignore[union-attr]


def chunk_traffic(keys: np.ndarray, vector: np.ndarray, nbytes: int) -> tuple[np.ndarray, float]:
    """A message's bytes attributed to the keys it carries, for the chunk statistics.

    The keys are those where the decoded ``vector`` is non-zero (all of them if none is: a dense
    message of zeros); each gets an equal share of the message's ``nbytes``.

    Returns:
        ``(global keys, bytes per key)``.
    """
    nz = np.flatnonzero(vector)
    sent = keys[nz] if nz.size else keys
    return sent, (nbytes / sent.size if sent.size else 0.0)
