"""CRC-32C computed on a torch device, equal to the host's ``integrity.crc32c(body, seed)``.

The payload trailer of :mod:`~psml_core.codecs.integrity` on the device where a payload is
packed, so that the sealed payload crosses to the host in one copy (``PSML_DEVICE_CRC=1``,
:data:`~psml_core.codecs.torch_wire.DEVICE_CRC`; by default the host seals the copied bytes
with its CRC instruction, which measured faster).

Algorithm (a CRC is linear over GF(2)): with a zero starting register, a byte ``b`` at
distance ``d`` from the end of the message contributes ``M^d(T[b])`` to the final register,
``T`` being the byte table of the reflected polynomial :data:`POLY` (Castagnoli's) and ``M``
the register update for a zero byte. The tables below work for any reflected polynomial. So

1. the message is padded in front with zeros (which leave a zero register unchanged) to whole
   chunks of :data:`CHUNK` bytes, and each chunk's register is the XOR of one table lookup per
   byte, ``T_k[b]`` for the byte at distance ``k`` from the chunk's end (a gather and an XOR
   tree);
2. the chunk registers combine the same way, chunk ``j`` of ``m`` shifted by
   ``M^(CHUNK (m - 1 - j))``: groups of :data:`CHUNK` registers, each mapped through byte
   tables of its shift (four lookups), XORed, and so on up until one register is left;
3. a starting value ``c`` (the continued CRC's ``seed ^ 0xFFFFFFFF``) is the same as XORing
   ``c``'s four little-endian bytes into the message's first four bytes, and the result is
   inverted.

The tables are built once per process with NumPy (a few tenths of a second) and copied to each
device once. Messages shorter than four bytes are computed on the host.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from psml_core.codecs.integrity import crc32c as host_crc32c

__all__ = ["CHUNK", "POLY", "crc32c", "crc32c_bytes"]

CHUNK = 1024
"""Bytes (and, above, registers) combined per level."""
POLY = 0x82F63B78
"""CRC-32C's polynomial (Castagnoli), bit-reflected: the trailer of :mod:`.integrity`."""
_LEVELS = 4  # chunks of 1024 ** 4 bytes: a message of up to 1 TiB


def _byte_table() -> np.ndarray:
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(POLY), t >> 1).astype(np.uint32)
    return t


_T = _byte_table()


def _zero_byte(c: np.ndarray) -> np.ndarray:
    """``M``: the register after one more zero byte (vectorised)."""
    return (_T[c & 0xFF] ^ (c >> 8)).astype(np.uint32)


def _apply(tabs: np.ndarray, v: np.ndarray) -> np.ndarray:
    """A linear map given by its 4 x 256 byte tables, applied to registers ``v``."""
    out = tabs[0][v & 0xFF]
    for t in range(1, 4):
        out = out ^ tabs[t][(v >> (8 * t)) & 0xFF]
    return out


_BASIS = np.arange(256, dtype=np.uint32)[None, :] << (8 * np.arange(4, dtype=np.uint32))[:, None]
"""``b << 8t`` for every byte ``b`` and position ``t``: the images of these are a map's tables."""


def _zero_bytes(v: np.ndarray, count: int) -> np.ndarray:
    for _ in range(count):
        v = _zero_byte(v)
    return v


@functools.lru_cache(maxsize=1)
def _host_tables() -> tuple[np.ndarray, list[np.ndarray]]:
    """The lookup tables, as int32 bit patterns.

    Level 0, ``[k, b]``: ``M^k(T[b])``, a byte ``b`` at distance ``k`` from its chunk's end.
    Level ``l >= 1``, ``[q, t, b]``: the byte tables of ``A_l^q`` with ``A_l = M^(CHUNK^l)``,
    a register at distance ``q`` from its group's end.
    """
    first = np.empty((CHUNK, 256), dtype=np.uint32)
    first[0] = _T
    for k in range(1, CHUNK):
        first[k] = _zero_byte(first[k - 1])
    base = _zero_bytes(_BASIS.reshape(-1), CHUNK).reshape(4, 256)  # tables of M^CHUNK
    levels = []
    for _ in range(_LEVELS):
        maps = np.empty((CHUNK, 4, 256), dtype=np.uint32)
        maps[0] = _BASIS  # the identity
        for q in range(1, CHUNK):
            maps[q] = _apply(base, maps[q - 1].reshape(-1)).reshape(4, 256)
        levels.append(maps.view(np.int32))
        base = _apply(base, maps[-1].reshape(-1)).reshape(4, 256)  # A^CHUNK: the next level
    return first.view(np.int32), levels


