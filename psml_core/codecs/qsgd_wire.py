"""QSGD's wire helpers: bits per level count, exact sizes, the rounding draws, bit packing.

Shared by the codec (:mod:`.qsgd`) and its torch path (:mod:`.quant_torch`).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "MAX_LEVELS",
    "QSGD_STREAM_TAG",
    "pack_codes",
    "qsgd_bits",
    "qsgd_uniforms",
    "qsgd_wire_bytes",
    "unpack_codes",
]

QSGD_STREAM_TAG = 0x51534744
"""Domain-separation word ("QSGD") appended to the seed so no other codec shares the stream."""

_U64 = np.dtype("<u8")
MAX_LEVELS = 32767


def qsgd_bits(levels: int) -> int:
    """Bits per element for ``levels`` levels: ``b = 1 + ceil(log2(levels + 1))``.

    One bit of sign and the fewest whole bits that hold ``0..levels``; the (sign, level) pair is
    stored as the ``b``-bit two's complement of ``sign * level``, which fits since
    ``levels <= 2**(b-1) - 1``. ``levels=127`` gives 8 bits, ``levels=32767`` gives 16.
    """
    return 1 + int(levels).bit_length()


def qsgd_wire_bytes(n: int, levels: int = 127) -> int:
    """Exact wire size of an ``n``-vector: ``4 + ceil(n * b / 8)`` (``4 + n`` for 127 levels)."""
    return 4 + (n * qsgd_bits(levels) + 7) // 8


def qsgd_uniforms(
    n: int, seed: int, step: int, stream: int, out: np.ndarray | None = None
) -> np.ndarray:
    """The ``n`` float32 uniforms in [0, 1) that round an ``n``-vector at (seed, step, stream).

    ``np.random.Generator(np.random.SFC64(np.random.SeedSequence([seed, step, stream,
    QSGD_STREAM_TAG]))).random(n, dtype=np.float32)``: multiples of 2**-24. Only the encoder
    draws them; they are public so that tests can reproduce the rounding exactly. ``out``: a
    float32 array of ``n`` to draw them into (the same numbers), returned.

    Raises:
        ValueError: if ``seed``, ``step`` or ``stream`` is negative.
    """
    for what, v in (("ctx.seed", seed), ("ctx.step", step), ("stream", stream)):
        if int(v) < 0:
            raise ValueError(f"qsgd: {what} must be a non-negative integer, got {v}")
    ss = np.random.SeedSequence([int(seed), int(step), int(stream), QSGD_STREAM_TAG])
    gen = np.random.Generator(np.random.SFC64(ss))
    if out is None:
        return gen.random(n, dtype=np.float32)
    return gen.random(dtype=np.float32, out=out[:n])


def _join(a: np.ndarray, width: int, dtype: type[np.unsignedinteger]) -> np.ndarray:
    """Pairs ``(a[2i], a[2i+1])`` of ``width``-bit fields as ``a[2i] | a[2i+1] << width``."""
    p = a.reshape(-1, 2)
    out = p[:, 1].astype(dtype)
    out <<= width
    out |= p[:, 0]
    return out


def _split(a: np.ndarray, width: int, dtype: type[np.unsignedinteger]) -> np.ndarray:
    """Inverse of :func:`_join`: each ``a[i]`` into its low and high ``width``-bit fields."""
    out = np.empty((a.size, 2), dtype=dtype)
    np.bitwise_and(a, (1 << width) - 1, out=out[:, 0], casting="unsafe")
    np.right_shift(a, width, out=out[:, 1], casting="unsafe")
    return out.reshape(-1)


def pack_codes(codes: np.ndarray, bits: int) -> bytes:
    """Bit-pack unsigned ``bits``-bit codes (2 <= bits <= 16), little-endian across the buffer.

    Element ``i`` occupies bits ``[i*bits, (i+1)*bits)`` of the stream, least significant bit
    first; stream bit ``j`` is bit ``j % 8`` of byte ``j // 8``. The ``ceil(n*bits/8)`` bytes end
    with zero padding bits. Eight codes fill exactly ``bits`` bytes: codes are joined pairwise
    into 2-, 4- and 8-code words (vectorised; no loop over elements), and each 8-code word
    (one uint64, or two for ``bits > 8``) gives its first ``bits`` little-endian bytes.
    """
    n = int(codes.size)
    nbytes = (n * bits + 7) // 8
    groups = -(-n // 8)
    c = np.zeros(groups * 8, dtype=np.uint16)
    c[:n] = codes
    if bits <= 8:
        quads = _join(_join(c, bits, np.uint16), 2 * bits, np.uint32)
        words = _join(quads, 4 * bits, np.uint64).astype(_U64, copy=False).reshape(groups, 1)
    else:
        quads = _join(_join(c, bits, np.uint32), 2 * bits, np.uint64).reshape(groups, 2)
        words = np.empty((groups, 2), dtype=_U64)
        words[:, 0] = quads[:, 0] | (quads[:, 1] << np.uint64(4 * bits))
        words[:, 1] = quads[:, 1] >> np.uint64(64 - 4 * bits)
    return words.view(np.uint8)[:, :bits].tobytes()[:nbytes]


def unpack_codes(buf: bytes | memoryview, n: int, bits: int, codec: str = "qsgd") -> np.ndarray:
    """Inverse of :func:`pack_codes`: ``n`` unsigned codes as uint16 (``codec``: for the error).

    Raises:
        ValueError: for a buffer that is not ``ceil(n*bits/8)`` bytes or has padding bits set.
    """
    nbytes = (n * bits + 7) // 8
    if len(buf) != nbytes:
        raise ValueError(
            f"codec {codec!r}: {len(buf)} bytes cannot hold {n} codes of {bits} bits ({nbytes} B)"
        )
    raw = np.frombuffer(buf, dtype=np.uint8)
    tail = (n * bits) % 8
    if tail and raw[-1] >> tail:
        raise ValueError(
            f"codec {codec!r}: packed codes have padding bits set past the last of {n} elements"
        )
    groups = -(-n // 8)
    padded = np.zeros(groups * bits, dtype=np.uint8)
    padded[:nbytes] = raw
    width = 8 if bits <= 8 else 16
    rows = np.zeros((groups, width), dtype=np.uint8)
    rows[:, :bits] = padded.reshape(groups, bits)
    words = rows.view(_U64)
    if bits <= 8:
        quads = _split(words.reshape(-1), 4 * bits, np.uint32)
        pairs = _split(quads, 2 * bits, np.uint16)
    else:
        lo, hi = words[:, 0], words[:, 1]
        quads = np.empty((groups, 2), dtype=np.uint64)
        mask = np.uint64((1 << (4 * bits)) - 1)
        np.bitwise_and(lo, mask, out=quads[:, 0])
        quads[:, 1] = ((lo >> np.uint64(4 * bits)) | (hi << np.uint64(64 - 4 * bits))) & mask
        pairs = _split(quads.reshape(-1), 2 * bits, np.uint32)
    return _split(pairs, bits, np.uint16)[:n]
