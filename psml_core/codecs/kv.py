"""PS-lite key/value entries: the wire format of jpdc's and Parsa's parameter server.

Source: our design's byte accounting (docs/methods.md: "PS-lite key/value entry:
8 B key (uint64) plus 4 B value, so 12 B per entry"), used by methods 1 and 3, which follow the
PS-lite lineage. PS-lite moves ``(keys, vals)`` pairs of SArrays; only the keys a message names
travel, which is what makes a placement show in the measured bytes.

Wire format (no header, little-endian, a CRC-32C trailer):

* **entries** (pushes, pull answers): ``m`` uint64 keys, strictly ascending, then ``m`` float32
  values, then the 4-byte CRC-32C trailer of :mod:`~psml_core.codecs.integrity`:
  ``wire_bytes = 12 m + 4`` exactly. Keys are positions in the vector the message encodes
  (a shard's key list, which both ends know, as for every other codec's push).
* **key list** (a ``touched`` pull's request, :func:`pack_keys`): ``m`` uint64 keys, strictly
  ascending, then the same CRC-32C trailer: ``8 m + 4`` bytes. Without it a list cut or extended
  by whole keys, or an empty one, would be another valid request.

:meth:`KVCodec.encode` sends the non-zero entries of a vector (lossless on them);
:meth:`KVCodec.encode_keys` sends the entries at given keys, zeros included — PS-lite's push and
pull answer carry every key of a mini-batch, whatever its value, which is what the cost model
("worker p pulls and pushes every k in N_p") counts. A push's trailer is bound to its step and
element count (:func:`~psml_core.codecs.integrity.crc_seed`); a touched pull's key list and its
answer (``ctx=None``) are sealed without a step, because the dist backend's worker rebuilds
that answer without its context (the worker checks that it names exactly the keys it asked
for), but still bound to their count (the shard's key count; the answer's ``n``). The
decoders are strict: a length that is not a whole number of entries, keys out of order or out
of range, or a non-finite value is a ValueError naming the problem. The server side is the default
:class:`~psml_core.codecs.base.ServerCodec` (the sum of the decoded pushes).
"""

from __future__ import annotations

import numpy as np

from psml_core.codecs.base import CODECS, Codec, CodecContext, Payload, check_vector
from psml_core.codecs.integrity import seal, unseal

__all__ = [
    "ENTRY_BYTES",
    "KEY_BYTES",
    "KVCodec",
    "decode_entries",
    "encode_entries",
    "pack_keys",
    "unpack_keys",
]

KEY_BYTES = 8
"""Bytes of one key (uint64)."""
ENTRY_BYTES = 12
"""Bytes of one key/value entry (uint64 key + float32 value)."""

_U64 = np.dtype("<u8")
_F32 = np.dtype("<f4")


def _check_keys(keys: np.ndarray, n: int, what: str) -> np.ndarray:
    """Keys as int64; ValueError unless 1-D, integral, strictly ascending and in [0, n)."""
    keys = np.asarray(keys)
    if keys.ndim != 1 or (keys.size and not np.issubdtype(keys.dtype, np.integer)):
        raise ValueError(f"{what}: keys must be a 1-D integer array, got {keys.dtype} {keys.shape}")
    keys = keys.astype(np.int64, copy=False)
    if keys.size and (keys[0] < 0 or keys[-1] >= n):
        raise ValueError(f"{what}: keys must lie in [0, {n}), got {keys[0]}..{keys[-1]}")
    if keys.size > 1 and np.any(np.diff(keys) <= 0):
        bad = int(np.flatnonzero(np.diff(keys) <= 0)[0])
        raise ValueError(
            f"{what}: keys must be strictly ascending (key {keys[bad + 1]} follows {keys[bad]} "
            f"at entry {bad + 1})"
        )
    return keys


def encode_entries(n: int, keys: np.ndarray, values: np.ndarray) -> bytes:
    """The ``12 m`` bytes of ``m`` entries of an ``n``-vector.

    Args:
        n: Length of the vector the keys index.
        keys: Strictly ascending keys in [0, n).
        values: Their values (finite; cast to float32).

    Raises:
        ValueError: bad keys, mismatched lengths or a non-finite value.
    """
    keys = _check_keys(keys, n, "kv entries")
    vals = np.asarray(values, dtype=np.float32)
    if vals.shape != keys.shape:
        raise ValueError(f"kv entries: {keys.size} keys but {vals.size} values")
    if not np.isfinite(vals).all():
        bad = int(np.flatnonzero(~np.isfinite(vals))[0])
        raise ValueError(
            f"kv entries: cannot send a non-finite value ({vals[bad]!r} at key {keys[bad]})"
        )
    m = int(keys.size)
    out = np.empty(ENTRY_BYTES * m, dtype=np.uint8)  # one allocation, filled in place
    out[: KEY_BYTES * m].view(_U64)[:] = keys
    out[KEY_BYTES * m :].view(_F32)[:] = vals
    return out.tobytes()


