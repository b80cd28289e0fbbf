"""The CRC-32 trailer of variable-length payloads, written independently of psml_core.

``sealed(body)`` is what a sealed codec sends for ``body``; ``body_of(buf)`` strips the
trailer; ``resealed(buf, edit)`` edits a payload's body and seals it again, so that a test
reaches the parser's own checks behind the checksum.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

TRAILER = 4
SEED = 0x9E3779B9  # the CRC's starting value: an empty body's trailer is not 0


def sealed(body: bytes) -> bytes:
    return bytes(body) + struct.pack("<I", zlib.crc32(bytes(body), SEED))


def body_of(buf: bytes) -> bytes:
    assert struct.unpack("<I", buf[-4:])[0] == zlib.crc32(buf[:-4], SEED), "not a sealed payload"
    return bytes(buf[:-4])


def resealed(buf: bytes, edit: Callable[[bytes], bytes]) -> bytes:
    return sealed(edit(body_of(buf)))
