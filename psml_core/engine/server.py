"""The server shard: a key range, its parameters, the optimizer step, and the sync state."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from psml_core.codecs.base import Codec, CodecContext, Payload
from psml_core.codecs.kv import KVCodec
from psml_core.engine.optim import ServerOptimizer
from psml_core.sync.base import SyncPolicy
from psml_core.sync.rounds import BUDGET_BYTES, RoundPolicy, RoundReport

if TYPE_CHECKING:
    import torch

__all__ = [
    "BUDGET_KEY",
    "PULL_MODES",
    "RATIO_BYTES",
    "RATIO_KEY",
    "Pull",
    "ServerShard",
    "codec_state",
]

PULL_MODES = ("params", "aggregate", "delta", "touched")

BUDGET_KEY = "sync_budget"
"""``Pull.extra`` key of a round policy's granted local steps (shard 0's answers)."""

RATIO_KEY = "ctl_ratio"
"""``Pull.extra`` key of the step's compression ratio, where shard 0 runs the controller (dist)."""

RATIO_BYTES = 4
"""Wire size of the ratio in an answer (float32)."""


def codec_state(extra: dict[str, Any]) -> dict[str, Any]:
    """The codec's part of a pull's published state (without the engine's control keys)."""
    if BUDGET_KEY in extra or RATIO_KEY in extra:
        return {k: v for k, v in extra.items() if k not in (BUDGET_KEY, RATIO_KEY)}
    return extra


@dataclass
class Pull:
    """What a shard sends a worker that asks for its next iteration.

    Attributes:
        payload: The encoded message (None: nothing to send, e.g. before the first round).
        extra: Codec state published for the next step (``ServerCodec.shared``).
        extra_bytes: Wire size of ``extra`` (counted as down traffic).
        ctx: The context the payload was encoded with (known to both ends, never sent): a
            broadcast of round t decodes with round t's context, not the puller's next step.
    """

    payload: Payload | None
    extra: dict[str, Any] = field(default_factory=dict)
    extra_bytes: int = 0
    ctx: CodecContext | None = None

    @property
    def wire_bytes(self) -> int:
        """Bytes of the answer: payload plus published state."""
        return (self.payload.wire_bytes if self.payload else 0) + self.extra_bytes