def decode_entries(buf: bytes | memoryview, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Parse :func:`encode_entries` bytes into ``(keys int64, values float32)``.

    Raises:
        ValueError: a length that is not a multiple of 12, keys not strictly ascending or not
            in [0, n), or a non-finite value.
    """
    length = len(buf)
    if length % ENTRY_BYTES:
        raise ValueError(
            f"kv payload of {length} bytes is not a whole number of {ENTRY_BYTES}-byte entries"
        )
    m = length // ENTRY_BYTES
    raw = np.frombuffer(buf, dtype=_U64, count=m)
    if m and int(raw.max()) >= n:  # checked as uint64: a huge key must not wrap to negative
        raise ValueError(f"kv payload: key {int(raw.max())} is outside [0, {n})")
    keys = _check_keys(raw.astype(np.int64), n, "kv payload")
    vals = np.frombuffer(buf, dtype=_F32, count=m, offset=KEY_BYTES * m).astype(np.float32)
    if not np.isfinite(vals).all():
        bad = int(np.flatnonzero(~np.isfinite(vals))[0])
        raise ValueError(f"kv payload: non-finite value {vals[bad]!r} at key {keys[bad]}")
    return keys, vals


def pack_keys(keys: np.ndarray, n: int) -> bytes:
    """A key list (a ``touched`` pull's request): strictly ascending uint64, then a CRC-32C.

    ``8 m + 4`` bytes for ``m`` keys (4 for an empty list, which a shard still receives).

    Raises:
        ValueError: keys not strictly ascending or not in [0, n).
    """
    return seal(_check_keys(keys, n, "key list").astype(_U64).tobytes(), n=n)


def unpack_keys(buf: bytes | memoryview, n: int) -> np.ndarray:
    """Inverse of :func:`pack_keys` (int64).

    Raises:
        ValueError: a buffer that fails its CRC-32C (cut, extended, changed or empty), a body
            that is not a whole number of uint64 keys, or keys not strictly ascending or not
            in [0, n).
    """
    buf = unseal(buf, "kv key list", n)
    length = len(buf)
    if length % KEY_BYTES:
        raise ValueError(f"key list of {length} bytes is not a whole number of uint64 keys")
    raw = np.frombuffer(buf, dtype=_U64, count=length // KEY_BYTES)
    if raw.size and int(raw.max()) >= n:
        raise ValueError(f"key list: key {int(raw.max())} is outside [0, {n})")
    return _check_keys(raw.astype(np.int64), n, "key list")


@CODECS.register("kv")
class KVCodec(Codec):
    """PS-lite key/value entries (see the module docstring): ``12 m + 4`` bytes for ``m`` entries.

    No parameters. ``encode`` sends the non-zero entries; ``encode_keys`` the entries at given
    keys (a mini-batch's keys, zeros included). The server sums the decoded pushes (default).
    No state per shard, so its keys may move between shards (the dynamic partition).
    """

    movable = True

    def encode(self, x: np.ndarray, ctx: CodecContext) -> Payload:
        """The non-zero entries of ``x``, keys ascending."""
        x = check_vector(x)
        keys = np.flatnonzero(x)
        body = encode_entries(int(x.size), keys, x[keys])
        return Payload(self.name, int(x.size), seal(body, ctx.step, n=int(x.size)))

    def encode_keys(self, x: np.ndarray, keys: np.ndarray, ctx: CodecContext | None) -> Payload:
        """The entries of ``x`` at ``keys`` (strictly ascending), zeros included.

        ``ctx`` None seals the payload without a step (a touched pull's answer; see the module).
        """
        x = check_vector(x)
        keys = _check_keys(keys, int(x.size), "kv entries")
        body = encode_entries(int(x.size), keys, x[keys])
        return Payload(
            self.name, int(x.size), seal(body, None if ctx is None else ctx.step, n=int(x.size))
        )

    def decode_entries(
        self, payload: Payload, ctx: CodecContext | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``(keys, values)`` of a payload (strict; see :func:`decode_entries`).

        ``ctx`` None expects the seal without a step (a touched pull's answer).
        """
        step = None if ctx is None else ctx.step
        return decode_entries(unseal(payload.buffer, self.name, payload.n, step), payload.n)

    def decode(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """The dense float32 vector: the entries in place, zeros elsewhere (strict)."""
        keys, vals = self.decode_entries(payload, ctx)
        out = np.zeros(payload.n, dtype=np.float32)
        out[keys] = vals
        return out
