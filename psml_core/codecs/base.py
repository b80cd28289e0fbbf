"""The Codec ABC, its server-side companion, its payload and its registry.

A codec turns a dense float vector into one contiguous byte buffer (its wire format) and back.
``Payload.wire_bytes`` is the buffer's length, so every byte count in psml is the size of what
would really be sent. Wire formats carry no self-describing header: the element count ``n``, the
codec's parameters and the shared per-step context (:class:`CodecContext`) are known to both
ends, and where a codec can choose between formats the *length* of the buffer tells the decoder
which one was used (see :mod:`psml_core.codecs.formats`).

Roles:

* :class:`Codec` — the worker side: ``encode`` (may keep state, e.g. a residual) and ``decode``.
* :class:`ServerCodec` — the server side, made by :meth:`Codec.server`: ``aggregate`` the
  workers' payloads (the sum of what they sent) and ``encode_down`` the result for the broadcast
  to workers, keeping its own state (a down-direction residual, a block mask). Because the down
  payload is made by the codec, down-direction bytes are exact too.
* :class:`ErrorFeedback` (in :mod:`.error_feedback`) wraps any codec with residual memory;
  :class:`MomentumCorrection` (in :mod:`.momentum_correction`) with DGC's momentum correction.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from psml_core.codecs.tensors import is_tensor
from psml_core.registry import Registry

if TYPE_CHECKING:
    import torch

__all__ = [
    "CODECS",
    "Codec",
    "CodecContext",
    "Payload",
    "ServerCodec",
    "check_vector",
    "is_tensor",
]


@dataclass(frozen=True)
class Payload:
    """An encoded message.

    Attributes:
        codec: Name of the codec that wrote it.
        n: Number of elements of the dense vector it encodes (known to both ends).
        buffer: The exact bytes on the wire: ``bytes``, or a read-only ``memoryview`` (what a
            torch path copied off its device into reused host memory, or what a transport
            received into its own buffers); a payload pickles as ``bytes``.
    """

    codec: str
    n: int
    buffer: bytes | memoryview

    @property
    def wire_bytes(self) -> int:
        """Exact size on the wire: the buffer's length."""
        return len(self.buffer)

    def __reduce__(self) -> tuple[type[Payload], tuple[str, int, bytes]]:
        """Pickled with its bytes (a memoryview does not pickle)."""
        return (Payload, (self.codec, self.n, bytes(self.buffer)))


@dataclass
class CodecContext:
    """What both ends of a message know besides the vector (never sent with the payload).

    Attributes:
        step: Training iteration (starts at 0).
        ratio: Compression ratio in force (from the controller); 1.0 = dense.
        seed: Seed shared by all workers and the server for this step (random-k, QSGD).
        lr: Learning rate in force (the value-bounded filter's ``tau * lr_t / lr_0`` schedule).
        extra: Codec-specific shared state published by the server for this step (for DFS: the
            previous aggregate's block mask and the block size); see ``ServerCodec.shared``.
    """

    step: int = 0
    ratio: float = 1.0
    seed: int = 0
    lr: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


_F32_MAX = float(np.finfo(np.float32).max)


def check_vector(x: np.ndarray) -> np.ndarray:
    """Validate a codec input: 1-D, floating, finite in float32. Returns it as a float32 array.

    Raises:
        ValueError: naming the first offending index, for NaN, infinity, or a value beyond
            float32's range (checked before the cast, which would make it infinite).
        TypeError: for a non-floating dtype.
    """
    if is_tensor(x):  # a codec without a torch path: its NumPy path, on a host copy
        x = x.detach().cpu().numpy()  # type: ignore[union-attr]
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"codecs encode 1-D vectors, got shape {x.shape}")
    if x.dtype.kind != "f":  # np.issubdtype's answer for NumPy dtypes, at a tenth of its cost
        raise TypeError(f"codecs encode floating-point vectors, got dtype {x.dtype}")
    finite = np.isfinite(x)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise ValueError(f"cannot encode a non-finite value ({x[bad]!r} at index {bad})")
    if x.dtype.itemsize > 4:
        # Checked before the cast: a float64 beyond float32's range would become inf silently.
        big = np.abs(x) > _F32_MAX
        if big.any():
            bad = int(np.flatnonzero(big)[0])
            raise ValueError(
                f"cannot encode {float(x[bad])!r} at index {bad}: beyond float32's range "
                f"(|x| <= {_F32_MAX:.6g}), the wire's value type"
            )
    return x.astype(np.float32, copy=False)


