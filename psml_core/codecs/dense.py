"""The dense codec: the uncompressed baseline."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from psml_core.codecs.base import CODECS, Codec, CodecContext, Payload, check_vector, is_tensor

if TYPE_CHECKING:
    import torch

__all__ = ["DenseCodec"]


@CODECS.register("none")
class DenseCodec(Codec):
    """Dense fp32: the vector's little-endian float32 bytes, nothing else.

    Wire format: ``n`` float32 values, little-endian; ``wire_bytes = 4 n`` exactly (our design's
    "dense tensor of n elements: 4n"). The element count is implied by the length. The server
    side broadcasts the aggregate in the cheapest exact sparse format, which for dense gradients
    is dense, plus the 4-byte CRC-32C trailer of a variable-length payload.
    """

    movable = True

    def encode(self, x: np.ndarray, ctx: CodecContext) -> Payload:
        """Encode ``x`` as little-endian float32 (a tensor's bytes copied from its device once)."""
        if is_tensor(x):
            from psml_core.codecs.quant_torch import encode_dense

            return encode_dense(self, x, ctx)
        x = check_vector(x)
        return Payload(self.name, int(x.size), x.astype("<f4", copy=False).tobytes())

    def decode(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """Decode to a float32 vector.

        Header-free: both ends know the length (``4n``), so a cut, extended or empty buffer is
        refused by its length; a value that is not finite (NaN, infinity) is refused too, as
        the encoder never sends one. Any other bit pattern is a value the encoder could send.
        """
        if len(payload.buffer) != 4 * payload.n:
            raise ValueError(
                f"codec 'none': payload of {len(payload.buffer)} bytes; {payload.n} float32 "
                f"take {4 * payload.n}"
            )
        out = np.frombuffer(payload.buffer, dtype="<f4").astype(np.float32)
        finite = np.isfinite(out)
        if not finite.all():
            bad = int(np.flatnonzero(~finite)[0])
            raise ValueError(
                f"codec 'none': value {out[bad]!r} at index {bad} is not finite; the encoder "
                "never sends one"
            )
        return out

    def decode_on(self, payload: Payload, ctx: CodecContext, device: torch.device) -> torch.Tensor:
        """:meth:`decode` onto a torch ``device`` (one copy, checked there)."""
        from psml_core.codecs.quant_torch import decode_dense

        return decode_dense(payload, device)
