"""Assemble a run from its settings: model, placement, workers, shards, codecs, policies.

Every backend starts from the same :class:`Job`, so the same seed gives the same initial state,
data split and batch order whichever backend runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from psml_core.codecs import Codec, CodecContext, make_codec
from psml_core.config import BlockSpec, RunSpec
from psml_core.control import CONTROLLERS, Controller
from psml_core.data.base import Dataset
from psml_core.data.hashing import hashed_once
from psml_core.devices.compute import ComputeModel, Heterogeneity, make_compute_model
from psml_core.engine.optim import make_optimizer, optimizer_class, warmup_factor
from psml_core.engine.server import ServerShard
from psml_core.engine.worker import BatchSampler, Worker
from psml_core.errors import ConfigError
from psml_core.models import Model, make_model
from psml_core.placement import (
    PLACEMENTS,
    Assignment,
    DynamicChunkPartition,
    DynamicPlacement,
    Placement,
    PlacementProblem,
)
from psml_core.placement.cost import machine_of_shard
from psml_core.recipes import check_method
from psml_core.sync import SYNC_POLICIES, SyncPolicy

__all__ = [
    "Job",
    "build_job",
    "corrects_momentum",
    "make_worker_codec",
    "update_momentum",
    "worker_momentum",
]

DENSE = BlockSpec("none")


@dataclass
class Job:
    """A fully assembled run.

    Attributes:
        spec: The run's settings.
        dataset: The data.
        model: The model.
        assignment: Samples to workers, keys to shards.
        workers: The workers.
        shards: The server shards.
        shard_machine: Machine of each shard (workers are on machines 0..P-1).
        controller: The compression-ratio controller.
        compute: The compute-time model.
        speed: Per-worker, per-step compute-time multipliers.
        dynamic: The dynamic partition's chunk statistics and reassignment (placement
            ``dynamic``; the backend moves keys when it accepts one), else None.
    """

    spec: RunSpec
    dataset: Dataset
    model: Model
    assignment: Assignment
    workers: list[Worker]
    shards: list[ServerShard]
    shard_machine: np.ndarray
    controller: Controller
    compute: ComputeModel
    speed: Heterogeneity
    dynamic: DynamicChunkPartition | None = None

    @property
    def machines(self) -> int:
        """Machines in the deployment: P, plus S dedicated servers when not colocated."""
        return self.spec.workers + (0 if self.spec.colocated else self.spec.shards)

    def global_params(self) -> np.ndarray:
        """The model as the servers hold it, assembled from every shard.

        A NumPy vector, or a tensor on the shards' device where they keep their values there.
        """
        device = self.shards[0].device
        if device is None:
            out = np.empty(self.model.n_params, dtype=np.float32)
            for shard in self.shards:
                out[shard.keys] = shard.values
            return out
        import torch

        flat = torch.empty(self.model.n_params, dtype=torch.float32, device=device)
        for shard in self.shards:
            flat[torch.from_numpy(shard.keys).to(device)] = shard.values
        return flat  # type: ignore[return-value]

    def ctx(self, step: int, ratio: float, extra: dict[str, Any] | None = None) -> CodecContext:
        """The codec context of ``step``: what both ends of every message of the step know.

        The shared seed is derived from the run seed and the step, so random-k indices and QSGD
        draws agree between a worker and the server without being sent.
        """
        return CodecContext(
            step=step,
            ratio=ratio,
            seed=self.spec.seed * 1_000_003 + step,
            lr=self.spec.workload.lr * warmup_factor(step, self.spec.workload.warmup_iterations),
            extra=extra or {},
        )

    def should_evaluate(self, iteration: int) -> bool:
        """Evaluate every ``eval_every`` iterations and after the last one.

        Under a round policy the last round is the one that spends the step budget
        (:attr:`ServerShard.finished`), which ends the run before ``iterations`` rounds.
        """
        wl = self.spec.workload
        last = iteration == wl.iterations - 1 or any(s.finished for s in self.shards)
        return (iteration + 1) % wl.eval_every == 0 or last


def _check_assignment(a: Assignment, n_samples: int, n_keys: int, spec: RunSpec) -> None:
    if a.sample_owner.shape != (n_samples,) or a.key_owner.shape != (n_keys,):
        raise ConfigError(
            f"the placement does not fit run {spec.run_id!r} ({a.sample_owner.size} samples, "
            f"{a.key_owner.size} keys; expected {n_samples} and {n_keys}); re-run its partition"
        )
    for what, owner, count in (
        ("worker", a.sample_owner, spec.workers),
        ("shard", a.key_owner, spec.shards),
    ):
        missing = sorted(set(range(count)) - set(np.unique(owner).tolist()))
        if missing or owner.min() < 0 or owner.max() >= count:
            raise ConfigError(
                f"the placement of run {spec.run_id!r} leaves {what}(s) {missing} empty or names "
                f"{what}s outside 0..{count - 1}; use fewer {what}s or another placement"
            )


def _require_hashed(dataset: Dataset, spec: RunSpec) -> Dataset:
    """The recipe's hashed data: ``dataset`` if the hash stage made it for this recipe.

    Raises:
        ConfigError: the recipe hashes its data and ``dataset`` is raw, or hashed otherwise.
    """
    if spec.method.hashing is not None and "hashing" not in dataset.meta:
        raise ConfigError(
            f"run {spec.run_id!r}: recipe {spec.method.name!r} hashes its features, and data set "
            f"{dataset.name!r} is raw; give the data set `psml hash` wrote (psml train --data), "
            "or build the job with psml_core.engine.stages.staged_job"
        )
    # Hashes nothing here: a hashed data set passes if this recipe and seed hashed it so.
    return hashed_once(dataset, spec.method.hashing, spec.seed, f"run {spec.run_id!r}")


def corrects_momentum(spec: RunSpec) -> bool:
    """Whether the recipe's workers correct momentum (codec ``momentum_correction: true``)."""
    return bool(spec.method.codec.params.get("momentum_correction", False))


