"""Predicted communication of a placement, computed before training.

For sparse linear models (specs, method 1): worker p touches the keys N_p (the union of its
samples' supports); a key crosses the network when its shard is not on p's machine. For dense
models every worker touches every key.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psml_core.placement.base import Assignment, PlacementProblem

__all__ = ["machine_of_shard", "predicted_traffic"]


def machine_of_shard(shards: int, workers: int, colocated: bool) -> np.ndarray:
    """Machine of each shard: shard s on machine s when colocated, else on machine workers + s."""
    return np.arange(shards) if colocated else workers + np.arange(shards)


def predicted_traffic(
    problem: PlacementProblem,
    assignment: Assignment,
    workers: int,
    shards: int,
    colocated: bool,
) -> dict[str, Any]:
    """Keys each worker touches and how many of them are remote, per full pass over its data.

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
    }
