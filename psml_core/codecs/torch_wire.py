"""The wire formats of :mod:`.formats` built and parsed on a torch device, byte for byte.

A codec's torch path packs its payload where the tensor lives and copies the finished bytes to
the host once (:func:`to_host`, into reused host memory: :mod:`.host_buffers`), where the
payload holds them as a read-only ``memoryview``; a device decoder copies the received body to
the device once (:func:`to_device`) and parses it there. Every function here gives exactly the
bytes (or the vector) of its NumPy twin in :mod:`.formats` for the same input, and refuses
what it refuses. Byte views assume a little-endian device, as every CUDA and x86/ARM host is.

Seals (:func:`seal`, :func:`unseal_to`): the CRC-32C trailer is computed once, by default on
the host over the bytes just copied there (the CPU's CRC instruction, over 10 GB/s per core:
faster than the device's table gathers for every payload size measured), into the same host
buffer, so a sealed payload is one copy and one pass of the CRC. :data:`DEVICE_CRC` computes it
on the device instead (:mod:`.torch_crc`, the same value), where it travels with the body in
the one copy. A decode checks the received bytes on the host, where they are, before its one
copy to the device.
"""

from __future__ import annotations

import math
import os
import struct
import warnings
from typing import NoReturn

import numpy as np
import torch

from psml_core.codecs.formats import bitmap_bytes, block_count, coo_max_k
from psml_core.codecs.host_buffers import PINNED_FROM, frozen, host_array
from psml_core.codecs.integrity import CHECKSUM_BYTES, counted, crc32c, crc_seed, unseal
from psml_core.codecs.tensors import is_tensor

__all__ = [
    "COO_ORDER",
    "DEVICE_CRC",
    "as_bytes",
    "blocks_sent",
    "check_finite",
    "check_tensor",
    "checked_range",
    "decode_blocks",
    "decode_sparse",
    "encode_blocks",
    "encode_sparse",
    "extremes",
    "is_tensor",
    "pack_bits",
    "parse_sparse",
    "seal",
    "seal_nonzeros",
    "to_device",
    "to_host",
    "unpack_bits",
    "unseal_to",
]

DEVICE_CRC: bool = os.environ.get("PSML_DEVICE_CRC", "") == "1"
"""Whether :func:`seal` computes the trailer on the device (default: on the host, after the copy).

``PSML_DEVICE_CRC=1`` sets it for a process (the same bytes either way;
``benchmarks/bench_codecs_torch.py`` times both on the device it runs on)."""

_TRAILER = struct.Struct("<I")


def as_bytes(t: torch.Tensor) -> torch.Tensor:
    """A tensor's little-endian bytes, as a uint8 view of it (or of its contiguous copy)."""
    if t.numel() == 0:
        return torch.empty(0, dtype=torch.uint8, device=t.device)
    return t.contiguous().view(torch.uint8).reshape(-1)


def _copy_into(out: np.ndarray, at: int, parts: tuple[torch.Tensor, ...]) -> int:
    """Copy ``parts`` (uint8, one device) into ``out`` from byte ``at``; returns the end."""
    parts = tuple(p for p in parts if p.numel())
    if not parts:
        return at
    if parts[0].device.type != "cpu" and len(parts) > 1:
        parts = (torch.cat(parts),)  # one transfer (one sync) rather than one per part
    dst = torch.from_numpy(out)
    for p in parts:
        dst[at : at + p.numel()].copy_(p)
        at += int(p.numel())
    return at


def to_host(*parts: torch.Tensor, head: bytes = b"") -> memoryview:
    """``head`` and the bytes of ``parts`` (uint8 tensors on one device), copied to the host once.

    Returns a read-only memoryview of reused host memory (:mod:`.host_buffers`).
    """
    device = parts[0].device
    out = host_array(len(head) + sum(int(p.numel()) for p in parts), device)
    out[: len(head)] = np.frombuffer(head, dtype=np.uint8)
    _copy_into(out, len(head), parts)
    return frozen(out)


def to_device(buf: bytes | bytearray | memoryview, device: torch.device) -> torch.Tensor:
    """A received buffer as a uint8 tensor on ``device`` (one copy; none on the CPU)."""
    if len(buf) == 0:
        return torch.empty(0, dtype=torch.uint8, device=device)
    with warnings.catch_warnings():  # a read-only buffer: only read, or copied to the device
        warnings.simplefilter("ignore", UserWarning)
        host = torch.frombuffer(buf, dtype=torch.uint8)
    return host if device.type == "cpu" else host.to(device)


