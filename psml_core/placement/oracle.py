"""The oracle bound: how much remote traffic the best placement could remove from given data.

A partitioner's result says little on its own: cutting remote traffic by 9% is all there is to
cut on data whose samples share their keys, and poor on data of separable communities. The
oracle bound states what the data allow [ours]:

1. samples are split by their **true group** (the planted communities of ``zipf_sparse``): the
   groups, largest first, each to the worker with the fewest samples so far (ties: lowest id),
   so the split is balanced to within one group;
2. each key sits on the shard of its **majority worker**, the worker whose mini-batches touch it
   most often (ties: lowest id), with no balance limit on the shards;
3. the remote traffic left is counted exactly as the engine counts it for ``touched`` pulls and
   ``kv`` pushes, in expectation over the batch draw
   (:func:`~psml_core.placement.cost.expected_step_traffic`: request, push and answer bytes of
   the keys each worker's batch touches on the other machines' shards).

The reference is the ``random`` placement (samples and keys at random, balanced) on the same
data, workers and batch size. ``remaining`` is the oracle's remote bytes over the reference's,
``bound = 1 - remaining`` the largest cut; a placement that cuts ``x`` reaches
``x / bound`` of what is possible (:meth:`OracleBound.share_of`).

Shards must be colocated, one per worker: "a key on its majority worker" needs a shard on every
worker's machine. With no group information (a data set without communities) the sample split
of step 1 cannot be made; :func:`oracle_bound` then refuses.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from psml_core.errors import ConfigError
from psml_core.placement.base import Assignment, PlacementProblem
from psml_core.placement.cost import expected_step_traffic, touch_probability
from psml_core.placement.random import RandomPlacement

if TYPE_CHECKING:  # loading a config imports placements, and must not import torch
    from psml_core.data.base import Dataset
    from psml_core.models.base import Model

__all__ = ["OracleBound", "dataset_oracle", "group_split", "oracle_assignment", "oracle_bound"]


@dataclass(frozen=True)
class OracleBound:
    """The oracle's remote traffic against the random placement's, per step (expected bytes).

    Attributes:
        workers: Workers P (one colocated shard each).
        batch_size: The mini-batch size.
        groups: Number of true groups.
        oracle_remote_bytes: Remote bytes per step (up and down, all workers), oracle placement.
        random_remote_bytes: The same for the random placement.
        oracle_bytes: All bytes per step (local and remote), oracle placement.
        remaining: ``oracle_remote_bytes / random_remote_bytes``.
        bound: ``1 - remaining``: the largest cut of remote traffic the data allow.
    """

    workers: int
    batch_size: int
    groups: int
    oracle_remote_bytes: float
    random_remote_bytes: float
    oracle_bytes: float
    remaining: float
    bound: float

    def share_of(self, remote_bytes: float) -> float:
        """The part of the possible cut a placement with ``remote_bytes`` per step reaches.

        ``(random - remote_bytes) / (random - oracle)``: 0 for the random placement, 1 for the
        oracle; NaN where the oracle cuts nothing.
        """
        possible = self.random_remote_bytes - self.oracle_remote_bytes
        if possible <= 0.0:
            return float("nan")
        return (self.random_remote_bytes - remote_bytes) / possible

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return asdict(self)


def group_split(groups: np.ndarray, workers: int) -> np.ndarray:
    """Worker of each sample: whole groups, largest first, to the least-loaded worker.

    Raises:
        ConfigError: Fewer groups than workers (a worker would get no sample).
    """
    ids, sizes = np.unique(np.asarray(groups), return_counts=True)
    if ids.size < workers:
        raise ConfigError(
            f"oracle bound: {ids.size} groups cannot be split over {workers} workers without "
            "leaving one empty; plant at least as many communities as workers"
        )
    load = np.zeros(workers, dtype=np.int64)
    owner_of_group: dict[int, int] = {}
    for i in np.lexsort((ids, -sizes)).tolist():  # largest first, then lowest id
        w = int(np.argmin(load))
        owner_of_group[int(ids[i])] = w
        load[w] += int(sizes[i])
    return np.array([owner_of_group[int(g)] for g in groups], dtype=np.int32)


def oracle_assignment(
    problem: PlacementProblem, groups: np.ndarray, workers: int, batch_size: int
) -> Assignment:
    """Samples by true group; each key on the shard of the worker that touches it most."""
    if problem.incidence is None:
        raise ConfigError(
            "oracle bound: a dense model touches every key from every worker; the bound needs "
            "sparse data (a model with an incidence)"
        )
    if len(groups) != problem.n_samples:
        raise ConfigError(
            f"oracle bound: {len(groups)} group labels for {problem.n_samples} samples"
        )
    sample_owner = group_split(groups, workers)
    split = Assignment(sample_owner, np.zeros(problem.n_keys, dtype=np.int32))
    touch = np.stack([touch_probability(problem, split, p, batch_size) for p in range(workers)])
    return Assignment(sample_owner, np.argmax(touch, axis=0).astype(np.int32))


def oracle_bound(
    problem: PlacementProblem, groups: np.ndarray, workers: int, batch_size: int
) -> OracleBound:
    """The oracle bound of ``problem``'s data for ``workers`` and ``batch_size``.

    Args:
        problem: Samples, keys and their incidence; ``seed`` seeds the random reference.
        groups: The true group of every training sample.
        workers: Workers P, each with one colocated shard.
        batch_size: The mini-batch size.

    Raises:
        ConfigError: A dense problem, mismatched groups, or fewer groups than workers.
    """
    oracle = oracle_assignment(problem, groups, workers, batch_size)
    reference = RandomPlacement().assign(problem, workers, workers)
    got = expected_step_traffic(problem, oracle, workers, workers, True, batch_size)
    ref = expected_step_traffic(problem, reference, workers, workers, True, batch_size)
    remote = got["remote_bytes_up"] + got["remote_bytes_down"]
    ref_remote = ref["remote_bytes_up"] + ref["remote_bytes_down"]
    remaining = remote / ref_remote if ref_remote > 0 else float("nan")
    return OracleBound(
        workers=workers,
        batch_size=batch_size,
        groups=int(np.unique(groups).size),
        oracle_remote_bytes=remote,
        random_remote_bytes=ref_remote,
        oracle_bytes=got["bytes_up"] + got["bytes_down"],
        remaining=remaining,
        bound=1.0 - remaining,
    )


def dataset_oracle(
    dataset: Dataset, model: Model, workers: int, batch_size: int, seed: int = 0
) -> OracleBound:
    """The oracle bound of a prepared data set for a workload's model, workers and batch size.

    The keys are ``model``'s (its incidence: for the sparse logistic regression, a feature's
    weights and the bias); ``seed`` seeds the random reference placement, as a run's seed does.

    Raises:
        ConfigError: the data set has no planted groups, or see :func:`oracle_bound`.
    """
    if dataset.groups_train is None:
        raise ConfigError(
            f"oracle bound: data set {dataset.name!r} has no planted groups; generate it with "
            "zipf_sparse communities (or locality) to know its true groups"
        )
    problem = PlacementProblem(
        n_samples=len(dataset.y_train),
        n_keys=model.n_params,
        incidence=model.incidence(dataset.X_train),
        seed=seed,
        groups=dataset.groups_train,
    )
    return oracle_bound(problem, dataset.groups_train, workers, batch_size)
