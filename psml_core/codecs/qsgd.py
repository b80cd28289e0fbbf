"""QSGD: stochastic quantisation of each element to one of ``s`` levels of the vector's norm."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from psml_core.codecs.base import CODECS, Codec, CodecContext, Payload, check_vector, is_tensor
from psml_core.codecs.qsgd_wire import (
    MAX_LEVELS,
    QSGD_STREAM_TAG,
    pack_codes,
    qsgd_bits,
    qsgd_uniforms,
    qsgd_wire_bytes,
    unpack_codes,
)
from psml_core.codecs.reduce import tree_sum

if TYPE_CHECKING:
    import torch

_F32 = np.dtype("<f4")

__all__ = [
    "QSGD_STREAM_TAG",
    "QSGDCodec",
    "pack_codes",
    "qsgd_bits",
    "qsgd_uniforms",
    "qsgd_wire_bytes",
    "unpack_codes",
]


@CODECS.register("qsgd")
class QSGDCodec(Codec):
    """QSGD: the vector's L2 norm plus a stochastically rounded level and a sign per element.

    Source: Alistarh, Grubic, Li, Tomioka, Vojnovic, "QSGD: Communication-Efficient SGD via
    Gradient Quantization and Encoding", NeurIPS 2017 (without the Elias coding of the paper's
    Section 3.2); the GRACE ``qsgd`` compressor (sands-lab/grace), which uses 127 levels and an
    int8 per element, is the default.

    Algorithm, with ``s = levels``::

        norm   = float32(||x||_2)
        t_i    = float32(float32(|x_i| / norm) * s)          # in [0, s]
        level  = min(s, floor(float32(t_i + u_i)))           # u_i ~ U[0, 1), see below
        q_i    = sign(x_i) * level                            # an integer in [-s, s]
        decode = float32(q_i) * float32(norm / s)

    so ``E[decode] = x`` (unbiased, to float32 resolution of ``t_i + u_i``) and
    ``E||Q(x) - x||^2 <= min(n / s^2, sqrt(n) / s) ||x||^2`` (the paper's Lemma 3.1). A zero
    norm (an all-zero vector) sends all-zero levels. The squares are summed in float64 in a
    fixed order (:mod:`~psml_core.codecs.reduce`), so the norm is the same float32 whatever
    the thread count, BLAS or device (no overflow or underflow of the squares); a norm beyond
    float32 range is a ValueError.

    Randomness: ``u`` is :func:`qsgd_uniforms` of ``(ctx.seed, ctx.step, stream)``. The engine
    must give each worker its own ``stream`` (e.g. the worker rank): workers that share a
    stream round with the same draws, so their rounding errors are correlated and do not average
    out in the aggregate. Only the encoder draws; the decoder needs no randomness. The same
    (seed, step, stream) and input give the same bytes.

    Wire format (no header): the norm as one little-endian float32, then the ``n`` codes
    ``q_i`` as ``b``-bit two's complement, ``b = 1 + ceil(log2(s + 1))``, bit-packed
    little-endian across the buffer (:func:`pack_codes`). ``wire_bytes = 4 + ceil(n * b / 8)``;
    for the default ``s = 127`` (b = 8: one int8 per element) that is ``4 + n``; ``s = 32767``
    gives int16 (``4 + 2n``). The decoder rejects a buffer of another length, a negative or
    non-finite norm, codes outside ``[-s, s]``, set padding bits, and non-zero codes under a
    zero norm.

    Server side: the default — the sum of the decoded pushes, broadcast losslessly in the
    cheapest sparse format (dense for dense gradients: ``4n + 4`` bytes down, with the
    CRC-32C trailer).

    ``ctx.ratio`` is ignored: QSGD is a fixed-rate quantiser, its rate set by ``levels``.

    Tuning: fewer levels cost fewer bits per element but raise the variance (bound above);
    GRACE's 127 (8 bits/element, 4x below fp32) is nearly lossless for training; 15 (5 bits)
    and 7 (4 bits) are common aggressive choices; 1 (2 bits) is TernGrad-like. The estimator is
    unbiased, so it needs no residual; ``error_feedback: true`` is allowed (the residual then
    holds the rounding error, below ``norm / s`` per element). The encoder draws one float32
    uniform per element (the RNG is most of its time); decoding is one pass.

    Args:
        levels: Quantisation levels ``s`` per sign, 1..32767 (default 127).
        stream: Index of this codec instance's random stream, >= 0 (default 0); give each worker
            a different one.
    """

    movable = True

    def __init__(self, levels: int = 127, stream: int = 0) -> None:
        if isinstance(levels, bool) or not isinstance(levels, int | np.integer):
            raise ValueError(f"qsgd: levels must be an integer in [1, {MAX_LEVELS}], got {levels}")
        if not 1 <= levels <= MAX_LEVELS:
            raise ValueError(f"qsgd: levels must be in [1, {MAX_LEVELS}], got {levels}")
        if isinstance(stream, bool) or not isinstance(stream, int | np.integer) or stream < 0:
            raise ValueError(f"qsgd: stream must be an integer >= 0, got {stream!r}")
        self.levels = int(levels)
        self.stream = int(stream)
        self.bits = qsgd_bits(self.levels)
        small = self.bits <= 8  # levels and signed codes fit 8 bits, else 16
        self._uint = np.dtype(np.uint8 if small else np.uint16)
        self._sint = np.dtype(np.int8 if small else np.int16)

    def for_worker(self, rank: int) -> None:
        """Use the worker's rank as the random stream, so workers round independently."""
        self.stream = int(rank)

    def wire_bytes(self, n: int) -> int:
        """Exact encoded size of an ``n``-vector: ``4 + ceil(n * b / 8)``."""
        return qsgd_wire_bytes(n, self.levels)

    @staticmethod
    def _norm(x: np.ndarray) -> np.float32:
        """``float32(sqrt(sum x_i^2))``, the exact float64 squares summed in a fixed order.

        The order (:func:`~psml_core.codecs.reduce.tree_sum`) is the torch path's too, so the
        norm in the wire bytes is the same bits on both.
        """
        x64 = x.astype(np.float64)
        norm = np.sqrt(tree_sum(x64 * x64))
        with np.errstate(over="ignore"):
            norm32 = np.float32(norm)
        if not np.isfinite(norm32):
            raise ValueError(f"qsgd: the vector's L2 norm {norm:.3e} exceeds float32 range")
        return norm32

    def encode(self, x: np.ndarray, ctx: CodecContext) -> Payload:
        """Quantise ``x`` (see the class docstring); a tensor on its device, to the same bytes."""
        if is_tensor(x):
            from psml_core.codecs.quant_torch import encode_qsgd

            return encode_qsgd(self, x, ctx)
        x = check_vector(x)
        n = int(x.size)
        norm = self._norm(x)
        if norm == 0:
            q = np.zeros(n, dtype=self._sint)
        else:
            t = np.abs(x)
            np.divide(t, norm, out=t)
            np.multiply(t, np.float32(self.levels), out=t)
            t += qsgd_uniforms(n, ctx.seed, ctx.step, self.stream)
            level = t.astype(self._uint)  # truncation is floor: t >= 0
            np.minimum(level, self.levels, out=level)
            q = level.view(self._sint)
            neg = (x < 0).view(np.int8)  # 1 where negative ...
            np.negative(neg, out=neg)  # ... now -1 (all bits set): q = (q ^ -1) + 1 = -q
            np.bitwise_xor(q, neg, out=q)
            np.subtract(q, neg, out=q)
        if self.bits in (8, 16):
            body = q.astype(self._sint.newbyteorder("<"), copy=False).tobytes()
        else:
            body = pack_codes(q.view(self._uint) & ((1 << self.bits) - 1), self.bits)
        return Payload(self.name, n, np.array([norm], dtype=_F32).tobytes() + body)

    def decode(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """Dequantise: ``float32(q_i) * float32(norm / s)``; invalid buffers raise ValueError."""
        n, buf, s = payload.n, payload.buffer, self.levels
        expect = self.wire_bytes(n)
        if len(buf) != expect:
            raise ValueError(
                f"codec {self.name!r}: payload of {len(buf)} bytes cannot encode {n} elements at "
                f"{s} levels (expected {expect} = 4 + ceil({n} * {self.bits} / 8))"
            )
        (norm,) = np.frombuffer(buf, dtype=_F32, count=1)
        if not np.isfinite(norm) or np.signbit(norm):
            raise ValueError(f"codec {self.name!r}: payload has an invalid norm {norm!r}")
        if self.bits in (8, 16):
            q = np.frombuffer(buf, dtype=self._sint.newbyteorder("<"), offset=4)
        else:  # sign-extend b-bit two's complement: (c ^ 2**(b-1)) - 2**(b-1)
            q = unpack_codes(memoryview(buf)[4:], n, self.bits, self.name).view(np.int16)
            half = np.int16(1 << (self.bits - 1))
            np.bitwise_xor(q, half, out=q)
            np.subtract(q, half, out=q)
        if s == 127 and isinstance(buf, bytes | bytearray):  # int8: only 0x80 (-128) is invalid
            bad = buf.find(b"\x80", 4) >= 0
        else:
            top = s < (1 << (self.bits - 1)) - 1  # can a code above s be written at all?
            bad = n > 0 and (int(q.min()) < -s or (top and int(q.max()) > s))
        if bad:
            raise ValueError(f"codec {self.name!r}: payload has a level outside [-{s}, {s}]")
        if norm == 0 and q.any():
            raise ValueError(f"codec {self.name!r}: payload has non-zero levels under a zero norm")
        step = np.float32(np.float64(norm) / s)
        return np.multiply(q, step, dtype=np.float32)

    def decode_on(self, payload: Payload, ctx: CodecContext, device: torch.device) -> torch.Tensor:
        """:meth:`decode` onto a torch ``device`` (decoded on the host, copied once)."""
        from psml_core.codecs.quant_torch import decode_qsgd

        return decode_qsgd(self, payload, ctx, device)