def seal(
    body: torch.Tensor,
    step: int | None,
    down: bool = False,
    bind: tuple[int, ...] = (),
    *,
    n: int,
    head: bytes = b"",
) -> memoryview:
    """``head`` (host bytes) and the body (uint8 on its device), then their step-bound CRC-32C.

    Equal to :func:`psml_core.codecs.integrity.seal` of ``head`` and the body's bytes (``n``
    and ``bind`` as there): one copy to the host, and the CRC computed once
    (:data:`DEVICE_CRC`: where). ``head`` is written on the host, where it was made.
    """
    seed = crc32c(head, crc_seed(step, down, counted(n, bind)))
    size, at = int(body.numel()), len(head)
    if DEVICE_CRC and size >= 4:
        from psml_core.codecs.torch_crc import crc32c_bytes

        return to_host(body, crc32c_bytes(body, seed), head=head)
    total = at + size + CHECKSUM_BYTES
    out = host_array(total, body.device)
    out[:at] = np.frombuffer(head, dtype=np.uint8)
    pinned = body.device.type == "cuda" and total >= PINNED_FROM  # as host_array chose
    _TRAILER.pack_into(out, at + size, _copy_and_crc(out[at:], body, seed, pinned))
    return frozen(out)


_PIPE_CHUNK = 4 << 20  # bytes copied per step while the host checks the step before


def _copy_and_crc(out: np.ndarray, body: torch.Tensor, seed: int, pinned: bool) -> int:
    """Copy ``body`` into ``out``'s front and return its CRC-32C, continued from ``seed``.

    In chunks, each checked as soon as it has landed: into pinned memory the chunks' copies
    are queued at once and the host checks chunk ``i`` while ``i + 1`` crosses, so the CRC
    hides behind the copy; on the CPU each chunk is checked while still in the cache.
    """
    size = int(body.numel())
    if size == 0:
        return seed
    dst = torch.from_numpy(out)
    spans = [(a, min(a + _PIPE_CHUNK, size)) for a in range(0, size, _PIPE_CHUNK)]
    landed = []
    for a, b in spans:
        dst[a:b].copy_(body[a:b], non_blocking=pinned)
        if pinned:
            landed.append(torch.cuda.Event())
            landed[-1].record(torch.cuda.current_stream(body.device))
        else:
            seed = crc32c(out[a:b], seed)
    if pinned:
        for (a, b), event in zip(spans, landed, strict=True):
            event.synchronize()
            seed = crc32c(out[a:b], seed)
    return seed


def unseal_to(
    buf: bytes | memoryview,
    codec: str,
    n: int,
    step: int | None,
    device: torch.device,
    down: bool = False,
    bind: tuple[int, ...] = (),
) -> torch.Tensor:
    """The checked body of a sealed payload as uint8 on ``device`` (the CRC checked on the host).

    On a CUDA device the body's copy starts first and the host checks the trailer while it
    crosses; the body is handed on only once both are done (and refused if the check fails).

    Raises:
        ValueError: as :func:`psml_core.codecs.integrity.unseal`.
    """
    size = len(buf) - CHECKSUM_BYTES
    if device.type != "cuda" or size < PINNED_FROM:
        return to_device(unseal(buf, codec, n, step, down=down, bind=bind), device)
    out = torch.empty(size, dtype=torch.uint8, device=device)
    out.copy_(to_device(buf, torch.device("cpu"))[:size], non_blocking=True)
    landed = torch.cuda.Event()
    landed.record(torch.cuda.current_stream(device))  # the stream the copy was queued on
    try:
        unseal(buf, codec, n, step, down=down, bind=bind)
    finally:  # the copy reads ``buf``: it must be done before the caller may let ``buf`` go
        landed.synchronize()
    return out


def pack_bits(mask: torch.Tensor) -> torch.Tensor:
    """A bool vector as little-bit-order bytes (``ceil(n/8)``), as ``np.packbits(.., "little")``."""
    n = int(mask.numel())
    nb = bitmap_bytes(n)
    bits = torch.zeros(nb * 8, dtype=torch.uint8, device=mask.device)
    bits[:n] = mask
    weights = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8, device=mask.device)
    return torch.sum(bits.view(nb, 8) * weights, dim=1, dtype=torch.uint8)


