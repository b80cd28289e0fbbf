"""Codec state on the wire: the ``Pull.extra`` a shard publishes with each answer.

A codec's server side may publish state for the workers' next push (DFS: the block size and
the previous aggregate's block mask). The sim backend hands the dict over; here it travels as
the answer's state part, in a compact, exact format.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

from psml_core.engine.torchdist.wire import ProtocolError

__all__ = ["decode_state", "encode_state"]

_LEN = struct.Struct("<I")


def encode_state(extra: dict[str, Any]) -> bytes:
    """Serialize a pull's published codec state (``Pull.extra``) compactly and exactly.

    Layout: a uint32 manifest length, a JSON manifest (scalars, and for each array its key,
    dtype, shape, byte count), then the arrays' bytes in manifest order. Boolean arrays (block
    masks) are bit-packed, so a mask costs ``ceil(n / 8)`` bytes — what codecs declare as
    ``extra_bytes``. The length word and manifest are framing (protocol bytes).

    Raises:
        TypeError: for a value that is neither an array nor JSON-serializable, naming its key.
    """
    if not extra:
        return b""
    scalars: dict[str, Any] = {}
    arrays: list[list[Any]] = []
    data: list[bytes] = []
    for key in sorted(extra):
        value = extra[key]
        if isinstance(value, np.ndarray):
            a = np.ascontiguousarray(value)
            if a.dtype == np.bool_:
                raw = np.packbits(a.ravel(), bitorder="little").tobytes()
            else:
                a = a.astype(a.dtype.newbyteorder("<"), copy=False)
                raw = a.tobytes()
            arrays.append([key, a.dtype.str, list(a.shape), len(raw)])
            data.append(raw)
            continue
        if isinstance(value, np.generic):
            value = value.item()
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise TypeError(
                f"codec state {key!r} ({type(value).__name__}) cannot be sent: "
                "publish arrays or JSON-serializable values"
            ) from None
        scalars[key] = value
    manifest = json.dumps({"a": arrays, "s": scalars}, separators=(",", ":")).encode()
    return _LEN.pack(len(manifest)) + manifest + b"".join(data)


def decode_state(buf: bytes | memoryview) -> dict[str, Any]:
    """Inverse of :func:`encode_state` (JSON lists stay lists)."""
    if len(buf) == 0:
        return {}
    (mlen,) = _LEN.unpack_from(buf, 0)
    manifest = json.loads(bytes(buf[_LEN.size : _LEN.size + mlen]))
    out: dict[str, Any] = dict(manifest["s"])
    pos = _LEN.size + mlen
    for key, dtype, shape, nbytes in manifest["a"]:
        raw = np.frombuffer(buf, dtype=np.uint8, count=nbytes, offset=pos)
        pos += nbytes
        dt = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        if dt == np.bool_:
            arr = np.unpackbits(raw, count=count, bitorder="little").astype(np.bool_)
        else:
            arr = raw.view(dt).astype(dt.newbyteorder("="))
        out[key] = arr.reshape(shape)
    if pos != len(buf):
        raise ProtocolError(f"codec state of {len(buf)} bytes, manifest accounts for {pos}")
    return out
