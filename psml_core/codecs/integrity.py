"""Payloads that cannot decode silently wrong: a CRC-32 trailer on every variable-length format.

A variable-length format (sparse COO or bitmap, block records, key/value entries, a value
filter's survivors) tells its entry count from its length, so a buffer cut or extended by a
whole entry, or an empty one, would otherwise decode as a different, valid message. Such a
payload ends in a 4-byte little-endian CRC-32 (zlib's, the IEEE polynomial) of everything
before it, counted in its exact wire bytes (:data:`CHECKSUM_BYTES`). Its decoder checks the
trailer before it parses anything: truncation, extension, an empty buffer and any flipped byte
(CRC-32 catches every burst of up to 32 bits) are refused with an error naming the codec.

The CRC starts from :data:`CRC_SEED`, not from zlib's default 0. With 0, the CRC of an empty
body is 0, so any payload that begins with four zero bytes (a first key or index 0) and is cut
to 4 bytes would read as a valid empty message. Seeded, an empty body's trailer is the seed
itself, which a cut payload matches only by a 2^-32 coincidence, as for any other damage.

Fixed-length formats carry no trailer: both ends know their exact length (``4n`` for ``none``,
``2n`` for ``fp16``, ``ceil(n/8)`` for the sign codecs, ``4k`` for random-k, QSGD's packed
codes), their decoders refuse any other length, and every bit pattern of the right length is a
message the codec could have sent (non-finite values aside, which they refuse).
"""

from __future__ import annotations

import struct
import zlib

__all__ = ["CHECKSUM_BYTES", "CRC_SEED", "checksum", "seal", "unseal"]

CHECKSUM_BYTES = 4
"""Bytes of the CRC-32 trailer on a variable-length payload."""
CRC_SEED = 0x9E3779B9
"""Starting value of the CRC (``zlib.crc32(body, CRC_SEED)``), so an empty body's is not 0."""

_CRC = struct.Struct("<I")


def checksum(body: bytes | bytearray | memoryview) -> int:
    """The CRC-32 of ``body``, seeded with :data:`CRC_SEED`."""
    return zlib.crc32(body, CRC_SEED)


def seal(body: bytes | bytearray | memoryview) -> bytes:
    """``body`` followed by its CRC-32 (:data:`CHECKSUM_BYTES` more bytes)."""
    return b"".join((body, _CRC.pack(checksum(body))))


def unseal(buf: bytes | bytearray | memoryview, codec: str, n: int) -> memoryview:
    """The body of a sealed payload, after checking its trailer.

    Args:
        buf: The payload's bytes as received.
        codec: The codec's name, for the error.
        n: The length of the vector it encodes, for the error.

    Raises:
        ValueError: an empty or short buffer, or a checksum mismatch (a buffer cut, extended
            or changed in transit), naming the codec and the sizes.
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
    if checksum(body) != sent:
        raise ValueError(
            f"codec {codec!r}: the {size}-byte payload for {n} elements fails its CRC-32 "
            "(cut, extended or changed in transit)"
        )
    return body
