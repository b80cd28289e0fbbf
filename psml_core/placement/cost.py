"""Predicted communication of a placement, computed before training.

For sparse linear models (docs/methods.md, JPDC): worker p touches the keys N_p (the union of its
samples' supports); a key crosses the network when its shard is not on p's machine. For dense
models every worker touches every key.

Three granularities:

* :func:`predicted_traffic` — per full pass over each worker's data (our design's Remote(p),
  what a partitioner minimises); with ``batch_size`` also the *expected* figures of one
  mini-batch step (:func:`expected_step_traffic`).
* :func:`expected_step_traffic` — per step, in expectation over the batch draw: a batch of
  ``b`` of the worker's ``n_p`` samples, drawn without replacement, misses key ``k`` (held by
  ``c_pk`` of them) with the hypergeometric probability ``C(n_p - c_pk, b) / C(n_p, b)``, so
  the expected keys it touches on shard ``s`` are ``sum_{k in s} 1 - C(n_p - c_pk, b) /
  C(n_p, b)``. Independent of the run length and of the seed: the figure to set against a
  run's mean bytes per iteration.
* :func:`replayed_traffic` — exact: it replays each worker's batch sequence (the engine's
  :class:`~psml_core.engine.worker.BatchSampler`, same seed and rank) over the incidence and
  counts what the engine's ``touched`` pull mode sends, so it equals the measured bytes of a
  ``pull: touched`` run with the ``kv`` codec exactly (tested).

Bytes of one step of worker ``p`` in ``touched`` mode with the ``kv`` codec, for the ``m_s``
keys of shard ``s`` its batch touches: up ``8 m_s`` (the pull's key list) ``+ 12 m_s`` (the
push), down ``12 m_s`` (the answer), plus a 4-byte CRC-32C trailer on each of the three (the
key list, the push and the answer; :mod:`psml_core.codecs.integrity`) and ``h`` bytes per
message (two up, one down) when the scenario sets a per-message header; remote when shard
``s`` is not on ``p``'s machine.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from psml_core.codecs.integrity import CHECKSUM_BYTES
from psml_core.placement.base import Assignment, PlacementProblem

__all__ = [
    "ANSWER_BYTES_PER_KEY",
    "PUSH_BYTES_PER_KEY",
    "REQUEST_BYTES_PER_KEY",
    "expected_step_traffic",
    "machine_of_shard",
    "predicted_traffic",
    "replayed_traffic",
    "touch_probability",
]

REQUEST_BYTES_PER_KEY = 8
"""A touched pull's request: one uint64 key (psml_core.codecs.kv.KEY_BYTES)."""
ANSWER_BYTES_PER_KEY = 12
"""A touched pull's answer: one kv entry (psml_core.codecs.kv.ENTRY_BYTES)."""
PUSH_BYTES_PER_KEY = 12
"""A kv push: one kv entry per key of the batch (psml_core.codecs.kv.ENTRY_BYTES)."""


def machine_of_shard(shards: int, workers: int, colocated: bool) -> np.ndarray:
    """Machine of each shard: shard s on machine s when colocated, else on machine workers + s."""
    return np.arange(shards) if colocated else workers + np.arange(shards)


