"""Payloads that cannot decode silently wrong: a CRC-32C trailer on every variable-length format.

A variable-length format (sparse COO or bitmap, block records, key/value entries, a value
filter's survivors) tells its entry count from its length, so a buffer cut or extended by a
whole entry, or an empty one, would otherwise decode as a different, valid message. Such a
payload ends in a 4-byte little-endian CRC-32C (the Castagnoli polynomial, reflected
0x82F63B78, as iSCSI, ext4 and SSE4.2's ``crc32`` instruction compute it) of everything before
it, counted in its exact wire bytes (:data:`CHECKSUM_BYTES`). Its decoder checks the trailer
before it parses anything: truncation, extension, an empty buffer and any flipped byte (a
degree-32 CRC catches every burst of up to 32 bits) are refused with an error naming the codec.

**Why CRC-32C.** Chosen by measurement (``benchmarks/bench_integrity.py``): the host computes
it with the CPU's CRC instruction (``google-crc32c``) at over 10 GB/s per core, where zlib's
CRC-32 (the IEEE polynomial, the trailer until issue 46) runs at 1.4 to 4; the device computes
the same value bit for bit (:mod:`.torch_crc`). Every guarantee below holds for any CRC whose
polynomial has degree 32 and a non-zero constant term, which both are.

The CRC starts from :data:`CRC_SEED`, not from the customary 0. With 0, the CRC of an empty
body is 0, so any payload that begins with four zero bytes (a first key or index 0) and is cut
to 4 bytes would read as a valid empty message. Seeded, an empty body's trailer is the seed
itself, which a cut payload matches only by a 2^-32 coincidence, as for any other damage.

**Bound to the step and the element count.** A codec seals with the seed of its message
(:func:`crc_seed`: the CRC-32C, started from :data:`CRC_SEED`, of the direction's tag, the step
and the element count ``n`` the payload encodes, :func:`counted`), which both ends know (the
step from the :class:`~psml_core.codecs.base.CodecContext`, ``n`` from ``Payload.n``, sent out
of band) and which is never sent. A payload replayed from another step (a stale push delivered
late, a broadcast of the previous round) therefore fails its trailer at no extra byte: for
steps that differ modulo 2**32 the two seeds always differ (the step fills one 32-bit field of
the seeded message, and a degree-32 CRC tells apart any two messages of one length that differ
within 32 bits), and
the CRC of one body under two seeds always differs (the seed enters the register through an
invertible map). Pushes and broadcasts use different tags, so a push replayed as a broadcast of
the same step is refused too. A payload decoded with another element count than it was sealed
for (``n - 1``, ``n + 1``, any other) is refused the same way, except by a 2^-32 coincidence
(the count is a uint64 field; two counts give two seeds that differ except by such a
coincidence), before the parser could read it as a shorter or longer vector. ``step=None`` is
the seal not bound to a step: the touched pull's key list and answer use it, because the dist
backend's worker rebuilds that answer without its context (it checks that the answer names
exactly the keys it asked for); it still binds ``n`` (the seeded message is the bound values
alone, so with nothing bound the seed is :data:`CRC_SEED` itself).

Fixed-length formats carry no trailer: both ends know their exact length (``4n`` for ``none``,
``2n`` for ``fp16``, ``ceil(n/8)`` for the sign codecs, plus 4 for ``efsignsgd``'s scale,
``4 + ceil(n b / 8)`` for QSGD's ``b``-bit codes), their decoders refuse any other length, and
every bit pattern of the right length is a message the codec could have sent (non-finite
values and set padding bits aside, which they refuse); a replay of one is a stale but
meaningful vector. A wrong element count is refused whenever it changes the byte size
(``none``, ``fp16`` and 8- or 16-bit QSGD: always). Where codes are bit-packed (the sign
codecs; QSGD at other widths) a count within the same bytes is refused only if a bit that the
wrong count makes padding is set (the encoders zero the padding, the decoders refuse it set):
a shorter count whose dropped codes are all zero bits (a sign codec's last element negative)
or a longer count whose extra codes fit in the padding (they read its zero bits) decodes as a
vector of that count, since those bytes are exactly what the encoder sends for one; no check
can tell them apart without sending the count. Random-k is the exception: its
``4k`` values are placed at indices that the decoder regenerates from the step, the shared
seed and the element count, so a payload replayed from another step, or decoded with another
seed or count, would land on the wrong indices. It is sealed like the variable-length formats
(``4k + 4`` bytes), and its trailer binds the seed too (``bind=(seed,)``, after ``n``):
decoded with another seed or count, it is refused (for two distinct bindings the seeds differ
except by a 2^-32 coincidence).
"""

from __future__ import annotations

import struct

import google_crc32c
import numpy as np

__all__ = [
    "CHECKSUM_BYTES",
    "CRC_SEED",
    "checksum",
    "counted",
    "crc32c",
    "crc_seed",
    "seal",
    "unseal",
]

CHECKSUM_BYTES = 4
"""Bytes of the CRC-32C trailer on a variable-length payload."""
CRC_SEED = 0x9E3779B9
"""Starting value of the CRC (``crc32c(body, CRC_SEED)``), so an empty body's is not 0."""