def unpack_bits(raw: torch.Tensor, n: int) -> torch.Tensor:
    """Inverse of :func:`pack_bits`; padding bits past ``n`` must be zero (ValueError)."""
    shifts = torch.arange(8, dtype=torch.uint8, device=raw.device)
    bits = ((raw.view(-1, 1) >> shifts) & 1).reshape(-1)
    if n % 8 and raw.numel() and bool(bits[n:].any()):
        raise ValueError("bitmap has bits set past the vector's end")
    return bits[:n].bool()


def encode_sparse(n: int, idx: torch.Tensor, vals: torch.Tensor) -> torch.Tensor:
    """:func:`psml_core.codecs.formats.encode_sparse` on the device: the body as uint8.

    Args:
        n: Length of the dense vector.
        idx: Ascending, unique indices in [0, n) (an integer tensor).
        vals: Their values (cast to float32).
    """
    k = int(idx.numel())
    vals32 = vals.to(torch.float32)
    if k <= coo_max_k(n):
        return torch.cat([as_bytes(idx.to(torch.int32)), as_bytes(vals32)])
    nb = bitmap_bytes(n)
    if nb + 4 * k < 4 * n:
        mask = torch.zeros(n, dtype=torch.bool, device=idx.device)
        mask[idx] = True
        return torch.cat([pack_bits(mask), as_bytes(vals32)])
    dense = torch.zeros(n, dtype=torch.float32, device=idx.device)
    dense[idx] = vals32
    return as_bytes(dense)


def encode_dense_nonzeros(x: torch.Tensor, dense: bool | None = None) -> torch.Tensor:
    """:func:`psml_core.codecs.formats.encode_auto` on the device: the non-zeros' body.

    The non-zeros are counted first (one sync; ``dense``: the count's verdict, if known): a
    body in the dense format is the vector's own bytes (a -0.0 written as 0.0, as the host
    scatters the non-zeros into zeros), so the indices are found only when a sparse format wins.
    """
    if dense if dense is not None else _dense_wins(x):
        return as_bytes(torch.add(x.to(torch.float32), 0.0))  # -0.0 + 0.0 is +0.0
    idx = torch.nonzero(x).reshape(-1)
    return encode_sparse(int(x.numel()), idx, x[idx])


def _dense_wins(x: torch.Tensor) -> bool:
    """Whether :func:`encode_sparse` would write ``x``'s non-zeros in the dense format."""
    n = int(x.numel())
    k = int(torch.count_nonzero(x)) if n else 0
    return k > coo_max_k(n) and bitmap_bytes(n) + 4 * k >= 4 * n


def seal_nonzeros(x: torch.Tensor, step: int | None, *, n: int, down: bool = False) -> memoryview:
    """``seal(encode_dense_nonzeros(x), step, down, n=n)``, the same bytes.

    On the CPU a dense body is written straight into the payload's host memory (the ``+ 0.0``
    that writes -0.0 as 0.0 is the copy), rather than into a fresh vector copied again.
    """
    dense = _dense_wins(x)
    if x.device.type != "cpu" or not dense:
        return seal(encode_dense_nonzeros(x, dense), step, down, n=n)
    size = 4 * int(x.numel())
    out = host_array(size + CHECKSUM_BYTES, x.device)
    torch.add(x.to(torch.float32), 0.0, out=torch.from_numpy(out[:size]).view(torch.float32))
    _TRAILER.pack_into(out, size, crc32c(out[:size], crc_seed(step, down, counted(n))))
    return frozen(out)


def _floats(body: torch.Tensor) -> torch.Tensor:
    """A uint8 slice read as float32 (copied when it does not start on a 4-byte boundary)."""
    if body.data_ptr() % 4:
        body = body.clone()
    return body.view(torch.float32)


