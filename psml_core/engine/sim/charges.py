"""What compression costs the simulated clock: each codec operation priced by the cost model.

The worker's device encodes its pushes and decodes its pull answers (the run's
``compute.cost_profile``); each shard's server thread decodes every push and encodes the
answers on one CPU core (:data:`SERVER_DEVICE`). Prices come from the device files'
codec cost tables (:class:`~psml_core.devices.codec_cost.CodecCostModel`); with
``compute.codec_costs: false`` everything is free.
"""

from __future__ import annotations

from typing import Any

from psml_core.capabilities import SERVER_DEVICE
from psml_core.codecs.base import Codec, CodecContext, Payload
from psml_core.config import ComputeSpec
from psml_core.devices.codec_cost import CodecCostModel, unwrap

__all__ = ["SERVER_DEVICE", "CodecCharges"]


def _base_density(base: Any, wire_bytes: int, n: int) -> float | None:
    """The density to price an unwrapped codec at (see :meth:`CodecCharges._density`)."""
    if hasattr(base, "ratio"):
        return None  # the cost model reads the codec's ratio (or the step's)
    return min(1.0, max(1e-3, wire_bytes / max(4.0 * n, 1.0)))


class CodecCharges:
    """The seconds each codec operation takes on the worker's device or the server's core.

    Args:
        compute: The run's compute settings (its device, and whether codecs cost anything).
    """

    def __init__(self, compute: ComputeSpec) -> None:
        on = compute.codec_costs
        self.costs = CodecCostModel.for_device(compute.cost_profile) if on else None
        self.server_costs = CodecCostModel.for_device(SERVER_DEVICE) if on else None

    @staticmethod
    def _density(codec: Codec, wire_bytes: int, n: int) -> float | None:
        """The density to price a codec without a ``ratio`` at: its payload over dense."""
        return _base_density(unwrap(codec)[1], wire_bytes, n)

    @staticmethod
    def _sized(codec: Codec, payload: Payload) -> tuple[int, float | None]:
        """The elements a codec operation touches, and the density to price it at.

        Elements: the vector's, or a kv message's entries. Density: as :meth:`_density`.
        """
        _, base = unwrap(codec)
        n = payload.wire_bytes // 12 if base.name == "kv" else payload.n
        return n, _base_density(base, payload.wire_bytes, payload.n)

    def worker_encode_s(self, w: Any, s: int, payload: Payload, ctx: CodecContext) -> float:
        """Worker ``w``'s encode of its push to shard ``s`` (0 without codec costs)."""
        if self.costs is None:
            return 0.0
        codec = w.codecs[s]
        n, ratio = self._sized(codec, payload)
        return self.costs.encode_s(codec, n, ctx, ratio=ratio)

    def push_s(self, shard: Any, payload: Payload, ctx: CodecContext) -> float:
        """The server's decode of one push into its sum (a CPU core's cost)."""
        if self.server_costs is None:
            return 0.0
        n, ratio = self._sized(shard.codec_up, payload)
        return self.server_costs.decode_s(shard.codec_up, n, ctx, ratio=ratio)

    def broadcast_s(self, shard: Any, t: int, ctx: CodecContext) -> float:
        """The server's once-per-round work and its encode of round ``t``'s broadcast.

        The round's work (DFS's choice of the next block size) comes before the encode of the
        broadcast, once per round whatever the number of pushes (update-broadcast pulls).
        """
        if self.server_costs is None:
            return 0.0
        down = shard.broadcast(t)
        if down is None or down.payload is None:
            return 0.0
        n = down.payload.n
        ratio = self._density(shard.codec_up, down.payload.wire_bytes, n)
        return self.server_costs.round_s(shard.codec_up, n, ctx) + self.server_costs.encode_down_s(
            shard.codec_up, n, ctx, ratio=ratio
        )

    def answer_s(self, shard: Any, answer: Any, ctx: CodecContext, *, encode: bool) -> float:
        """A pull answer's encode on the server (``encode``) or decode on the worker.

        A broadcast (aggregate mode) costs the server nothing per pull (it was encoded once,
        :meth:`broadcast_s`); the worker decodes it with the up codec's server side.
        """
        payload = answer.payload
        costs = self.server_costs if encode else self.costs
        if costs is None or payload is None:
            return 0.0
        mode = shard.pull_mode
        if mode == "aggregate":
            if encode:
                return 0.0
            ratio = self._density(shard.codec_up, payload.wire_bytes, payload.n)
            return costs.decode_down_s(shard.codec_up, payload.n, ctx, ratio=ratio)
        if mode == "touched":
            entries = payload.wire_bytes // 12
            return costs.op_s("kv", "encode" if encode else "decode", entries)
        codec = shard.codec_down
        ratio = self._density(codec, payload.wire_bytes, payload.n)
        if encode:
            return costs.encode_down_s(codec, payload.n, ctx, ratio=ratio, pull=True)
        return costs.decode_down_s(codec, payload.n, ctx, ratio=ratio, pull=True)
