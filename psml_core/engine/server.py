"""The server shard: a key range, its parameters, the optimizer step, and the sync state."""

from __future__ import annotations

import numpy as np

from psml_core.codecs.base import Codec, CodecContext, Payload
from psml_core.engine.optim import ServerOptimizer
from psml_core.sync.base import SyncPolicy

__all__ = ["ServerShard"]


class ServerShard:
    """Holds the parameters of some keys and applies the workers' pushes to them.

    Under a barrier policy (BSP) the pushes of one clock are averaged into one update; without
    one, each push is applied as it arrives, scaled by 1/P so that one round of P pushes moves the
    model as far as one BSP step.

    Args:
        rank: Shard rank.
        keys: The parameter keys this shard holds.
        init_values: Their initial values.
        workers: Number of workers P.
        policy: The sync policy.
        codec_up: Decodes and aggregates pushes.
        codec_down: Encodes pulls.
        optimizer: Turns the aggregated gradient into an update of ``values``.
    """

    def __init__(
        self,
        rank: int,
        keys: np.ndarray,
        init_values: np.ndarray,
        workers: int,
        policy: SyncPolicy,
        codec_up: Codec,
        codec_down: Codec,
        optimizer: ServerOptimizer,
    ) -> None:
        self.rank = rank
        self.keys = keys
        self.values = init_values.astype(np.float32).copy()
        self.optimizer = optimizer
        self.workers = workers
        self.policy = policy
        self.codec_up = codec_up
        self.server_codec = codec_up.server()
        self.codec_down = codec_down
        self.clocks = [0] * workers
        self._pending: dict[int, dict[int, Payload]] = {}

    def push(self, worker: int, clock: int, payload: Payload, ctx: CodecContext) -> bool:
        """Receive a push of iteration ``clock``; return True if an update was applied."""
        if not self.policy.barrier:
            self._step(self.codec_up.decode(payload, ctx) / np.float32(self.workers))
            self.clocks[worker] += 1
            return True
        pending = self._pending.setdefault(clock, {})
        pending[worker] = payload
        if len(pending) < self.workers:
            return False
        del self._pending[clock]
        ordered = [pending[w] for w in range(self.workers)]  # fixed order: deterministic sums
        self._step(self.server_codec.aggregate(ordered, ctx) / np.float32(self.workers))
        self.clocks = [c + 1 for c in self.clocks]
        return True

    def _step(self, grad: np.ndarray) -> None:
        self.optimizer.step(self.values, grad)

    def may_serve(self, worker: int, clock: int) -> bool:
        """Whether ``worker`` may pull for its iteration ``clock`` now.

        Only once this shard has applied the worker's ``clock`` earlier pushes (a barrier holds
        them until the round is complete) and the sync policy lets it proceed.
        """
        return self.clocks[worker] >= clock and self.policy.may_proceed(worker, self.clocks)

    def pull(self, worker: int, ctx: CodecContext) -> Payload:
        """The current values, encoded for ``worker``."""
        return self.codec_down.encode(self.values, ctx)