def predicted_traffic(
    problem: PlacementProblem,
    assignment: Assignment,
    workers: int,
    shards: int,
    colocated: bool,
    batch_size: int | None = None,
) -> dict[str, Any]:
    """Keys each worker touches and how many of them are remote, per full pass over its data.

    Args:
        problem: The placement problem (its incidence; None for dense models).
        assignment: The placement.
        workers: Number of workers P.
        shards: Number of shards S.
        colocated: Shard s on worker s's machine (else on dedicated machines).
        batch_size: When given, also the expected figures of one mini-batch step
            (:func:`expected_step_traffic`) under ``per_step``.

    Returns:
        A JSON-serialisable dict: per-worker ``touched`` (|N_p|) and ``remote`` (Remote(p)), their
        max and sum, the PS-lite byte estimate ``12 * sum Remote(p)`` per direction, and the
        dense remote bytes per iteration (4 B per remote key, per direction).
    """
    machine = machine_of_shard(shards, workers, colocated)
    key_machine = machine[assignment.key_owner]
    touched, remote, dense_remote = [], [], []
    for p in range(workers):
        if problem.incidence is None:
            keys = np.arange(problem.n_keys)
        else:
            rows = problem.incidence[assignment.samples_of(p)]
            keys = np.unique(rows.indices)
        touched.append(int(keys.size))
        remote.append(int(np.count_nonzero(key_machine[keys] != p)))
        dense_remote.append(int(np.count_nonzero(key_machine != p)))
    return {
        "workers": workers,
        "shards": shards,
        "colocated": colocated,
        "n_keys": problem.n_keys,
        "n_samples": problem.n_samples,
        "touched_per_worker": touched,
        "remote_per_worker": remote,
        "max_remote": max(remote),
        "sum_remote": sum(remote),
        "pslite_bytes_per_direction": 12 * sum(remote),
        "dense_remote_bytes_per_iteration_per_direction": 4 * sum(dense_remote),
        **(
            {
                "per_step": expected_step_traffic(
                    problem, assignment, workers, shards, colocated, batch_size
                )
            }
            if batch_size is not None
            else {}
        ),
    }


def _worker_incidence(
    problem: PlacementProblem, assignment: Assignment, p: int
) -> sp.csr_matrix | None:
    """Worker p's rows of the incidence, in the engine's order (ascending sample index)."""
    if problem.incidence is None:
        return None
    return sp.csr_matrix(problem.incidence[assignment.samples_of(p)])


def _step_bytes(
    per_shard: np.ndarray, remote: np.ndarray, header_bytes: int
) -> tuple[float, float, float, float]:
    """(up, down, remote up, remote down) of one step from its keys per shard.

    ``per_shard`` may be expected (float) counts; ``remote`` flags the shards off the worker's
    machine. Every shard gets a request and a push and sends an answer, even with no keys.
    """
    up = (REQUEST_BYTES_PER_KEY + PUSH_BYTES_PER_KEY) * per_shard + 2 * header_bytes
    up = up + 2 * CHECKSUM_BYTES  # the key list and the push's payload are both sealed
    down = ANSWER_BYTES_PER_KEY * per_shard + header_bytes + CHECKSUM_BYTES
    return (
        float(up.sum()),
        float(down.sum()),
        float(up[remote].sum()),
        float(down[remote].sum()),
    )


def touch_probability(
    problem: PlacementProblem, assignment: Assignment, p: int, batch_size: int
) -> np.ndarray:
    """Probability that one mini-batch of worker ``p`` touches each key (length n_keys).

    A batch of ``b = min(batch_size, n_p)`` of the worker's ``n_p`` samples, drawn without
    replacement, misses key k (held by ``c_pk`` of them) with probability
    ``C(n_p - c_pk, b) / C(n_p, b)``; a dense model touches every key.
    """
    inc = _worker_incidence(problem, assignment, p)
    prob = np.ones(problem.n_keys)
    if inc is None:
        return prob
    n = int(assignment.samples_of(p).size)
    b = min(batch_size, n)
    users = np.bincount(inc.indices, minlength=problem.n_keys)  # c_pk
    rest = n - users
    ok = rest >= b  # else every batch holds one of the key's samples
    r = rest[ok]
    # log C(n - c, b) - log C(n, b)
    log_miss = gammaln(r + 1) - gammaln(r - b + 1) - gammaln(n + 1) + gammaln(n - b + 1)
    prob[ok] = -np.expm1(log_miss)
    return prob


