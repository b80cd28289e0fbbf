"""Wire formats shared by the codecs, with exact sizes and no self-describing header.

These are message bodies: a codec seals a variable-length body with a 4-byte CRC-32C trailer
(:mod:`psml_core.codecs.integrity`) before it goes on the wire, so that a cut, extended or
damaged buffer is refused, never parsed as a different valid message.

Sparse vectors (our design's "Byte accounting"):

* **COO**: ``k`` little-endian int32 indices (ascending), then ``k`` float32 values: ``8k`` bytes.
* **bitmap**: ``ceil(n/8)`` bytes of presence bits (little bit order: element i is bit i % 8 of
  byte i // 8), then the ``k`` float32 values in index order: ``ceil(n/8) + 4k`` bytes.
* **dense**: ``n`` float32 values: ``4n`` bytes.

:func:`encode_sparse` sends the cheapest: COO while ``8k <= ceil(n/8) + 4k`` (that is
``k <= K0 = floor(ceil(n/8) / 4)``), bitmap while it is shorter than dense, dense otherwise. The
three length ranges do not overlap — COO lengths are at most ``8 K0``, bitmap lengths are at least
``ceil(n/8) + 4 (K0 + 1) > 8 K0`` and below ``4n``, dense is exactly ``4n`` — so the decoder tells
the format from the length alone.

Blocks (OmniReduce, DFS): the vector is cut into blocks of ``B`` elements (the last one may be
shorter). A block record is its uint32 block id followed by its values: ``4 + 4B`` bytes, or
``4 + 4r`` for a last block of ``r < B`` elements. Records are sent in ascending block order.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "bitmap_bytes",
    "block_count",
    "coo_max_k",
    "decode_auto",
    "decode_blocks",
    "decode_sparse",
    "encode_auto",
    "encode_blocks",
    "encode_sparse",
    "pack_bits",
    "sparse_size",
    "unpack_bits",
]

_I32 = np.dtype("<i4")
_U32 = np.dtype("<u4")
_F32 = np.dtype("<f4")


def bitmap_bytes(n: int) -> int:
    """Bytes of a presence bitmap over ``n`` elements: ``ceil(n/8)``."""
    return (n + 7) // 8


def coo_max_k(n: int) -> int:
    """Largest ``k`` for which COO (8k) is not longer than the bitmap (ceil(n/8) + 4k)."""
    return bitmap_bytes(n) // 4


def sparse_size(n: int, k: int) -> int:
    """Exact bytes :func:`encode_sparse` uses for ``k`` entries of an ``n``-vector."""
    if k <= coo_max_k(n):
        return 8 * k
    return min(bitmap_bytes(n) + 4 * k, 4 * n)


def pack_bits(mask: np.ndarray) -> bytes:
    """A boolean vector as little-bit-order bytes (ceil(n/8) of them)."""
    return np.packbits(mask, bitorder="little").tobytes()


def unpack_bits(buf: bytes | memoryview, n: int) -> np.ndarray:
    """Inverse of :func:`pack_bits`; padding bits past ``n`` must be zero."""
    raw = np.frombuffer(buf, dtype=np.uint8)
    if n % 8 and raw.size and raw[-1] >> (n % 8):
        raise ValueError("bitmap has bits set past the vector's end")
    return np.unpackbits(raw, count=n, bitorder="little").view(bool)


def encode_sparse(n: int, idx: np.ndarray, vals: np.ndarray) -> bytes:
    """The cheapest exact encoding of the entries ``(idx, vals)`` of an ``n``-vector.

    Args:
        n: Length of the dense vector.
        idx: Ascending, unique indices in [0, n).
        vals: Their values (cast to float32).
    """
    k = int(idx.size)
    vals32 = np.asarray(vals, dtype=_F32)
    if k <= coo_max_k(n):
        return np.asarray(idx, dtype=_I32).tobytes() + vals32.tobytes()
    nb = bitmap_bytes(n)
    if nb + 4 * k < 4 * n:
        mask = np.zeros(n, dtype=bool)
        mask[idx] = True
        out = bytearray(nb + 4 * k)  # one allocation, filled in place
        out[:nb] = np.packbits(mask, bitorder="little").tobytes()
        np.frombuffer(out, dtype=_F32, offset=nb)[:] = vals32
        return bytes(out)
    dense = np.zeros(n, dtype=_F32)
    dense[idx] = vals32
    return dense.tobytes()


def decode_sparse(buf: bytes | memoryview, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Parse an :func:`encode_sparse` buffer into ``(indices, values)``.

    Raises:
        ValueError: if no format of an ``n``-vector has this length or the content is invalid.
    """
    length = len(buf)
    if length == 4 * n:
        dense = np.frombuffer(buf, dtype=_F32)
        idx = np.flatnonzero(dense)
        return idx, dense[idx].astype(np.float32)
    if length <= 8 * coo_max_k(n):
        if length % 8:
            raise ValueError(f"sparse payload of {length} bytes is not a COO list (8 B/entry)")
        k = length // 8
        idx = np.frombuffer(buf, dtype=_I32, count=k).astype(np.int64)
        if k and (idx[0] < 0 or idx[-1] >= n or np.any(np.diff(idx) <= 0)):
            raise ValueError(f"COO indices must be ascending and in [0, {n})")
        return idx, np.frombuffer(buf, dtype=_F32, offset=4 * k).astype(np.float32)
    nb = bitmap_bytes(n)
    if length < nb or (length - nb) % 4:
        raise ValueError(f"payload of {length} bytes is no sparse format of a {n}-vector")
    idx = np.flatnonzero(unpack_bits(memoryview(buf)[:nb], n))
    vals = np.frombuffer(buf, dtype=_F32, offset=nb)
    if vals.size != idx.size:
        raise ValueError(f"bitmap marks {idx.size} entries but {vals.size} values follow")
    return idx, vals.astype(np.float32)