_CRC = struct.Struct("<I")
_STEP = struct.Struct("<4sI")  # the seeded message: direction tag, step modulo 2**32
_TAGS = (b"push", b"down")


def crc32c(data: bytes | bytearray | memoryview | np.ndarray, value: int = 0) -> int:
    """The CRC-32C of ``data`` continued from the CRC ``value`` (0: a fresh one).

    As ``zlib.crc32(data, value)`` is for CRC-32: ``crc32c(a + b) == crc32c(b, crc32c(a))``.
    Computed with the CPU's CRC instruction where it has one (``google-crc32c``), on the
    caller's bytes in place (a memoryview or array is read through a NumPy view, not copied).
    """
    if not isinstance(data, bytes):  # google-crc32c reads bytes and arrays, not memoryviews
        data = np.frombuffer(data, dtype=np.uint8) if len(data) else b""
    return google_crc32c.extend(value, data)


def crc_seed(step: int | None = None, down: bool = False, bind: tuple[int, ...] = ()) -> int:
    """The CRC's starting value for a message of ``step`` (None: not bound to a step).

    ``crc32c(tag + uint32_le(step mod 2**32) + uint64_le(b mod 2**64) for b in bind,
    CRC_SEED)``, the tag ``b"push"`` for what a worker sends and ``b"down"`` for what a server
    sends (``down``). Distinct steps modulo 2**32 give distinct seeds. ``bind`` adds more
    values both ends know: a seal binds :func:`counted` (the element count, then random-k's
    index seed). ``step`` None: ``crc32c(uint64_le(b) for b in bind, CRC_SEED)``, no tag
    and no step (:data:`CRC_SEED` itself when nothing is bound).
    """
    words = struct.pack(f"<{len(bind)}Q", *(int(b) & 0xFFFFFFFFFFFFFFFF for b in bind))
    if step is None:
        return crc32c(words, CRC_SEED)
    return crc32c(_STEP.pack(_TAGS[bool(down)], int(step) & 0xFFFFFFFF) + words, CRC_SEED)


def checksum(
    body: bytes | bytearray | memoryview,
    step: int | None = None,
    down: bool = False,
    bind: tuple[int, ...] = (),
) -> int:
    """The CRC-32C of ``body``, seeded with :func:`crc_seed` of ``step``, direction and ``bind``."""
    return crc32c(body, crc_seed(step, down, bind))


def seal(
    body: bytes | bytearray | memoryview,
    step: int | None = None,
    *,
    n: int,
    down: bool = False,
    bind: tuple[int, ...] = (),
) -> bytes:
    """``body`` followed by its CRC-32C (:data:`CHECKSUM_BYTES` more bytes), bound to ``step``.

    ``n``: the element count the payload encodes, always bound (:func:`counted`), so a receiver
    told another count refuses the payload instead of decoding a vector of the wrong length.
    ``bind``: further values the trailer binds (:func:`crc_seed`); the receiver passes the same.
    """
    return b"".join((body, _CRC.pack(checksum(body, step, down, counted(n, bind)))))


def counted(n: int, bind: tuple[int, ...] = ()) -> tuple[int, ...]:
    """What a sealed trailer binds besides step and direction: the element count, then ``bind``."""
    return (int(n), *bind)


def unseal(
    buf: bytes | bytearray | memoryview,
    codec: str,
    n: int,
    step: int | None = None,
    *,
    down: bool = False,
    bind: tuple[int, ...] = (),
) -> memoryview:
    """The body of a sealed payload, after checking its trailer against ``step`` and ``n``.

    The seed is :func:`crc_seed` of ``step``, ``down`` and :func:`counted` (``n``, then ``bind``).

    Args:
        buf: The payload's bytes as received.
        codec: The codec's name, for the error.
        n: The length of the vector it encodes (``Payload.n``), which the trailer binds.
        step: The step the receiver expects (``CodecContext.step``); None: the seal without
            a step (still bound to ``n``).
        down: Whether it is a server's message (a broadcast or pull answer).
        bind: The further values the sender bound (:func:`crc_seed`), as the receiver knows them.

    Raises:
        ValueError: an empty or short buffer, or a checksum mismatch (a buffer cut, extended
            or changed in transit, or sealed for another step, element count or ``bind``),
            in one line naming the codec and the sizes.
    """
    size = len(buf)
    if size < CHECKSUM_BYTES:
        raise ValueError(
            f"codec {codec!r}: a payload of {size} bytes for {n} elements cannot hold its "
            f"{CHECKSUM_BYTES}-byte checksum (an empty or cut buffer); expected at least "
            f"{CHECKSUM_BYTES} bytes"
        )
    view = memoryview(buf)
    body = view[: size - CHECKSUM_BYTES]
    (sent,) = _CRC.unpack_from(view, size - CHECKSUM_BYTES)
    if checksum(body, step, down, counted(n, bind)) != sent:
        at = "" if step is None else f" of step {step}"
        other = "another step, seed or element count" if bind else "another step or count"
        raise ValueError(
            f"codec {codec!r}: the {size}-byte payload{at} for {n} elements fails its CRC-32C "
            f"(cut, extended or changed in transit, or sealed for {other})"
        )
    return body