class ServerShard:
    """Holds the parameters of some keys and applies the workers' pushes to them.

    Under a barrier policy (BSP) the pushes of one clock are summed by the codec's server side
    and averaged into one update; without one, each push is applied as it arrives, scaled by 1/P
    so that one round of P pushes moves the model as far as one BSP step.

    Four pull modes:

    * ``params`` — the conventional PS: a pull returns the shard's current values, encoded by
      ``codec_down`` (dense by default).
    * ``aggregate`` — update broadcast (barrier policies only): after a round the server encodes
      the averaged gradient with the codec's server side (``encode_down``: the union of the
      workers' supports, DFS blocks, a filtered broadcast, ...), applies the *decoded broadcast*
      with its optimizer, and sends the same broadcast to every worker, whose optimizer replica
      applies it too: replicas and server stay bit-identical while only compressed updates move.
    * ``delta`` — update-centric pull without a barrier (TDF, Ratatouille async): the shard keeps
      each worker's *view* (what that worker's replica holds of its keys) and answers with
      ``codec_down`` applied to ``values - view``; the view then advances by exactly what was
      decoded, so whatever a filter drops is still in the next answer's change.
    * ``touched`` — PS-lite's sparse pull (jpdc, Parsa): the request names the keys of the
      shard that the worker's next mini-batch touches (a :func:`~psml_core.codecs.kv.pack_keys`
      key list) and the answer carries their current values as
      :mod:`~psml_core.codecs.kv` entries (12 B each, zeros included); ``codec_down`` is not
      used. Waits like ``params`` under a barrier. With a dense model every key is touched and
      this is ``params`` with a kv answer of all keys.

    Round policies (:class:`~psml_core.sync.rounds.RoundPolicy`, e.g. PCP): a clock is a round;
    each push carries a worker's accumulated model change and its
    :class:`~psml_core.sync.rounds.RoundReport`; once all P are in, the shard adds their
    weighted sum to its values and asks the policy for the next round's budgets, which shard 0
    sends with its pull answers (4 bytes each). A run of a round policy processes the same
    number of samples as one of any other policy: ``step_budget`` local steps in all (P x
    iterations). The budgets are trimmed so that the total does not pass it (each worker keeps
    at least one step, so the last round may pass it by fewer than P steps), and once it is
    spent every budget is 0: the workers stop (:attr:`finished`).

    Args:
        rank: Shard rank.
        keys: The parameter keys this shard holds.
        init_values: Their initial values.
        workers: Number of workers P.
        policy: The sync policy.
        codec_up: The workers' codec (its server side aggregates and encodes broadcasts).
        codec_down: Encodes pulls in ``params`` mode.
        optimizer: Turns the aggregated gradient into an update of ``values``.
        pull_mode: One of :data:`PULL_MODES`.
        step_budget: Round policies: the local steps of all workers together after which the
            run ends (None: no budget, rounds run to the iteration count).

    After :meth:`to` the values, the optimizer state and every decoded vector are torch tensors
    on one device: pushes are decoded and summed there (``ServerCodec.aggregate_on``), the
    broadcast is encoded from there, and only payloads cross to the host.
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
        pull_mode: str = "params",
        step_budget: int | None = None,
    ) -> None:
        if pull_mode not in PULL_MODES:
            raise ValueError(f"pull_mode must be one of {PULL_MODES}, got {pull_mode!r}")
        self.rank = rank
        self.keys = keys
        self.values = init_values.astype(np.float32).copy()
        self.optimizer = optimizer
        self.workers = workers
        self.policy = policy
        self.codec_up = codec_up
        self.server_codec = codec_up.server()
        self.codec_down = codec_down
        self.pull_mode = pull_mode
        self.clocks = [0] * workers
        self._pending: dict[int, dict[int, Payload]] = {}
        self._reports: dict[int, dict[int, RoundReport]] = {}
        self._rounds: dict[int, tuple[Pull, list[int]]] = {}
        self.budgets = [1] * workers
        self.step_budget = step_budget
        self.steps_done = 0
        self.finished = False
        self.views = [self.values.copy() for _ in range(workers)] if pull_mode == "delta" else None
        self.kv = KVCodec()  # the answer format of touched pulls
        if policy.rounds and pull_mode != "params":
            raise ValueError(f"round policy {policy.name!r} needs pull_mode 'params'")
        # What the end of a round asks of the policy (None: no rounds).
        self.round_policy = policy if isinstance(policy, RoundPolicy) else None
        if policy.rounds and self.round_policy is None:
            raise TypeError(f"sync policy {policy.name!r} has rounds but is no RoundPolicy")
        self.device: torch.device | None = None
        self._workers_t: Any = None  # P as a float32 scalar on the device (see _mean)
        self._decoded: tuple[Payload, Any] | None = None  # the last broadcast, decoded

    def to(self, device: torch.device) -> None:
        """Keep the values, the optimizer state and the pull views on ``device`` from now on."""
        import torch

        self.device = device
        self.values = torch.from_numpy(self.values).to(device)
        self.optimizer.to(device)
        if self.views is not None:
            self.views = [torch.from_numpy(np.asarray(v)).to(device) for v in self.views]
        # A divisor on the device: CUDA divides by a host scalar as a multiplication by its
        # reciprocal, which can round differently from the host's division.
        self._workers_t = torch.tensor(float(self.workers), dtype=torch.float32, device=device)

    def _mean(self, total: Any) -> Any:
        """``total / P`` in float32 (the average of P pushes)."""
        if self.device is None:
            return total / np.float32(self.workers)
        return total / self._workers_t

    def _decode(self, codec: Codec, payload: Payload, ctx: CodecContext) -> Any:
        """A payload decoded where the values live."""
        if self.device is None:
            return codec.decode(payload, ctx)
        return codec.decode_on(payload, ctx, self.device)

    def push(
        self,
        worker: int,
        clock: int,
        payload: Payload,
        ctx: CodecContext,
        now: float = 0.0,
        report: RoundReport | None = None,
    ) -> bool:
        """Receive a push of iteration ``clock``; return True if an update was applied.

        Args:
            worker: The pushing worker.
            clock: Its iteration (round, under a round policy).
            payload: The encoded gradient (round policies: the encoded model change).
            ctx: The codec context both ends share.
            now: Arrival time on the run's clock (for policies that predict from it).
            report: A round policy's report from the worker (required under one).
        """
        self.policy.observe_push(worker, clock, now)
        if self.policy.rounds:
            return self._push_round(worker, clock, payload, ctx, report)
        if not self.policy.barrier:
            self.optimizer.step(self.values, self._mean(self._decode(self.codec_up, payload, ctx)))
            self.clocks[worker] += 1
            return True
        pending = self._pending.setdefault(clock, {})
        pending[worker] = payload
        if len(pending) < self.workers:
            return False
        del self._pending[clock]
        ordered = [pending[w] for w in range(self.workers)]  # fixed order: deterministic sums
        if self.device is None:
            total = self.server_codec.aggregate(ordered, ctx)
        else:
            total = self.server_codec.aggregate_on(ordered, ctx, self.device)
        avg = self._mean(total)
        if self.pull_mode == "aggregate":
            down = self.server_codec.encode_down(avg, ctx)
            if self.device is None:
                avg = self.server_codec.decode_down(down, ctx)
            else:
                avg = self.server_codec.decode_down_on(down, ctx, self.device)
            extra, extra_bytes = self.server_codec.shared()
            self._rounds[clock] = (Pull(down, extra, extra_bytes, ctx), [self.workers])
        self.optimizer.step(self.values, avg)
        self.clocks = [c + 1 for c in self.clocks]
        return True

    def _push_round(
        self,
        worker: int,
        clock: int,
        payload: Payload,
        ctx: CodecContext,
        report: RoundReport | None,
    ) -> bool:
        if report is None:
            raise ValueError(f"a round push from worker {worker} without its round report")
        pending = self._pending.setdefault(clock, {})
        pending[worker] = payload
        self._reports.setdefault(clock, {})[worker] = report
        if len(pending) < self.workers:
            return False
        del self._pending[clock]
        reports = self._reports.pop(clock)
        policy = self.round_policy
        if policy is None:
            raise ValueError(f"a round push to shard {self.rank}, whose policy has no rounds")
        weights = policy.weights([reports[w].steps for w in range(self.workers)])
        merged = np.zeros_like(self.values)
        for w in range(self.workers):  # fixed order: deterministic sums
            merged += weights[w] * self.codec_up.decode(pending[w], ctx)
            policy.report(w, reports[w])
        self.values += merged
        self.steps_done += sum(reports[w].steps for w in range(self.workers))
        self.budgets = self._trimmed(policy.budgets(self.workers))
        self.clocks = [c + 1 for c in self.clocks]
        return True

    def _trimmed(self, budgets: list[int]) -> list[int]:
        """The policy's budgets within what is left of ``step_budget`` (all 0 once spent)."""
        if self.step_budget is None:
            return budgets
        left = self.step_budget - self.steps_done
        if left <= 0:
            self.finished = True
            return [0] * self.workers
        out = list(budgets)
        while sum(out) > max(left, self.workers):
            i = max(range(self.workers), key=lambda w: (out[w], -w))  # largest, lowest rank
            out[i] -= 1
        return out

    def broadcast(self, clock: int) -> Pull | None:
        """The update broadcast of round ``clock`` (aggregate mode), until every worker has it."""
        entry = self._rounds.get(clock)
        return entry[0] if entry is not None else None

    def may_serve(self, worker: int, clock: int) -> bool:
        """Whether ``worker`` may pull for its iteration ``clock`` now.

        Only once this shard has applied the worker's ``clock`` earlier pushes (a barrier holds
        them until the round is complete) and the sync policy lets it proceed.
        """
        return self.clocks[worker] >= clock and self.policy.may_proceed(worker, self.clocks)

    def pull(
        self,
        worker: int,
        clock: int,
        ctx: CodecContext,
        now: float = 0.0,
        keys: np.ndarray | None = None,
    ) -> Pull:
        """The answer to ``worker``'s pull for its iteration ``clock`` (once ``may_serve``).

        Args:
            worker: The pulling worker.
            clock: Its iteration.
            ctx: The codec context of the answer.
            now: The time of the answer on the run's clock (DSSP times iterations from it).
            keys: ``touched`` mode: the requested keys, positions in :attr:`keys` (strictly
                ascending); required there, ignored otherwise.
        """
        self.policy.observe_serve(worker, clock, now)
        if self.pull_mode == "touched":
            if keys is None:
                raise ValueError(f"a touched pull of shard {self.rank} needs the requested keys")
            # Sealed unbound (ctx None): the dist worker rebuilds this answer without its context.
            return Pull(self.kv.encode_keys(self.values, keys, None), ctx=ctx)
        if self.pull_mode == "params":
            if self.policy.rounds and self.rank == 0:
                budget = {BUDGET_KEY: self.budgets[worker]}
                return Pull(self.codec_down.encode(self.values, ctx), budget, BUDGET_BYTES, ctx)
            return Pull(self.codec_down.encode(self.values, ctx), ctx=ctx)
        if self.pull_mode == "delta":
            assert self.views is not None
            view = self.views[worker]
            # The view already carries whatever a filter drops into the next change; a filter's
            # own residual, shared by all workers of the shard, would carry it twice.
            if getattr(self.codec_down, "carries_residual", False):
                self.codec_down.reset()  # type: ignore[attr-defined]
            payload = self.codec_down.encode(self.values - view, ctx)
            view += self._decode(self.codec_down, payload, ctx)
            return Pull(payload, ctx=ctx)
        if clock == 0:
            return Pull(None)  # every replica starts from the same seeded initial values
        answer, left = self._rounds[clock - 1]
        left[0] -= 1
        if left[0] == 0:
            del self._rounds[clock - 1]  # every worker has it
        return answer

    def decode_touched(self, answer: Pull, keys: np.ndarray) -> np.ndarray:
        """``touched`` mode: the values of the requested ``keys`` from the shard's answer.

        Raises:
            ValueError: the answer is no valid kv payload, or names other keys than requested.
        """
        if answer.payload is None:
            raise ValueError(f"shard {self.rank} answered a touched pull without a payload")
        got, values = self.kv.decode_entries(answer.payload)
        if not np.array_equal(got, keys):
            raise ValueError(
                f"shard {self.rank} answered {got.size} keys, not the {keys.size} requested"
            )
        return values

    def decode_pull(self, answer: Pull, ctx: CodecContext) -> np.ndarray | None:
        """The vector a worker applies.

        Parameter values (params), the broadcast (aggregate) or the change since its last
        pull (delta).
        """
        if answer.payload is None:
            return None
        ctx = answer.ctx or ctx
        if self.pull_mode in ("params", "delta"):
            return self._decode(self.codec_down, answer.payload, ctx)
        if self.pull_mode == "touched":
            return self.kv.decode(answer.payload, ctx)
        if self.device is None:
            return self.server_codec.decode_down(answer.payload, ctx)
        # One broadcast reaches every worker: decoded once on the device, read by each replica's
        # optimizer (the simulated clock still charges every worker its decode).
        memo = self._decoded
        if memo is None or memo[0] is not answer.payload:
            memo = (
                answer.payload,
                self.server_codec.decode_down_on(answer.payload, ctx, self.device),
            )
            self._decoded = memo
        return memo[1]
