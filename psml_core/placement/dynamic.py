"""Dynamic chunk reassignment for dense (DNN) models: jpdc's dynamic partition.

Source: our design for the DNN case (docs/methods.md, JPDC) [ours]; jpdc (Duan and Wu,
JPDC 2023) estimates the DNN cost function during training because it cannot be written down.

Algorithm:

1. The flat parameter vector is cut into C chunks of ``chunk`` keys (the last may be shorter);
   a shard owns whole chunks.
2. After each iteration, worker p reports its bytes on every chunk q (compressed push plus
   aggregated pull, whether local or remote): :meth:`DynamicChunkPartition.observe`. The
   statistic ``u[p][q]`` is their exponential moving average with weight ``decay`` on the
   past (the first report of a worker initialises it, so there is no bias towards zero).
3. Every ``period`` steps (:meth:`DynamicChunkPartition.maybe_reassign`): sort the chunks by
   total traffic ``sum_p u[p][q]``, descending (ties: chunk id), and give each to the shard
   whose machine's worker has the largest ``u[p][q]``, among shards under capacity
   (``max(ceil(C / S), floor((1 + eps) C / S))`` chunks). Ties keep the current owner when
   it is under capacity, else go to the tied shard with the fewest chunks so far, then the
   lowest id.
4. With shard s on worker s's machine (colocated), the estimated remote bytes per iteration of
   an assignment ``s(.)`` are ``sum_q (sum_p u[p][q] - u[s(q)][q])``; the saving is the
   difference to the current assignment times ``horizon`` iterations (``period`` by default).
   Moving chunk q costs ``bytes_per_value * len(q)`` bytes (4c for a full fp32 chunk),
   counted as down traffic by the engine. The new assignment is accepted only if the saving
   exceeds the migration bytes.

"Fixed" (``fixed=True``): a single decision, at step ``period`` (after a warm-up of ``period``
iterations); pass ``horizon`` = the remaining iterations so the test weighs the whole run.

Engine wiring: :func:`~psml_core.engine.job.build_job` makes the tracker (``Job.dynamic``);
the sim backend feeds :meth:`DynamicChunkPartition.observe` each worker's push and pull bytes
per step, and at every ``period``-th step, once all pulls are in and before any push, calls
:meth:`DynamicChunkPartition.maybe_reassign`, sends each moved chunk between the two shards'
machines and moves the keys' state (:func:`~psml_core.engine.migration.move_keys`).

Parameters and tuning:
    chunk: Keys per chunk (4,096). Smaller chunks follow the traffic more finely but cost more
        bookkeeping (u is P x C floats) and more, smaller migrations.
    decay: EMA weight of the past (0.9, about the last 10 iterations). Raise it when the
        per-step traffic is noisy (random-k, small batches).
    period: Steps between decisions (R = 100).
    eps: Balance slack on chunks per shard (0.05).
    horizon: Iterations the saving is counted over (default: ``period``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from psml_core.errors import ConfigError
from psml_core.placement.base import PLACEMENTS, Assignment, Placement, PlacementProblem
from psml_core.placement.cost import machine_of_shard
from psml_core.placement.oracle import group_split
from psml_core.placement.parsa import capacity, check_eps
from psml_core.placement.range import even_ranges

__all__ = [
    "SAMPLE_SPLITS",
    "Decision",
    "DynamicChunkPartition",
    "DynamicPlacement",
    "Reassignment",
]

SAMPLE_SPLITS = ("range", "groups")
"""How the dynamic placement splits the samples (``params.samples``)."""


@dataclass(frozen=True)
class Decision:
    """One evaluation of the greedy at a period step, accepted or not.

    Attributes:
        step: The step it was taken at.
        accepted: Whether the new assignment was adopted.
        moved_chunks: Chunks whose shard would change.
        migration_bytes: Bytes the moves cost (``bytes_per_value`` per moved key).
        saving_bytes: Estimated remote bytes saved over ``horizon`` iterations.
        remote_before: Estimated remote bytes per iteration, current assignment.
        remote_after: Estimated remote bytes per iteration, greedy assignment.
    """

    step: int
    accepted: bool
    moved_chunks: int
    migration_bytes: int
    saving_bytes: float
    remote_before: float
    remote_after: float


@dataclass(frozen=True)
class Reassignment:
    """An accepted reassignment: what the engine applies before the next step.

    Attributes:
        step: The step it was decided at.
        chunk_owner: New shard of each chunk (int32, length C).
        key_owner: New shard of each key (int32, length n_keys).
        moved_chunks: Indices of the chunks that change shard (ascending).
        migration_bytes: Bytes of the moved values (down traffic).
        saving_bytes: Estimated remote bytes saved over the horizon.
    """

    step: int
    chunk_owner: np.ndarray
    key_owner: np.ndarray
    moved_chunks: np.ndarray
    migration_bytes: int
    saving_bytes: float


class DynamicChunkPartition:
    """Traffic statistics per (worker, chunk) and the periodic greedy chunk reassignment.

    Args:
        n_keys: Length of the flat parameter vector.
        workers: Number of workers P.
        shards: Number of shards S.
        key_owner: Current shard of each key; must own whole chunks. Default: chunks in even
            contiguous ranges.
        chunk: Keys per chunk c.
        decay: EMA weight of the past.
        period: Steps between decisions R.
        eps: Balance slack on chunks per shard.
        horizon: Iterations the saving is estimated over (default ``period``).
        fixed: Decide once, at step ``period``, and never again.
        colocated: Shard s on worker s's machine; if False no traffic is local and no
            reassignment can save anything.
        bytes_per_value: Bytes per migrated key (4: fp32).

    Raises:
        ConfigError: Bad parameters, fewer chunks than shards, or a key_owner that splits a
            chunk.
    """

    def __init__(
        self,
        n_keys: int,
        workers: int,
        shards: int,
        key_owner: np.ndarray | None = None,
        *,
        chunk: int = 4096,
        decay: float = 0.9,
        period: int = 100,
        eps: float = 0.05,
        horizon: int | None = None,
        fixed: bool = False,
        colocated: bool = True,
        bytes_per_value: int = 4,
    ) -> None:
        _check_params(chunk, decay, period, eps)
        if horizon is not None and (not isinstance(horizon, int) or horizon < 0):
            raise ConfigError(
                f"dynamic placement: horizon must be an integer >= 0, got {horizon!r}"
            )
        self.n_keys = int(n_keys)
        self.workers = int(workers)
        self.shards = int(shards)
        self.chunk = int(chunk)
        self.decay = float(decay)
        self.period = int(period)
        self.horizon = self.period if horizon is None else int(horizon)
        self.fixed = bool(fixed)
        self.bytes_per_value = int(bytes_per_value)
        self.n_chunks = -(-self.n_keys // self.chunk)
        if self.n_chunks < self.shards:
            raise ConfigError(
                f"dynamic placement: {self.n_keys} keys make {self.n_chunks} chunks of "
                f"{self.chunk}, fewer than {self.shards} shards; lower params.chunk"
            )
        self.chunk_sizes = np.full(self.n_chunks, self.chunk, dtype=np.int64)
        self.chunk_sizes[-1] = self.n_keys - self.chunk * (self.n_chunks - 1)
        self.cap = capacity(self.n_chunks, self.shards, eps)
        # Worker whose machine hosts each shard (-1: a dedicated server, never local).
        machine = machine_of_shard(self.shards, self.workers, colocated)
        self._local_worker = np.where(machine < self.workers, machine, -1)
        if key_owner is None:
            self.chunk_owner = even_ranges(self.n_chunks, self.shards)
        else:
            self.chunk_owner = self._chunks_of_key_owner(np.asarray(key_owner))
        self.u = np.zeros((self.workers, self.n_chunks), dtype=np.float64)
        self._seen = np.zeros(self.workers, dtype=bool)
        self.decisions: list[Decision] = []

    # ------------------------------------------------------------------ views

    @property
    def key_owner(self) -> np.ndarray:
        """Current shard of each key (int32, length n_keys)."""
        return np.repeat(self.chunk_owner, self.chunk_sizes).astype(np.int32)

    def chunk_of(self, keys: np.ndarray) -> np.ndarray:
        """Chunk index of each key."""
        return np.asarray(keys, dtype=np.int64) // self.chunk

    def chunk_bytes(self, keys: np.ndarray, nbytes: np.ndarray | float) -> np.ndarray:
        """Per-chunk byte totals from per-key byte counts (the input :meth:`observe` wants).

        Args:
            keys: Keys a worker sent or received this iteration (repeats allowed).
            nbytes: Bytes per entry of ``keys`` (array), or one value for all.
        """
        keys = np.asarray(keys, dtype=np.int64)
        w = np.broadcast_to(np.asarray(nbytes, dtype=np.float64), keys.shape)
        return np.bincount(keys // self.chunk, weights=w, minlength=self.n_chunks)

    def remote_bytes(self, chunk_owner: np.ndarray | None = None) -> float:
        """Estimated remote bytes per iteration (from ``u``) under ``chunk_owner``."""
        owner = self.chunk_owner if chunk_owner is None else chunk_owner
        return float(self.u.sum() - self._local(owner).sum())

    def _local(self, chunk_owner: np.ndarray) -> np.ndarray:
        """Traffic of each chunk that stays on its shard's machine."""
        w = self._local_worker[chunk_owner]
        cols = np.arange(self.n_chunks)
        return np.where(w >= 0, self.u[np.maximum(w, 0), cols], 0.0)

    # ------------------------------------------------------------------ updates

    def observe(self, worker: int, chunk_bytes: np.ndarray) -> None:
        """Fold one iteration's bytes of ``worker`` on every chunk into the EMA ``u``.

        Args:
            worker: The reporting worker, 0 <= worker < P.
            chunk_bytes: Its bytes on each chunk (push + pull), length C, finite, >= 0.
        """
        if not 0 <= worker < self.workers:
            raise ValueError(f"worker {worker} is outside 0..{self.workers - 1}")
        b = np.asarray(chunk_bytes, dtype=np.float64)
        if b.shape != (self.n_chunks,):
            raise ValueError(f"chunk_bytes has shape {b.shape}; expected ({self.n_chunks},)")
        if not np.all(np.isfinite(b)) or np.any(b < 0):
            raise ValueError("chunk_bytes must be finite and >= 0")
        if self._seen[worker]:
            self.u[worker] *= self.decay
            self.u[worker] += (1.0 - self.decay) * b
        else:
            self.u[worker] = b
            self._seen[worker] = True

    def propose(self) -> np.ndarray:
        """The greedy assignment for the current statistics (does not adopt it)."""
        total = self.u.sum(axis=0)
        order = np.lexsort((np.arange(self.n_chunks), -total))
        count = np.zeros(self.shards, dtype=np.int64)
        new = np.empty(self.n_chunks, dtype=np.int32)
        has_local = self._local_worker >= 0
        lw = np.maximum(self._local_worker, 0)
        for q in order.tolist():
            score = np.where(has_local, self.u[lw, q], 0.0)
            score = np.where(count < self.cap, score, -np.inf)
            best = score.max()
            cur = int(self.chunk_owner[q])
            if score[cur] == best:
                s = cur  # no gain in moving
            else:  # among the best, the emptiest shard, then the lowest id
                s = int(np.argmin(np.where(score == best, count, np.iinfo(np.int64).max)))
            new[q] = s
            count[s] += 1
        return new

    def maybe_reassign(self, step: int) -> Reassignment | None:
        """At a period step, run the greedy and adopt it if it pays for its migration.

        Args:
            step: Iterations completed so far (decisions at multiples of ``period``, > 0).

        Returns:
            The accepted :class:`Reassignment`, or None (not a decision step, no statistics
            yet, nothing moves, or the saving does not exceed the migration bytes). Every
            evaluation is appended to :attr:`decisions`.
        """
        if step <= 0 or step % self.period != 0 or not self._seen.any():
            return None
        if self.fixed and self.decisions:
            return None
        new = self.propose()
        moved = np.flatnonzero(new != self.chunk_owner)
        migration = int(self.bytes_per_value * self.chunk_sizes[moved].sum())
        before, after = self.remote_bytes(), self.remote_bytes(new)
        saving = self.horizon * (before - after)
        accepted = moved.size > 0 and saving > migration
        self.decisions.append(
            Decision(step, accepted, int(moved.size), migration, saving, before, after)
        )
        if not accepted:
            return None
        self.chunk_owner = new
        return Reassignment(
            step=step,
            chunk_owner=new.copy(),
            key_owner=self.key_owner,
            moved_chunks=moved,
            migration_bytes=migration,
            saving_bytes=saving,
        )

    def _chunks_of_key_owner(self, key_owner: np.ndarray) -> np.ndarray:
        if key_owner.shape != (self.n_keys,):
            raise ConfigError(
                f"dynamic placement: key_owner has shape {key_owner.shape}, "
                f"expected ({self.n_keys},)"
            )
        starts = np.arange(self.n_chunks) * self.chunk
        owner = key_owner[starts].astype(np.int32)
        if not np.array_equal(np.repeat(owner, self.chunk_sizes), key_owner):
            raise ConfigError(
                f"dynamic placement: the initial key_owner splits a chunk of {self.chunk} keys; "
                "start from the 'dynamic' placement's own assignment"
            )
        return owner