class Codec(ABC):
    """Encodes dense float32 vectors into an exact wire format and decodes them back.

    Subclasses register with ``@CODECS.register("name")`` and set ``name``. Constructor keyword
    arguments are the codec's parameters (``params`` in a recipe), each with a documented default.

    **Where it runs.** ``encode`` takes a NumPy vector (the host path) or a torch tensor on any
    device. The codecs the paper tier uses have a torch path, chosen by the input's type, that
    packs the payload on the tensor's device and copies the finished bytes to the host once;
    its bytes equal the host path's for the same input and context. A codec without one
    encodes a tensor on a host copy (:func:`check_vector`). ``decode_on`` decodes onto a torch
    device (by default the host decode, copied there once).
    """

    name: ClassVar[str]
    movable: ClassVar[bool] = False
    """Whether the codec keeps no per-shard state of its own (an error-feedback residual aside),
    so that the dynamic placement may move keys between shards mid-run."""

    @abstractmethod
    def encode(self, x: np.ndarray, ctx: CodecContext) -> Payload:
        """Encode a 1-D vector; validate it with :func:`check_vector` first."""

    @abstractmethod
    def decode(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """Decode to a dense float32 vector of length ``payload.n``.

        A buffer whose length or content cannot come from this codec raises ValueError.
        """

    def decode_on(self, payload: Payload, ctx: CodecContext, device: torch.device) -> torch.Tensor:
        """:meth:`decode` onto a torch ``device`` (float32); default: the host decode, copied."""
        import torch

        return torch.from_numpy(np.ascontiguousarray(self.decode(payload, ctx))).to(device)

    def encode_sent_on(self, x: torch.Tensor, ctx: CodecContext) -> tuple[Payload, torch.Tensor]:
        """:meth:`encode` of a device tensor, and what the payload decodes to (float32, there).

        What a wrapper that keeps a residual needs (error feedback, momentum correction):
        the vector the receiver will see. Default: the payload decoded again on ``x``'s device
        (:meth:`decode_on`); a codec that knows what it sent while encoding returns it
        directly (top-k, DFS), bit for bit the same vector, without parsing its own bytes.
        """
        payload = self.encode(x, ctx)  # type: ignore[arg-type]
        return payload, self.decode_on(payload, ctx, x.device)

    def _sent_by(
        self,
        owner: type[Codec],
        encode_sent: Callable[[Any, Any, CodecContext], tuple[Payload, Any]],
        x: torch.Tensor,
        ctx: CodecContext,
    ) -> tuple[Payload, torch.Tensor]:
        """``encode_sent(self, x, ctx)``, unless a subclass of ``owner`` encodes otherwise."""
        if type(self).encode is not owner.encode:
            return Codec.encode_sent_on(self, x, ctx)
        payload, sent = encode_sent(self, x, ctx)
        assert sent is not None
        return payload, sent

    def server(self) -> ServerCodec:
        """A fresh server-side companion (one per server shard)."""
        return ServerCodec(self)

    def for_worker(self, rank: int) -> None:  # noqa: B027 - optional hook, default no-op
        """Tell a worker-side instance its rank (QSGD gives each worker its own random stream)."""

    def set_layout(self, bounds: np.ndarray) -> None:  # noqa: B027 - optional hook, default no-op
        """Tell an instance where the model's tensors start in the vectors it will encode.

        ``bounds`` is ``0 = b_0 < ... < b_K = n``: the positions, in the shard's key list, at
        which a new tensor (or the shard's slice of one) starts. The engine calls it once per
        instance, on both ends; codecs that act per tensor (the value-bounded filter with
        ``keys: tensors``, as MXNet's kvstore filters per key) use it, others ignore it.
        """


class ServerCodec:
    """The server side of a codec: sum the pushes, encode the broadcast, keep server state.

    The default sums the decoded payloads and broadcasts the aggregate losslessly in the cheapest
    of the sparse formats (COO, bitmap or dense; :func:`~psml_core.codecs.formats.encode_auto`),
    so its size reflects the union of the workers' supports. Codecs whose papers specify the down
    direction (DFS, the value-bounded filter) override it.

    Args:
        codec: The worker-side codec whose payloads this server receives.
    """

    def __init__(self, codec: Codec) -> None:
        self.codec = codec

    def aggregate(self, payloads: list[Payload], ctx: CodecContext) -> np.ndarray:
        """The sum of the decoded payloads (float32), summed in the order given."""
        out = np.zeros(payloads[0].n, dtype=np.float32)
        for p in payloads:
            out += self.codec.decode(p, ctx)
        return out

    def aggregate_on(
        self, payloads: list[Payload], ctx: CodecContext, device: torch.device
    ) -> torch.Tensor:
        """:meth:`aggregate` on a torch ``device``: the same sum, in the same order, bit for bit.

        A subclass that overrides :meth:`aggregate` alone gets its host aggregate, copied.
        """
        import torch

        if type(self).aggregate is not ServerCodec.aggregate:
            return torch.from_numpy(np.ascontiguousarray(self.aggregate(payloads, ctx))).to(device)
        out = torch.zeros(payloads[0].n, dtype=torch.float32, device=device)
        for p in payloads:
            out += self.codec.decode_on(p, ctx, device)
        return out

    def encode_down(self, agg: np.ndarray, ctx: CodecContext) -> Payload:
        """Encode what the server broadcasts to every worker (the aggregate, or a filtered part).

        A tensor ``agg`` is encoded on its device (:mod:`.torch_wire`), to the same bytes.
        """
        from psml_core.codecs.formats import encode_auto
        from psml_core.codecs.integrity import seal

        if is_tensor(agg):
            from psml_core.codecs import torch_wire as tw

            t = tw.check_tensor(agg)  # type: ignore[arg-type]
            down = tw.seal_nonzeros(t, ctx.step, down=True, n=int(t.numel()))
            return Payload(f"{self.codec.name}/down", int(t.numel()), down)
        body = encode_auto(check_vector(agg))
        return Payload(
            f"{self.codec.name}/down",
            int(agg.size),
            seal(body, ctx.step, down=True, n=int(agg.size)),
        )

    def decode_down(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """Decode a broadcast payload (workers and the server apply the same vector)."""
        from psml_core.codecs.formats import decode_auto
        from psml_core.codecs.integrity import unseal

        body = unseal(payload.buffer, payload.codec, payload.n, ctx.step, down=True)
        return decode_auto(body, payload.n)

    def decode_down_on(
        self, payload: Payload, ctx: CodecContext, device: torch.device
    ) -> torch.Tensor:
        """:meth:`decode_down` onto a torch ``device``.

        The default parses the lossless broadcast on the device; a subclass that overrides
        :meth:`decode_down` alone gets its host decode, copied there once.
        """
        import torch

        if type(self).decode_down is not ServerCodec.decode_down:
            return torch.from_numpy(np.ascontiguousarray(self.decode_down(payload, ctx))).to(device)
        from psml_core.codecs import torch_wire as tw

        body = tw.unseal_to(payload.buffer, payload.codec, payload.n, ctx.step, device, down=True)
        return tw.densify(payload.n, *tw.decode_sparse(body, payload.n))

    def shared(self) -> tuple[dict[str, Any], int]:
        """State the server publishes for the next step, and its size in bytes per worker.

        Returns:
            ``(extra, nbytes)``: merged into the next step's ``CodecContext.extra`` on every
            worker; ``nbytes`` is counted as down-direction traffic to each worker.
        """
        return {}, 0


CODECS: Registry[type[Codec]] = Registry("codec", key="codec")
