"""Host memory for payloads copied off a torch device: reused, so a copy is only a copy.

A payload's bytes land in host memory once (:func:`~psml_core.codecs.torch_wire.to_host`). A
fresh allocation of tens of megabytes is a new ``mmap`` (glibc maps every block above 32 MiB
anew), and the copy into it pays one page fault per 4 KiB page: a dense ResNet-18 gradient
(44.8 MB) took 25 ms to copy into fresh memory on a 2-vCPU VM where the same copy into memory
already mapped takes 2 to 3 ms. So the payload memory is reused:

* **on a CUDA device**, pinned memory from torch's caching host allocator (which reuses a
  block once its tensor is freed), so the copy is one DMA at the link's speed;
* **on the CPU**, arrays of :data:`POOL` from :data:`MIN_POOLED` bytes on, each back in the
  pool when the last view of it dies (``weakref.finalize``), so a payload that is kept (a
  BSP round waiting for its last push) simply keeps its memory.

A payload holds its buffer as a read-only ``memoryview`` (:func:`frozen`).
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["MIN_POOLED", "PINNED_FROM", "POOL", "HostPool", "frozen", "host_array"]

MIN_POOLED = 1 << 20
"""Bytes from which CPU payload memory comes from :data:`POOL` (smaller: fresh, cheap)."""
PINNED_FROM = 1 << 16
"""Bytes from which a payload copied off a CUDA device lands in pinned memory."""


class HostPool:
    """Host arrays reused once nothing refers to them any more, by size class (1 MiB).

    An array handed out goes back to the pool when its last view dies (``weakref.finalize``
    on the view), so whoever keeps a payload simply keeps its memory. Also the dist wire's
    receive buffers (:mod:`psml_core.engine.torchdist.buffers`).

    Args:
        keep: Free arrays kept per size class (more are let go).
        min_bytes: Smaller requests get plain fresh arrays (cheap below a page-faulting size).
    """

    def __init__(self, keep: int = 16, min_bytes: int = 0) -> None:
        self.keep, self.min_bytes = keep, min_bytes
        self._free: dict[int, list[np.ndarray]] = {}
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> np.ndarray:
        """A writable uint8 array of ``nbytes`` (contents undefined)."""
        if nbytes < self.min_bytes:
            return np.empty(nbytes, dtype=np.uint8)
        cap = -(-nbytes // (1 << 20)) << 20
        with self._lock:
            free = self._free.get(cap)
            base = free.pop() if free else None
        if base is None:
            base = np.empty(cap, dtype=np.uint8)
        view = base[:nbytes]
        weakref.finalize(view, self._give_back, base)
        return view

    def _give_back(self, base: np.ndarray) -> None:
        with self._lock:
            free = self._free.setdefault(base.size, [])
            if len(free) < self.keep:
                free.append(base)


POOL = HostPool()
"""The process's pool of CPU payload memory."""


def host_array(nbytes: int, device: torch.device) -> np.ndarray:
    """Writable host memory (uint8) for ``nbytes`` of a payload copied off ``device``."""
    if device.type == "cuda" and nbytes >= PINNED_FROM:
        import torch  # only a device's payloads come here: the host paths need no torch

        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True).numpy()
    if nbytes >= MIN_POOLED:
        return POOL.take(nbytes)
    return np.empty(nbytes, dtype=np.uint8)


def frozen(arr: np.ndarray) -> memoryview:
    """``arr``'s bytes as a read-only memoryview (which keeps ``arr``'s memory alive)."""
    arr.flags.writeable = False
    return memoryview(arr)