def _check_params(chunk: int, decay: float, period: int, eps: float) -> None:
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ConfigError(
            f"placement 'dynamic': params.chunk must be an integer >= 1, got {chunk!r}"
        )
    if not (isinstance(decay, int | float) and 0.0 <= decay < 1.0):
        raise ConfigError(f"placement 'dynamic': params.decay must be in [0, 1), got {decay!r}")
    if isinstance(period, bool) or not isinstance(period, int) or period < 1:
        raise ConfigError(
            f"placement 'dynamic': params.period must be an integer >= 1, got {period!r}"
        )
    check_eps("dynamic", eps)


@PLACEMENTS.register("dynamic")
class DynamicPlacement(Placement):
    """Initial placement of the dynamic partition: even ranges, keys in whole chunks.

    Samples are split in contiguous even ranges (prepared data are shuffled), chunks of keys
    in even contiguous ranges over the shards. The reassignment during training is done by
    the :class:`DynamicChunkPartition` that :meth:`tracker` builds, which the sim backend
    drives (BSP; the dist and Horovod backends refuse it).

    Args:
        chunk: Keys per chunk.
        decay: EMA weight of the past.
        period: Steps between decisions.
        eps: Balance slack on chunks per shard.
        fixed: Decide once, after ``period`` warm-up steps.
        samples: ``range`` (even contiguous ranges of the shuffled samples) or ``groups``
            (whole true groups per worker, :func:`~psml_core.placement.oracle.group_split`:
            the data locality a chunk's location can exploit under ``touched`` pulls).
    """

    moves_keys = True
    needs_incidence = False

    dynamic = True

    def __init__(
        self,
        chunk: int = 4096,
        decay: float = 0.9,
        period: int = 100,
        eps: float = 0.05,
        fixed: bool = False,
        samples: str = "range",
    ) -> None:
        _check_params(chunk, decay, period, eps)
        if samples not in SAMPLE_SPLITS:
            raise ConfigError(
                f"placement 'dynamic': params.samples must be one of {', '.join(SAMPLE_SPLITS)}, "
                f"got {samples!r}"
            )
        self.chunk = chunk
        self.decay = float(decay)
        self.period = period
        self.eps = float(eps)
        self.fixed = bool(fixed)
        self.samples = samples

    def assign(self, problem: PlacementProblem, workers: int, shards: int) -> Assignment:
        """Samples in even ranges or by true group; chunk-aligned even key ranges."""
        n_chunks = -(-problem.n_keys // self.chunk)
        if n_chunks < shards:
            raise ConfigError(
                f"placement 'dynamic': {problem.n_keys} keys make {n_chunks} chunks of "
                f"{self.chunk}, fewer than {shards} shards; lower params.chunk"
            )
        chunk_owner = even_ranges(n_chunks, shards)
        key_owner = np.repeat(chunk_owner, self.chunk)[: problem.n_keys].astype(np.int32)
        if self.samples == "groups":
            if problem.groups is None:
                raise ConfigError(
                    "placement 'dynamic': params.samples 'groups' needs a data set with planted "
                    "groups (zipf_sparse with communities or locality); use samples: range"
                )
            return Assignment(group_split(problem.groups, workers), key_owner)
        return Assignment(even_ranges(problem.n_samples, workers), key_owner)

    def tracker(
        self,
        n_keys: int,
        workers: int,
        shards: int,
        colocated: bool,
        key_owner: np.ndarray | None = None,
        horizon: int | None = None,
    ) -> DynamicChunkPartition:
        """The run-time reassignment object with this placement's parameters."""
        return DynamicChunkPartition(
            n_keys,
            workers,
            shards,
            key_owner,
            chunk=self.chunk,
            decay=self.decay,
            period=self.period,
            eps=self.eps,
            horizon=horizon,
            fixed=self.fixed,
            colocated=colocated,
        )