def decode_sparse(body: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """Parse an :func:`encode_sparse` body on its device: ``(indices, values, dense)``.

    For a dense body the indices are None-like (an empty tensor) and the values are the whole
    vector (``dense`` True). Raises ValueError for what
    :func:`psml_core.codecs.formats.decode_sparse` refuses.
    """
    idx, vals, dense, bad = parse_sparse(body, n)
    if bad is not None and bool(bad):
        raise ValueError(COO_ORDER.format(n=n))
    return idx, vals, dense


COO_ORDER = "COO indices must be ascending and in [0, {n})"
"""The error of a COO body whose indices are out of order or range (``.format(n=n)``)."""


def parse_sparse(
    body: torch.Tensor, n: int
) -> tuple[torch.Tensor, torch.Tensor, bool, torch.Tensor | None]:
    """:func:`decode_sparse` without its last host sync: ``(indices, values, dense, bad)``.

    ``bad`` (a 0-d bool tensor, or None when there is nothing to check) is true when a COO
    body's indices are out of order or range (:data:`COO_ORDER`), so that a caller can check
    it in the same sync as its own checks of the values. Raises ValueError for the rest.
    """
    length = int(body.numel())
    device = body.device
    if length == 4 * n:
        return torch.empty(0, dtype=torch.int64, device=device), _floats(body), True, None
    if length <= 8 * coo_max_k(n):
        if length % 8:
            raise ValueError(f"sparse payload of {length} bytes is not a COO list (8 B/entry)")
        k = length // 8
        idx = _floats(body[: 4 * k]).view(torch.int32).to(torch.int64)
        bad = None
        if k:
            bad = (idx[0] < 0) | (idx[-1] >= n)
            if k > 1:
                bad = bad | torch.any(idx[1:] <= idx[:-1])
        return idx, _floats(body[4 * k :]), False, bad
    nb = bitmap_bytes(n)
    if length < nb or (length - nb) % 4:
        raise ValueError(f"payload of {length} bytes is no sparse format of a {n}-vector")
    mask = unpack_bits(body[:nb], n)
    vals = _floats(body[nb:])
    count = int(mask.sum())
    if count != vals.numel():
        raise ValueError(f"bitmap marks {count} entries but {vals.numel()} values follow")
    return torch.nonzero(mask).reshape(-1), vals, False, None


def densify(n: int, idx: torch.Tensor, vals: torch.Tensor, dense: bool) -> torch.Tensor:
    """The dense float32 vector of :func:`decode_sparse`'s result (a fresh tensor)."""
    if dense:
        return vals.clone()
    out = torch.zeros(n, dtype=torch.float32, device=vals.device)
    out[idx] = vals
    return out


def encode_blocks(x: torch.Tensor, blocks: torch.Tensor, block: int) -> torch.Tensor:
    """:func:`psml_core.codecs.formats.encode_blocks` on the device: the records as uint8."""
    n = int(x.numel())
    nblk = block_count(n, block)
    blocks = blocks.to(torch.int64)
    last_partial = n % block != 0 and blocks.numel() > 0 and int(blocks[-1]) == nblk - 1
    full = blocks[:-1] if last_partial else blocks
    rec = torch.empty((full.numel(), block + 1), dtype=torch.float32, device=x.device)
    rec.view(torch.int32)[:, 0] = full.to(torch.int32)
    if full.numel():
        rec[:, 1:] = x[: (n // block) * block].view(-1, block)[full]
    parts = [as_bytes(rec)]
    if last_partial:
        head = torch.full((1,), nblk - 1, dtype=torch.int32, device=x.device)
        parts += [as_bytes(head), as_bytes(x[(nblk - 1) * block :].to(torch.float32))]
    return torch.cat(parts) if len(parts) > 1 else parts[0]


def blocks_sent(x: torch.Tensor, blocks: torch.Tensor, block: int) -> torch.Tensor:
    """What :func:`encode_blocks`'s records decode to: ``x`` on the blocks, zeros elsewhere."""
    n = int(x.numel())
    nblk = block_count(n, block)
    blocks = blocks.to(torch.int64)
    out = torch.zeros(n, dtype=torch.float32, device=x.device)
    last_partial = n % block != 0 and blocks.numel() > 0 and int(blocks[-1]) == nblk - 1
    full = blocks[:-1] if last_partial else blocks
    if full.numel():
        whole = (n // block) * block
        out[:whole].view(-1, block)[full] = x[:whole].view(-1, block)[full]
    if last_partial:
        out[(nblk - 1) * block :] = x[(nblk - 1) * block :]
    return out


def decode_blocks(body: torch.Tensor, n: int, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`psml_core.codecs.formats.decode_blocks` on the device: ``(block ids, dense)``.

    Raises:
        ValueError: for what the NumPy parser refuses.
    """
    length = int(body.numel())
    device = body.device
    nblk = block_count(n, block)
    rec_len = 4 + 4 * block
    tail = n - (nblk - 1) * block if nblk else 0
    out = torch.zeros(n, dtype=torch.float32, device=device)
    if length % rec_len == 0:
        m, has_tail = length // rec_len, False
    elif tail < block and (length - (4 + 4 * tail)) % rec_len == 0 and length >= 4 + 4 * tail:
        m, has_tail = (length - (4 + 4 * tail)) // rec_len, True
    else:
        raise ValueError(f"{length} bytes are no whole number of {block}-element block records")
    recs = _floats(body[: m * rec_len]).view(m, block + 1)
    ids = recs.view(torch.int32)[:, 0].to(torch.int64) & 0xFFFFFFFF
    limit = nblk - 1 if tail < block else nblk
    if m:
        bad = ids[-1] >= limit
        if m > 1:
            bad = bad | torch.any(ids[1:] <= ids[:-1])
        if bool(bad):
            raise ValueError("block ids must be ascending and name whole blocks of the vector")
        out[: (n // block) * block].view(-1, block)[ids] = recs[:, 1:]
    if has_tail:
        off = m * rec_len
        last = int(_floats(body[off : off + 4]).view(torch.int32).to(torch.int64)[0]) & 0xFFFFFFFF
        if last != nblk - 1 or (m and int(ids[-1]) >= last):
            raise ValueError("a short block record must be the vector's last block")
        out[(nblk - 1) * block :] = _floats(body[off + 4 :])
        ids = torch.cat([ids, torch.tensor([nblk - 1], dtype=torch.int64, device=device)])
    return ids, out


_F32_MAX = float(np.finfo(np.float32).max)


def check_tensor(x: torch.Tensor) -> torch.Tensor:
    """:func:`psml_core.codecs.base.check_vector` for a tensor: a contiguous float32 tensor.

    One reduction (``aminmax``: NaN propagates, an infinity is an extreme) and one host sync
    check the whole vector; only a vector that fails is searched for the index to name.

    Raises:
        ValueError: not 1-D, or a non-finite value or one beyond float32's range, naming the
            first offending index.
        TypeError: a non-floating dtype.
    """
    return checked_range(x)[0]


def checked_range(x: torch.Tensor) -> tuple[torch.Tensor, float, float]:
    """:func:`check_tensor` and the extremes it found: ``(x as float32, least, greatest)``."""
    if x.dim() != 1:
        raise ValueError(f"codecs encode 1-D vectors, got shape {tuple(x.shape)}")
    if not torch.is_floating_point(x):
        raise TypeError(f"codecs encode floating-point vectors, got dtype {x.dtype}")
    x = x.detach()
    lo, hi = extremes(x) if x.numel() else (0.0, 0.0)
    finite = math.isfinite(lo) and math.isfinite(hi)
    if not finite or (x.element_size() > 4 and (lo < -_F32_MAX or hi > _F32_MAX)):
        _refuse(x)
    return x.to(torch.float32).contiguous(), lo, hi


def extremes(x: torch.Tensor) -> tuple[float, float]:
    """``x``'s least and greatest values in one reduction and one host sync (NaN: both NaN)."""
    lo, hi = torch.aminmax(x)
    return tuple(torch.stack([lo, hi]).tolist())  # type: ignore[return-value]


def _refuse(x: torch.Tensor) -> NoReturn:
    """Raise the ValueError naming ``x``'s first value that float32 cannot carry."""
    bad = ~torch.isfinite(x)
    if x.element_size() > 4:
        bad = bad | (torch.abs(x) > _F32_MAX)
    i = int(torch.nonzero(bad)[0, 0])
    value = float(x[i])
    if math.isfinite(value):
        raise ValueError(
            f"cannot encode {value!r} at index {i}: beyond float32's range "
            f"(|x| <= {_F32_MAX:.6g}), the wire's value type"
        )
    raise ValueError(f"cannot encode a non-finite value ({value!r} at index {i})")


def check_finite(v: torch.Tensor, message: str) -> None:
    """ValueError(``message``) unless every value is finite (one reduction, one host sync)."""
    if v.numel() and not all(math.isfinite(e) for e in extremes(v)):
        raise ValueError(message)


def as_numpy_mask(mask: torch.Tensor) -> np.ndarray:
    """A device bool tensor as a host NumPy bool array."""
    return mask.cpu().numpy().astype(bool, copy=False)