@functools.lru_cache(maxsize=8)
def _device_tables(device: torch.device) -> tuple[torch.Tensor, list[torch.Tensor]]:
    first, levels = _host_tables()
    return (
        torch.from_numpy(first.reshape(-1).copy()).to(device),
        [torch.from_numpy(t.reshape(-1).copy()).to(device) for t in levels],
    )


def _xor_tree(x: torch.Tensor) -> torch.Tensor:
    """XOR over the last axis (a power of two long) by halving."""
    while x.shape[-1] > 1:
        h = x.shape[-1] // 2
        x = torch.bitwise_xor(x[..., :h], x[..., h:])
    return x[..., 0]


@functools.lru_cache(maxsize=8)
def _offsets(device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gather offsets: a byte at distance k from its chunk's end reads table row k."""
    dist = torch.arange(CHUNK - 1, -1, -1, dtype=torch.int64, device=device)
    per_byte = dist * 256
    per_word = (dist[:, None] * 1024 + torch.arange(4, device=device)[None, :] * 256).to(
        torch.int64
    )
    shifts = torch.arange(0, 32, 8, dtype=torch.int32, device=device)
    return per_byte, per_word, shifts


def _pad_front(x: torch.Tensor, size: int) -> torch.Tensor:
    if x.numel() == size:
        return x
    out = torch.zeros(size, dtype=x.dtype, device=x.device)
    out[size - x.numel() :] = x
    return out


def crc32c(body: torch.Tensor, seed: int) -> torch.Tensor:
    """``integrity.crc32c(body, seed)`` of a uint8 tensor: a one-element int32 on its device.

    The int32 holds the CRC's 32 bits (its little-endian bytes are the trailer's). Bodies of
    fewer than four bytes are computed on the host.
    """
    n = int(body.numel())
    device = body.device
    if n < 4:
        crc = host_crc32c(body.cpu().numpy(), seed)
        return torch.tensor([crc], dtype=torch.int64, device=device).to(torch.int32)
    first, levels = _device_tables(device)
    per_byte, per_word, shifts = _offsets(device)
    m = -(-n // CHUNK)
    buf = _pad_front(body, m * CHUNK)
    if buf is body:
        buf = body.clone()  # the first bytes are changed below
    start = m * CHUNK - n
    c = (seed ^ 0xFFFFFFFF) & 0xFFFFFFFF
    for i in range(4):  # the starting register enters as the first four bytes' XOR
        if (c >> (8 * i)) & 0xFF:
            buf[start + i] ^= (c >> (8 * i)) & 0xFF
    regs = _xor_tree(first[buf.view(m, CHUNK).to(torch.int64) + per_byte])
    for table in levels:
        if regs.numel() == 1:
            break
        k = -(-regs.numel() // CHUNK)
        r = _pad_front(regs, k * CHUNK).view(k, CHUNK, 1)
        idx = ((r >> shifts) & 0xFF).to(torch.int64) + per_word
        regs = _xor_tree(_xor_tree(table[idx]))
    if regs.numel() != 1:
        raise ValueError(f"a {n}-byte message is beyond the device CRC's {_LEVELS} levels")
    return torch.bitwise_xor(regs, -1)


def crc32c_bytes(body: torch.Tensor, seed: int) -> torch.Tensor:
    """The 4-byte little-endian trailer of :func:`crc32c`, as a uint8 tensor on the device."""
    return crc32c(body, seed).view(torch.uint8)
