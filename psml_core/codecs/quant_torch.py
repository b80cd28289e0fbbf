"""The fixed-rate codecs' torch paths: dense fp32 (``none``), fp16 and QSGD on the device.

Same bytes as the NumPy paths for the same input and context. QSGD's norm is summed in the
fixed order of :mod:`.reduce` on the device; its rounding uniforms come from the host
generator (:func:`~psml_core.codecs.qsgd_wire.qsgd_uniforms`, NumPy's SFC64), copied to the device
once per encode: SFC64 is sequential, so a device generator would draw other numbers, and the
bytes must not depend on where the codec ran. On a GPU that host draw is most of QSGD's encode.
"""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from psml_core.codecs.base import CodecContext, Payload
from psml_core.codecs.host_buffers import frozen, host_array
from psml_core.codecs.qsgd_wire import pack_codes, qsgd_uniforms
from psml_core.codecs.torch_select import tree_sum
from psml_core.codecs.torch_wire import (
    as_bytes,
    check_finite,
    check_tensor,
    checked_range,
    extremes,
    to_device,
    to_host,
)

__all__ = [
    "NamedCodec",
    "QSGDParams",
    "decode_dense",
    "decode_fp16",
    "decode_qsgd",
    "encode_dense",
    "encode_fp16",
    "encode_qsgd",
]

_FP16_MAX = 65504.0


@runtime_checkable
class NamedCodec(Protocol):
    """What the dense and fp16 torch halves read of their codec: the name on the payload."""

    @property
    def name(self) -> str:
        """The codec's name, as the payload carries it."""


