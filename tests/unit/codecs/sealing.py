"""The CRC-32 trailer of variable-length payloads, written independently of psml_core.

``sealed(body, step)`` is what a sealed codec sends for ``body`` at ``step`` (a push; a
broadcast with ``down=True``); ``body_of(buf, step)`` strips the trailer; ``resealed(buf,
edit, step)`` edits a payload's body and seals it again, so that a test reaches the parser's
own checks behind the checksum. ``step`` defaults to 0, ``CodecContext()``'s; ``None`` is the
unbound seal (a touched pull's key list and answer); ``bind`` is random-k's ``(seed, n)``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

TRAILER = 4
SEED = 0x9E3779B9  # the CRC's starting value: an empty body's trailer is not 0


def seed_of(step: int | None, down: bool = False, bind: tuple[int, ...] = ()) -> int:
    """The seed of a message of ``step``: the CRC of its direction's tag, the step and, for
    random-k, ``bind`` (its index seed and element count, each a uint64)."""
    if step is None:
        return SEED
    tag = b"down" if down else b"push"
    extra = b"".join(struct.pack("<Q", b % 2**64) for b in bind)
    return zlib.crc32(tag + struct.pack("<I", step % 2**32) + extra, SEED)


def sealed(
    body: bytes, step: int | None = 0, down: bool = False, bind: tuple[int, ...] = ()
) -> bytes:
    return bytes(body) + struct.pack("<I", zlib.crc32(bytes(body), seed_of(step, down, bind)))


def body_of(
    buf: bytes, step: int | None = 0, down: bool = False, bind: tuple[int, ...] = ()
) -> bytes:
    crc = zlib.crc32(buf[:-4], seed_of(step, down, bind))
    assert struct.unpack("<I", buf[-4:])[0] == crc, "not a sealed payload of this step"
    return bytes(buf[:-4])


def resealed(
    buf: bytes,
    edit: Callable[[bytes], bytes],
    step: int | None = 0,
    down: bool = False,
    bind: tuple[int, ...] = (),
) -> bytes:
    return sealed(edit(body_of(buf, step, down, bind)), step, down, bind)