def worker_momentum(spec: RunSpec) -> float:
    """``m`` of the workers' momentum correction: the workload's momentum, moved off the server.

    0.0 without momentum correction, and with an optimizer that has no momentum (AdaGrad),
    where there is nothing to move.
    """
    if not corrects_momentum(spec) or not optimizer_class(spec.workload).uses_momentum:
        return 0.0
    return float(spec.workload.momentum)


def update_momentum(spec: RunSpec) -> float | None:
    """Momentum of the optimizers that apply the averaged update (server shards, replicas).

    0.0 under momentum correction (the workers apply it), else None: the workload's own.
    """
    return 0.0 if corrects_momentum(spec) else None


def make_worker_codec(spec: RunSpec, rank: int) -> Codec:
    """Worker ``rank``'s up codec: the recipe's, with the momentum moved onto the workers."""
    codec = make_codec(spec.method.codec, momentum=worker_momentum(spec))
    codec.for_worker(rank)
    return codec


def _workers(
    spec: RunSpec,
    model: Model,
    dataset: Dataset,
    assignment: Assignment,
    shard_keys: list[np.ndarray],
    init: np.ndarray,
    policy: SyncPolicy,
) -> list[Worker]:
    """The P workers: each one's samples, codecs, and optimizer replicas where it needs them.

    Every worker holds the same ``shard_keys`` list, as the shards' keys.
    """
    aggregate = spec.method.pull == "aggregate"
    workers = []
    for p in range(spec.workers):
        rows = assignment.samples_of(p)
        workers.append(
            Worker(
                rank=p,
                model=model,
                X=dataset.X_train[rows],
                y=dataset.y_train[rows],
                batch_size=spec.workload.batch_size,
                seed=spec.seed,
                codecs=[make_worker_codec(spec, p) for _ in shard_keys],
                shard_keys=shard_keys,
                init_params=init,
                optimizers=[
                    make_optimizer(spec.workload, len(k), update_momentum(spec)) for k in shard_keys
                ]
                if aggregate
                else None,
                local_optimizer=make_optimizer(spec.workload, model.n_params)
                if policy.rounds
                else None,
                touched=spec.method.pull == "touched",
            )
        )
    return workers


def _shards(
    spec: RunSpec, shard_keys: list[np.ndarray], init: np.ndarray, policy: SyncPolicy
) -> list[ServerShard]:
    """The S server shards: each one's keys, codecs, optimizer and sync policy."""
    return [
        ServerShard(
            rank=s,
            keys=keys,
            init_values=init[keys],
            workers=spec.workers,
            policy=SYNC_POLICIES.build(spec.method.sync),
            codec_up=make_codec(spec.method.codec),
            codec_down=make_codec(spec.method.codec_down or DENSE),
            optimizer=make_optimizer(
                spec.workload,
                len(keys),
                update_momentum(spec),
                # Each push applied alone (ASP, SSP): P updates make an iteration.
                1 if policy.barrier or policy.rounds else spec.workers,
            ),
            pull_mode=spec.method.pull,
            # Round policies: the same samples as any other run (P x iterations steps).
            step_budget=spec.workers * spec.workload.iterations if policy.rounds else None,
        )
        for s, keys in enumerate(shard_keys)
    ]


