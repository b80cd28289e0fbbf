"""Round policies: the interface a server shard merges rounds of local steps through.

A round policy (:attr:`~psml_core.sync.base.SyncPolicy.rounds`) replaces per-iteration pushes by
rounds: each push carries a worker's accumulated model change and its :class:`RoundReport`;
once every worker's is in, the shard asks the policy for merge weights, hands it the reports and
asks it for the next round's budgets (:class:`~psml_core.engine.server.ServerShard`). PCP
(:mod:`.pcp`) is one; another predictor implements :class:`RoundPolicy` and needs no change to
the shard.
"""

from __future__ import annotations

import struct
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from psml_core.sync.base import SyncPolicy

__all__ = ["BUDGET_BYTES", "REPORT_BYTES", "RoundPolicy", "RoundReport"]

REPORT_BYTES = 12
"""Wire size of a :class:`RoundReport`: uint32 steps, float32 step time, float32 comm time."""

BUDGET_BYTES = 4
"""Wire size of a granted budget (uint32), sent with shard 0's pull answer."""

_REPORT = struct.Struct("<Iff")
assert _REPORT.size == REPORT_BYTES


@dataclass(frozen=True)
class RoundReport:
    """What a worker tells every shard with its round push.

    Attributes:
        steps: Local steps taken in the round (its merge weight under ``samples`` weighting).
        step_s: Mean compute time of one local step in the round.
        comm_s: Communication time of the worker's previous round (pull + push; 0 at first).
    """

    steps: int
    step_s: float
    comm_s: float

    def pack(self) -> bytes:
        """The 12-byte wire form (float32 times: the prediction needs no more precision)."""
        return _REPORT.pack(self.steps, self.step_s, self.comm_s)

    @classmethod
    def unpack(cls, buf: bytes | memoryview) -> RoundReport:
        """Parse the wire form; a wrong length is a protocol error, not garbage."""
        if len(buf) != REPORT_BYTES:
            raise ValueError(f"a round report is {REPORT_BYTES} bytes, got {len(buf)}")
        steps, step_s, comm_s = _REPORT.unpack(bytes(buf))
        return cls(int(steps), float(step_s), float(comm_s))

    def wire(self) -> RoundReport:
        """The report as the receiver sees it (times rounded to float32).

        Every backend's server then predicts from exactly the same numbers.
        """
        return RoundReport.unpack(self.pack())


class RoundPolicy(SyncPolicy):
    """A sync policy of rounds: what a server shard asks of it at the end of each round.

    Rounds are synchronous (a barrier): a worker starts round c once every round before it has
    been merged.
    """

    barrier = True
    rounds = True

    @abstractmethod
    def weights(self, steps: Sequence[int]) -> np.ndarray:
        """Merge weights of the workers' changes (float32, summing to 1), from their steps."""

    @abstractmethod
    def report(self, worker: int, report: RoundReport) -> None:
        """Take in ``worker``'s report of the round just merged."""

    @abstractmethod
    def budgets(self, workers: int) -> list[int]:
        """Local steps each of the ``workers`` workers is granted for the next round."""