@runtime_checkable
class QSGDParams(Protocol):
    """What QSGD's torch half reads of :class:`~psml_core.codecs.qsgd.QSGDCodec`."""

    @property
    def name(self) -> str:
        """The codec's name, as the payload carries it."""

    @property
    def bits(self) -> int:
        """Bits per code on the wire."""

    @property
    def levels(self) -> int:
        """Quantisation levels."""

    @property
    def stream(self) -> int:
        """The random stream of this worker's uniforms."""

    def decode(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """The host decoder."""


def encode_dense(codec: NamedCodec, x: torch.Tensor, ctx: CodecContext) -> Payload:
    """``none``: the float32 bytes, copied to the host once."""
    x = check_tensor(x)
    return Payload(codec.name, int(x.numel()), to_host(as_bytes(x)))


def decode_dense(payload: Payload, device: torch.device, what: str = "none") -> torch.Tensor:
    """``none``'s decoder onto ``device``: ``4n`` bytes, finite values only (one copy)."""
    n = payload.n
    if len(payload.buffer) != 4 * n:
        raise ValueError(
            f"codec {what!r}: payload of {len(payload.buffer)} bytes; {n} float32 take {4 * n}"
        )
    out = torch.empty(n, dtype=torch.float32, device=device)
    if n:
        out.view(torch.uint8).copy_(to_device(payload.buffer, torch.device("cpu")))
        if not all(math.isfinite(e) for e in extremes(out)):
            i = int(torch.nonzero(~torch.isfinite(out))[0, 0])
            raise ValueError(
                f"codec {what!r}: value {float(out[i])!r} at index {i} is not finite; the "
                "encoder never sends one"
            )
    return out


def half_bytes(x: torch.Tensor, lo: float | None = None, hi: float | None = None) -> memoryview:
    """A finite float32 tensor as fp16 bytes, saturating at +-65504 (round to nearest even).

    Rounded where ``x`` is; on the CPU straight into the payload's host memory, so the
    conversion is the copy. A value rounds to an infinity only beyond the fp16 range, where
    it saturates instead (as clamping first would give); ``lo`` and ``hi``, ``x``'s extremes
    when known, spare that pass when every value is within the range.
    """
    n = int(x.numel())
    if n == 0:
        return memoryview(b"")
    wide = lo is None or hi is None or lo < -_FP16_MAX or hi > _FP16_MAX
    if x.device.type == "cpu":
        out = host_array(2 * n, x.device)
        h = torch.from_numpy(out).view(torch.float16)
        h.copy_(x)
    else:
        out, h = None, x.to(torch.float16)
    if wide:
        torch.nan_to_num_(h, posinf=_FP16_MAX, neginf=-_FP16_MAX)
    return frozen(out) if out is not None else to_host(as_bytes(h))


def encode_fp16(codec: NamedCodec, x: torch.Tensor, ctx: CodecContext) -> Payload:
    """``fp16`` on the device."""
    x, lo, hi = checked_range(x)
    return Payload(codec.name, int(x.numel()), half_bytes(x, lo, hi))


def decode_fp16(payload: Payload, device: torch.device, what: str = "fp16") -> torch.Tensor:
    """fp16's decoder (push or broadcast) onto ``device``: checked where it lands, then widened."""
    n = payload.n
    if len(payload.buffer) != 2 * n:
        size = len(payload.buffer)
        raise ValueError(f"codec {what!r}: payload of {size} bytes cannot hold {n} fp16 values")
    if n == 0:
        return torch.zeros(0, dtype=torch.float32, device=device)
    raw = to_device(payload.buffer, device)
    h = (raw.clone() if raw.data_ptr() % 2 else raw).view(torch.float16)  # read, then widened
    check_finite(h, f"codec {what!r}: payload holds inf or NaN, which this codec never sends")
    return h.to(torch.float32)


def _norm(x: torch.Tensor) -> np.float32:
    sq = x.to(torch.float64)
    norm = float(torch.sqrt(tree_sum(sq.mul_(sq))))
    with np.errstate(over="ignore"):
        norm32 = np.float32(norm)
    if not np.isfinite(norm32):
        raise ValueError(f"qsgd: the vector's L2 norm {norm:.3e} exceeds float32 range")
    return norm32


def _uniforms(codec: QSGDParams, n: int, ctx: CodecContext, device: torch.device) -> torch.Tensor:
    """The step's rounding uniforms on ``device``, copied there once (none on the CPU).

    Drawn into reused host memory: pinned for a GPU, so the copy runs at the link's speed.
    """
    host = host_array(4 * n, device).view(np.float32)
    qsgd_uniforms(n, ctx.seed, ctx.step, codec.stream, out=host)
    return torch.from_numpy(host).to(device)


def encode_qsgd(codec: QSGDParams, x: torch.Tensor, ctx: CodecContext) -> Payload:
    """:meth:`QSGDCodec.encode <psml_core.codecs.qsgd.QSGDCodec.encode>` on ``x``'s device."""
    x = check_tensor(x)
    n = int(x.numel())
    norm = _norm(x)
    wide = torch.int8 if codec.bits <= 8 else torch.int16
    if norm == 0:
        q = torch.zeros(n, dtype=wide, device=x.device)
    else:
        # A divisor on the device: CUDA divides by a host scalar as a multiplication by its
        # reciprocal, which can differ from the division in the last bit. In place: the same
        # operations in the same order, without a fresh vector for each.
        t = torch.abs(x).div_(torch.tensor(float(norm), dtype=torch.float32, device=x.device))
        t.mul_(float(np.float32(codec.levels)))
        t.add_(_uniforms(codec, n, ctx, x.device))
        level = t.to(torch.int32).clamp_(max=codec.levels)  # floor: t + u >= 0
        q = torch.where(x < 0, -level, level).to(wide)
    head = np.array([norm], dtype="<f4").tobytes()
    if codec.bits in (8, 16):
        return Payload(codec.name, n, to_host(as_bytes(q), head=head))
    codes = q.cpu().numpy().view(np.uint16 if codec.bits > 8 else np.uint8)
    body = pack_codes(codes & ((1 << codec.bits) - 1), codec.bits)
    return Payload(codec.name, n, head + body)


def decode_qsgd(
    codec: QSGDParams, payload: Payload, ctx: CodecContext, device: torch.device
) -> torch.Tensor:
    """QSGD's decoder onto ``device``: the host decoder, then one copy to the device.

    The host decoder makes the checks and the dequantisation in one pass over the codes.
    """
    return torch.from_numpy(codec.decode(payload, ctx)).to(device)