def expected_step_traffic(
    problem: PlacementProblem,
    assignment: Assignment,
    workers: int,
    shards: int,
    colocated: bool,
    batch_size: int,
    header_bytes: int = 0,
) -> dict[str, Any]:
    """Expected keys and bytes of one mini-batch step (``touched`` pulls, ``kv`` pushes).

    See the module docstring for the hypergeometric expectation. The batch is
    ``min(batch_size, n_p)`` samples, as the engine's sampler caps it.

    Returns:
        A JSON-serialisable dict: per worker the expected touched and remote keys per step, and
        the expected bytes per step summed over workers (``bytes_up``, ``bytes_down``,
        ``remote_bytes_up``, ``remote_bytes_down``).
    """
    machine = machine_of_shard(shards, workers, colocated)
    touched, remote_keys = [], []
    totals = np.zeros(4)
    for p in range(workers):
        prob = touch_probability(problem, assignment, p, batch_size)
        per_shard = np.bincount(assignment.key_owner, weights=prob, minlength=shards)
        is_remote = machine != p
        touched.append(float(per_shard.sum()))
        remote_keys.append(float(per_shard[is_remote].sum()))
        totals += _step_bytes(per_shard, is_remote, header_bytes)
    return {
        "batch_size": batch_size,
        "header_bytes": header_bytes,
        "touched_per_worker": touched,
        "remote_per_worker": remote_keys,
        "bytes_up": float(totals[0]),
        "bytes_down": float(totals[1]),
        "remote_bytes_up": float(totals[2]),
        "remote_bytes_down": float(totals[3]),
    }


def replayed_traffic(
    problem: PlacementProblem,
    assignment: Assignment,
    workers: int,
    shards: int,
    colocated: bool,
    batch_size: int,
    iterations: int,
    seed: int | None = None,
    header_bytes: int = 0,
) -> dict[str, Any]:
    """Exact bytes of a ``touched``/``kv`` run, replaying each worker's batch sequence.

    Args:
        problem: The placement problem (its incidence; None for dense models).
        assignment: The placement.
        workers: Number of workers P.
        shards: Number of shards S.
        colocated: Shard s on worker s's machine.
        batch_size: The workload's batch size.
        iterations: Steps per worker (one record per worker and step).
        seed: The run seed (default ``problem.seed``, which ``build_job`` sets to it).
        header_bytes: The scenario's per-message header ``h``.

    Returns:
        A JSON-serialisable dict: totals over workers and steps (``bytes_up``, ``bytes_down``,
        ``remote_bytes_up``, ``remote_bytes_down``, all ints), the same per iteration (lists
        summed over workers) and the remote keys per worker and step (mean).
    """
    # Imported here: the engine imports this module (machine_of_shard).
    from psml_core.engine.worker import BatchSampler

    seed = problem.seed if seed is None else seed
    machine = machine_of_shard(shards, workers, colocated)
    per_iter = np.zeros((iterations, 4), dtype=np.int64)
    remote_keys = []
    for p in range(workers):
        inc = _worker_incidence(problem, assignment, p)
        n = int(assignment.samples_of(p).size)
        sampler = BatchSampler(n, batch_size, seed, p)
        is_remote = machine != p
        keys_remote = 0
        for t in range(iterations):
            idx = sampler.next()
            if inc is None:
                owners = assignment.key_owner
            else:
                owners = assignment.key_owner[np.unique(inc[idx].indices)]
            per_shard = np.bincount(owners, minlength=shards)
            keys_remote += int(per_shard[is_remote].sum())
            per_iter[t] += np.array(_step_bytes(per_shard, is_remote, header_bytes), np.int64)
        remote_keys.append(keys_remote / max(iterations, 1))
    total = per_iter.sum(axis=0)
    return {
        "batch_size": batch_size,
        "iterations": iterations,
        "header_bytes": header_bytes,
        "bytes_up": int(total[0]),
        "bytes_down": int(total[1]),
        "remote_bytes_up": int(total[2]),
        "remote_bytes_down": int(total[3]),
        "remote_bytes_up_per_iteration": per_iter[:, 2].tolist(),
        "remote_bytes_down_per_iteration": per_iter[:, 3].tolist(),
        "remote_keys_per_worker_step": remote_keys,
    }