def tensor_layout(tensor_sizes: tuple[int, ...], keys: np.ndarray) -> np.ndarray:
    """Where each tensor's part starts in a shard's (ascending) key list: ``0 = b_0 < ... = n``."""
    ends = np.cumsum(tensor_sizes)
    tensor = np.searchsorted(ends, keys, side="right")
    starts = np.flatnonzero(np.diff(tensor)) + 1
    return np.concatenate(([0], starts, [len(keys)])).astype(np.int64)


def _set_layouts(
    model: Model, shard_keys: list[np.ndarray], workers: list[Worker], shards: list[ServerShard]
) -> None:
    """Tell every codec of shard s, on both ends, where the model's tensors lie in its keys."""
    sizes = model.tensor_sizes()
    for s, keys in enumerate(shard_keys):
        if not len(keys):
            continue
        bounds = tensor_layout(sizes, keys)
        for w in workers:
            w.codecs[s].set_layout(bounds)
        shards[s].codec_up.set_layout(bounds)
        shards[s].codec_down.set_layout(bounds)


def placement_problem(
    model: Model, placement: Placement, dataset: Dataset, seed: int
) -> PlacementProblem:
    """What ``placement`` may look at: the incidence only where it reads one, the true groups.

    A placement that never reads the incidence (``needs_incidence`` False: the dynamic
    partition) gets None, so a model with a large one is not made to build it.
    """
    return PlacementProblem(
        n_samples=len(dataset.y_train),
        n_keys=model.n_params,
        incidence=model.incidence(dataset.X_train) if placement.needs_incidence else None,
        seed=seed,
        groups=dataset.groups_train,
    )


def build_job(spec: RunSpec, dataset: Dataset, assignment: Assignment) -> Job:
    """Build the run's objects from its settings and the outputs of the stages before training.

    The workflow's ``hash`` and ``partition`` jobs make ``dataset`` and ``assignment``;
    :func:`~psml_core.engine.stages.staged_job` runs the same stages in-process.

    Args:
        spec: The run's settings.
        dataset: The prepared data set, hashed by the hash stage if the recipe has a
            ``hashing`` block (jpdc: the model, the placement and training see m features).
        assignment: The placement stage's samples-to-workers and keys-to-shards assignment.

    Raises:
        ConfigError: the data set is not this recipe's (raw where it hashes), or the
            assignment does not fit the run.
    """
    dataset = _require_hashed(dataset, spec)
    model = make_model(spec.workload, dataset.n_features, dataset.n_classes)
    placement = PLACEMENTS.build(spec.method.placement)
    _check_assignment(assignment, len(dataset.y_train), model.n_params, spec)
    init = model.init_params(spec.seed)
    shard_keys = [assignment.keys_of(s) for s in range(spec.shards)]
    policy = SYNC_POLICIES.build(spec.method.sync)
    check_method(spec.method)  # also run when the config loads; here for a hand-written --run
    workers = _workers(spec, model, dataset, assignment, shard_keys, init, policy)
    shards = _shards(spec, shard_keys, init, policy)
    _set_layouts(model, shard_keys, workers, shards)
    compute = make_compute_model(spec.compute)
    # A representative batch from a sampler of its own, so worker 0's batch order is untouched.
    probe = BatchSampler(
        len(workers[0].y), spec.workload.batch_size, spec.seed, spec.workers
    ).next()
    compute.calibrate(model, workers[0].X[probe], workers[0].y[probe], init)
    job = Job(
        spec=spec,
        dataset=dataset,
        model=model,
        assignment=assignment,
        workers=workers,
        shards=shards,
        shard_machine=machine_of_shard(spec.shards, spec.workers, spec.colocated),
        controller=CONTROLLERS.build(spec.method.controller),
        compute=compute,
        speed=Heterogeneity(spec.compute.heterogeneity, spec.seed),
    )
    if placement.moves_keys:
        assert isinstance(placement, DynamicPlacement)  # the one placement that moves keys
        # A fixed partition decides once, after the warm-up, for the rest of the run.
        remaining = spec.workload.iterations - placement.period
        job.dynamic = placement.tracker(
            model.n_params,
            spec.workers,
            spec.shards,
            spec.colocated,
            key_owner=assignment.key_owner,
            horizon=max(remaining, 0) if placement.fixed else None,
        )
    return job
