"""Dynamic placement in the simulation: keys that move between shards during the run.

At a decision step every worker waits until all pulls of the step are in; the last one asks
the dynamic partition for a reassignment, and the moved chunks travel over the network as
messages of their fp32 values before the workers go on. Each step's traffic per key is fed
back to the partitioner.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Protocol

import numpy as np
import simpy

from psml_core.codecs.base import CodecContext, Payload
from psml_core.engine.job import Job
from psml_core.engine.migration import chunk_traffic, move_keys
from psml_core.net.network import FairShareNetwork
from psml_core.placement.dynamic import DynamicChunkPartition

__all__ = ["KeyMoves"]


class _Run(Protocol):
    """What moving keys needs of the run's state (:class:`~.processes.RunState`)."""

    env: simpy.Environment
    job: Job
    net: FairShareNetwork
    delay: Any


class KeyMoves:
    """Moves keys between a simulated run's shards, and feeds the partitioner their traffic.

    Args:
        run: The run's state.
        dynamic: The job's dynamic partition.
    """

    def __init__(self, run: _Run, dynamic: DynamicChunkPartition) -> None:
        self.run, self.dynamic = run, dynamic
        self.period: int = dynamic.period
        # This step's traffic per worker (keys, bytes per key); the migration points (arrivals,
        # release event, start time); bytes moved per (step, receiving machine), per old shard.
        self.traffic: list[list[tuple[Any, float]]] = [[] for _ in run.job.workers]
        self._points: dict[int, list[Any]] = {}
        self.migrated: dict[tuple[int, int], Any] = {}

    def decides(self, t: int) -> bool:
        """Whether step ``t`` is a decision step (keys may move once every pull is in)."""
        return t > 0 and t % self.period == 0

    def migration_point(self, t: int) -> Generator[Any, Any, float]:
        """Hold a worker until every worker's pulls of step ``t`` are in, then move keys.

        The last worker to arrive runs :meth:`migrate`; all leave when the moved chunks have
        arrived. Returns the time this worker waited for the others (the move is comm).
        """
        env = self.run.env
        point = self._points.setdefault(t, [0, env.event(), 0.0])
        point[0] += 1
        arrived = env.now
        if point[0] == self.run.job.spec.workers:
            point[2] = arrived
            env.process(self.migrate(t, point[1]))
        yield point[1]
        return point[2] - arrived

    def migrate(self, t: int, done: simpy.Event) -> Generator[Any, Any, None]:
        """Ask the dynamic partition for a reassignment; send the moved chunks, then apply it.

        Each moved chunk travels as one message of its fp32 values from its old shard's
        machine to its new one; the bytes go on the receiving machine's worker's record of step
        ``t``, under the old shard (colocated shards: a move that pays always has a receiver).
        """
        dyn, run = self.dynamic, self.run
        job, net = run.job, run.net
        before = dyn.chunk_owner.copy()
        move = dyn.maybe_reassign(t)
        if move is not None:
            transfers = []
            for q in move.moved_chunks.tolist():
                src = int(job.shard_machine[before[q]])
                dst = int(job.shard_machine[move.chunk_owner[q]])
                nbytes = dyn.bytes_per_value * int(dyn.chunk_sizes[q])
                transfers.append(net.transfer(src, dst, nbytes, run.delay.delay_s(t)))
                got = self.migrated.setdefault((t, dst), np.zeros(len(job.shards), np.int64))
                got[before[q]] += net.wire_bytes(nbytes)
            yield run.env.all_of(transfers)
            move_keys(job, move.key_owner)
        del self._points[t]
        done.succeed()

    def note_keys(self, p: int, keys: np.ndarray, nbytes: int) -> None:
        """Worker ``p`` moved ``nbytes`` on exactly ``keys`` (a touched pull: key list + answer)."""
        if keys.size:
            self.traffic[p].append((keys, nbytes / keys.size))

    def note_answer(self, p: int, keys: np.ndarray, vector: np.ndarray, nbytes: int) -> None:
        """Worker ``p``'s answer of ``nbytes`` on a shard's ``keys``: the non-zero values' keys."""
        self.traffic[p].append(chunk_traffic(keys, vector, nbytes))

    def note_push(self, p: int, payloads: list[Payload], ctxs: list[CodecContext]) -> None:
        """Worker ``p``'s pushes of the step, attributed to the keys they carry.

        ``touched`` mode: the batch's keys of each shard (a kv push carries exactly those,
        zeros included); otherwise the keys whose decoded value is non-zero.
        """
        w = self.run.job.workers[p]
        for s, pl in enumerate(payloads):
            if w.touched:
                self.note_keys(p, w.shard_keys[s][w.batch_keys[s]], pl.wire_bytes)
            else:
                vec = w.codecs[s].decode(pl, ctxs[s])
                self.traffic[p].append(chunk_traffic(w.shard_keys[s], vec, pl.wire_bytes))

    def observe_traffic(self, p: int) -> None:
        """Hand worker ``p``'s traffic of the step to the partitioner."""
        keys = [k for k, _ in self.traffic[p]]
        per_key = [np.full(k.size, b) for k, b in self.traffic[p]]
        self.traffic[p] = []
        self.dynamic.observe(
            p, self.dynamic.chunk_bytes(np.concatenate(keys), np.concatenate(per_key))
        )
