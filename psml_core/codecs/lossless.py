"""Lossless Snappy coding of a payload, measured beside the raw wire bytes (``lossless: snappy``).

PF's code Snappy-compresses every message in the ps-lite van. psml keeps that size in the
records' ``lossless_bytes_up/down`` columns and never in the raw byte columns.
"""

from __future__ import annotations

from psml_core.codecs.base import Payload

__all__ = ["snappy_bytes", "snappy_size"]


def snappy_size(payload: Payload | bytes | bytearray | memoryview) -> int | None:
    """Bytes of the payload's buffer after lossless Snappy compression, if Snappy is available.

    The PF code Snappy-compresses every message in the ps-lite ZMQ van; psml reports that
    size *separately* and never mix it into ``wire_bytes``. ``python-snappy`` is an optional
    dependency: without it (or if ``import snappy`` finds an unrelated package with no
    ``compress``) this returns None.

    Args:
        payload: A payload, or a raw buffer.

    Returns:
        ``len(snappy.compress(buffer))``, or None when python-snappy is not importable.
    """
    try:
        import snappy  # type: ignore[import-not-found]
    except ImportError:
        return None
    compress = getattr(snappy, "compress", None)
    if not callable(compress):
        return None
    buf = payload.buffer if isinstance(payload, Payload) else bytes(payload)
    return len(compress(buf))


def snappy_bytes(payload: Payload | bytes | bytearray | memoryview) -> int:
    """:func:`snappy_size` where python-snappy is required (checked when a job is built)."""
    size = snappy_size(payload)
    if size is None:
        raise RuntimeError("python-snappy is not importable (it was when the job was built)")
    return size