def encode_auto(x: np.ndarray) -> bytes:
    """The cheapest exact encoding of a float32 vector's non-zeros."""
    idx = np.flatnonzero(x)
    return encode_sparse(int(x.size), idx, x[idx])


def decode_auto(buf: bytes | memoryview, n: int) -> np.ndarray:
    """Inverse of :func:`encode_auto`: a dense float32 vector."""
    length = len(buf)
    if length == 4 * n:
        return np.frombuffer(buf, dtype=_F32).astype(np.float32)
    nb = bitmap_bytes(n)
    if length > 8 * coo_max_k(n) and length >= nb and (length - nb) % 4 == 0:
        # Bitmap: a boolean scatter, without materialising the index list.
        mask = unpack_bits(memoryview(buf)[:nb], n)
        vals = np.frombuffer(buf, dtype=_F32, offset=nb)
        out = np.zeros(n, dtype=np.float32)
        if np.count_nonzero(mask) != vals.size:
            raise ValueError(
                f"bitmap marks {np.count_nonzero(mask)} entries but {vals.size} values follow"
            )
        out[mask] = vals
        return out
    idx, vals = decode_sparse(buf, n)
    out = np.zeros(n, dtype=np.float32)
    out[idx] = vals
    return out


def block_count(n: int, block: int) -> int:
    """Number of blocks of ``block`` elements covering ``n`` elements."""
    return -(-n // block)


def encode_blocks(x: np.ndarray, blocks: np.ndarray, block: int) -> bytes:
    """Records (uint32 id, values) of the ascending block ids ``blocks`` of ``x``."""
    n = int(x.size)
    nblk = block_count(n, block)
    blocks = np.asarray(blocks, dtype=np.int64)
    x32 = np.asarray(x, dtype=_F32)
    last_partial = n % block != 0 and blocks.size > 0 and blocks[-1] == nblk - 1
    full = blocks[:-1] if last_partial else blocks
    rec = np.empty((full.size, block + 1), dtype=_F32)
    rec.view(_U32)[:, 0] = full
    if full.size:
        padded = x32[: (n // block) * block].reshape(-1, block)
        rec[:, 1:] = padded[full]
    out = rec.tobytes()
    if last_partial:
        out += np.array([nblk - 1], dtype=_U32).tobytes() + x32[(nblk - 1) * block :].tobytes()
    return out


def decode_blocks(buf: bytes | memoryview, n: int, block: int) -> tuple[np.ndarray, np.ndarray]:
    """Parse block records into ``(block ids, dense float32 vector)``.

    Raises:
        ValueError: for a length no set of records can have, or bad / unordered block ids.
    """
    length = len(buf)
    nblk = block_count(n, block)
    rec_len = 4 + 4 * block
    tail = n - (nblk - 1) * block if nblk else 0  # elements in the last block
    out = np.zeros(n, dtype=np.float32)
    if length % rec_len == 0:
        m, has_tail = length // rec_len, False
    elif tail < block and (length - (4 + 4 * tail)) % rec_len == 0 and length >= 4 + 4 * tail:
        m, has_tail = (length - (4 + 4 * tail)) // rec_len, True
    else:
        raise ValueError(f"{length} bytes are no whole number of {block}-element block records")
    recs = np.frombuffer(buf, dtype=_F32, count=m * (block + 1)).reshape(m, block + 1)
    ids = recs.view(_U32)[:, 0].astype(np.int64)
    limit = nblk - 1 if tail < block else nblk  # the partial last block has its own record size
    if m and (np.any(np.diff(ids) <= 0) or ids[-1] >= limit):
        raise ValueError("block ids must be ascending and name whole blocks of the vector")
    if m:
        out[: (n // block) * block].reshape(-1, block)[ids] = recs[:, 1:]
    if has_tail:
        off = m * rec_len
        (last,) = np.frombuffer(buf, dtype=_U32, count=1, offset=off)
        if last != nblk - 1 or (m and ids[-1] >= last):
            raise ValueError("a short block record must be the vector's last block")
        out[(nblk - 1) * block :] = np.frombuffer(buf, dtype=_F32, offset=off + 4)
        ids = np.append(ids, nblk - 1)
    return ids, out
