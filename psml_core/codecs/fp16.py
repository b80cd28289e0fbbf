"""The fp16 codec: IEEE 754 half precision, both directions."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from psml_core.codecs.base import (
    CODECS,
    Codec,
    CodecContext,
    Payload,
    ServerCodec,
    check_vector,
    is_tensor,
)
from psml_core.codecs.host_buffers import frozen

if TYPE_CHECKING:
    import torch

__all__ = ["FP16_MAX", "FP16Codec", "FP16Server"]

FP16_MAX = 65504.0
"""Largest finite half-precision value; larger magnitudes saturate to it."""

_F16 = np.dtype("<f2")


def _to_half_bytes(x: np.ndarray) -> bytes | memoryview:
    """``x`` (finite float32) as little-endian fp16 bytes, saturating at +-65504.

    torch converts (round to nearest even, like numpy) about 5x faster than numpy's ``astype``;
    the output is a calloc'd numpy array because fresh torch tensors page-fault more slowly,
    and the payload keeps it (read-only) rather than a copy of it.
    """
    if x.size == 0:
        return b""
    import torch  # lazily: ~3 s to import, and only this codec needs it

    with warnings.catch_warnings():  # a read-only input is only read
        warnings.simplefilter("ignore", UserWarning)
        t = torch.from_numpy(x)
    lo, hi = torch.aminmax(t)
    if float(lo) < -FP16_MAX or float(hi) > FP16_MAX:
        t = t.clamp(-FP16_MAX, FP16_MAX)
    out = np.zeros(x.size, dtype=_F16)
    torch.from_numpy(out).copy_(t)
    return frozen(out.view(np.uint8))


def _from_half_bytes(buf: bytes, n: int, what: str) -> np.ndarray:
    """Inverse of :func:`_to_half_bytes`: float32; a bad length or inf/NaN is a ValueError."""
    if len(buf) != 2 * n:
        raise ValueError(f"codec {what!r}: payload of {len(buf)} bytes cannot hold {n} fp16 values")
    if n == 0:
        return np.zeros(0, dtype=np.float32)
    import torch

    with warnings.catch_warnings():  # the buffer is only read
        warnings.simplefilter("ignore", UserWarning)
        h = torch.frombuffer(buf, dtype=torch.float16)
    lo, hi = torch.aminmax(h)  # NaN propagates; inf shows up as an extreme
    if not (torch.isfinite(lo) and torch.isfinite(hi)):
        raise ValueError(f"codec {what!r}: payload holds inf or NaN, which this codec never sends")
    out = np.zeros(n, dtype=np.float32)
    torch.from_numpy(out).copy_(h)
    return out


@CODECS.register("fp16")
class FP16Codec(Codec):
    """IEEE 754 half precision (GRACE ``fp16``; Micikevicius et al. 2018 mixed precision).

    Algorithm: round each float32 value to the nearest fp16 (ties to even; magnitudes below
    2**-24 round to (signed) zero, those below 2**-14 become subnormals). Values beyond the fp16
    range **saturate** to +-65504 instead of becoming +-inf: an inf would poison the aggregate and
    every decoder here rejects it, whereas a clipped gradient is still a usable one (as in a
    clipped-gradient update). Relative rounding error is at most 2**-11 inside the normal range.

    Wire format: ``n`` little-endian IEEE binary16 values; ``wire_bytes = 2n`` exactly. The decoder
    rejects any other length and any inf or NaN pattern (the encoder never writes one).

    Server side (:class:`FP16Server`): the server sums the pushes in float32 and broadcasts the sum
    in the same fp16 format (``2n`` bytes down, saturating at +-65504), as an fp16 all-reduce
    does; no server residual.

    Tuning: safe for gradients whose magnitudes lie within about [6e-5, 6e4]; scale the loss (as
    in mixed-precision training) when many gradient entries are smaller. With error feedback the
    rounding error is carried to the next step.
    """

    movable = True

    def encode(self, x: np.ndarray, ctx: CodecContext) -> Payload:
        """Round ``x`` to fp16, saturating at +-65504 (a tensor on its own device)."""
        if is_tensor(x):
            from psml_core.codecs.quant_torch import encode_fp16

            return encode_fp16(self, x, ctx)
        x = check_vector(x)
        return Payload(self.name, int(x.size), _to_half_bytes(x))

    def decode(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """Widen to float32; a length other than ``2n`` or an inf/NaN value is rejected."""
        return _from_half_bytes(payload.buffer, payload.n, "fp16")

    def decode_on(self, payload: Payload, ctx: CodecContext, device: torch.device) -> torch.Tensor:
        """:meth:`decode` onto a torch ``device``, widened there."""
        from psml_core.codecs.quant_torch import decode_fp16

        return decode_fp16(payload, device)

    def server(self) -> ServerCodec:
        """A server that broadcasts the aggregate in fp16 as well."""
        return FP16Server(self)


class FP16Server(ServerCodec):
    """fp16 server: sum the pushes in float32, broadcast the sum as fp16 (``2n`` bytes).

    Args:
        codec: The worker-side codec.
    """

    def encode_down(self, agg: np.ndarray, ctx: CodecContext) -> Payload:
        """The aggregate rounded to fp16 (saturating); a tensor on its device."""
        if is_tensor(agg):
            from psml_core.codecs import quant_torch as qt
            from psml_core.codecs.torch_wire import checked_range

            t, lo, hi = checked_range(agg)  # type: ignore[arg-type]
            return Payload(f"{self.codec.name}/down", int(t.numel()), qt.half_bytes(t, lo, hi))
        agg = check_vector(agg)
        return Payload(f"{self.codec.name}/down", int(agg.size), _to_half_bytes(agg))

    def decode_down(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """Widen the broadcast to float32 (``2n`` bytes, finite values only)."""
        return _from_half_bytes(payload.buffer, payload.n, "fp16/down")

    def decode_down_on(
        self, payload: Payload, ctx: CodecContext, device: torch.device
    ) -> torch.Tensor:
        """:meth:`decode_down` onto a torch ``device``."""
        from psml_core.codecs.quant_torch import decode_fp16

        return decode_fp16(payload, device, "fp16/down")
