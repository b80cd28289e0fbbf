"""The CRC-32C trailer of variable-length payloads, written independently of psml_core.

``sealed(body, step, n=n)`` is what a sealed codec sends for ``body`` at ``step`` (a push; a
broadcast with ``down=True``) encoding ``n`` elements; ``body_of(buf, step, n=n)`` strips the
trailer; ``resealed(buf, edit, step, n=n)`` edits a payload's body and seals it again, so that a
test reaches the parser's own checks behind the checksum. ``step`` defaults to 0,
``CodecContext()``'s; ``None`` is the seal not bound to a step (a touched pull's key list and
answer). ``n`` (required) is the element count every seal binds, the first uint64 after the
step; ``bind`` is what follows it (random-k: ``(seed,)``). The CRC-32C itself is
``google-crc32c``'s (pinned to the standard's check values in test_codecs_integrity.py).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import google_crc32c


def crc32c(data: bytes, value: int = 0) -> int:
    """CRC-32C of ``data`` continued from ``value``, as ``zlib.crc32`` continues a CRC-32C."""
    return google_crc32c.extend(value, bytes(data))


TRAILER = 4
SEED = 0x9E3779B9  # the CRC's starting value: an empty body's trailer is not 0


def seed_of(step: int | None, down: bool = False, bind: tuple[int, ...] = (), *, n: int) -> int:
    """The seed of a message of ``step`` encoding ``n`` elements: the CRC of its direction's
    tag, the step (uint32), then ``n`` and ``bind`` (random-k's index seed), each a uint64.
    Not bound to a step (``None``): the CRC of ``n`` and ``bind`` alone, no tag or step."""
    words = b"".join(struct.pack("<Q", b % 2**64) for b in (n, *bind))
    if step is None:
        return crc32c(words, SEED)
    tag = b"down" if down else b"push"
    return crc32c(tag + struct.pack("<I", step % 2**32) + words, SEED)


def sealed(
    body: bytes,
    step: int | None = 0,
    down: bool = False,
    bind: tuple[int, ...] = (),
    *,
    n: int,
) -> bytes:
    crc = crc32c(bytes(body), seed_of(step, down, bind, n=n))
    return bytes(body) + struct.pack("<I", crc)


def body_of(
    buf: bytes,
    step: int | None = 0,
    down: bool = False,
    bind: tuple[int, ...] = (),
    *,
    n: int,
) -> bytes:
    crc = crc32c(buf[:-4], seed_of(step, down, bind, n=n))
    assert struct.unpack("<I", buf[-4:])[0] == crc, "not a sealed payload of this step and count"
    return bytes(buf[:-4])


def resealed(
    buf: bytes,
    edit: Callable[[bytes], bytes],
    step: int | None = 0,
    down: bool = False,
    bind: tuple[int, ...] = (),
    *,
    n: int,
) -> bytes:
    return sealed(edit(body_of(buf, step, down, bind, n=n)), step, down, bind, n=n)
