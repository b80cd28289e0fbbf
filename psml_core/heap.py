"""The allocator regime every psml process runs in: glibc's malloc thresholds, fixed.

Why: a codec call allocates temporaries of the vector's size (1.2 MB for a 301K-element
gradient). glibc serves an allocation above its mmap threshold (128 kB at start, raised
dynamically when a larger mapped block is freed) with a fresh ``mmap``, so every call
page-faults its temporaries in again and gives them back on free. Measured on the project's
VM at 262,144 elements, the same operation costs about twice as much in a fresh process as in
one whose threshold was raised by an earlier large free: ``none`` ``encode_down`` 3.1 ms
against 1.4 ms, ``topk`` ``encode`` 4.6 ms against 2.4 ms. The calibration (``psml bench
calibrate``) times its small sizes after its large ones, so its table was measured in the
second regime while the dist ranks ran in the first: the simulated clock then charged half of
what the real processes spent.

:func:`configure_heap` puts a process in the second regime deliberately, at its start:
allocations up to 32 MB (glibc's largest mmap threshold on 64-bit) come from the heap and freed
heap memory is kept up to 128 MB before it is trimmed. The ``psml`` command, every rank's
launcher and the calibration call it, so the table and the runs it prices share one regime.
Peak memory is what the run allocates at once plus at most the trim threshold kept free.

A user's own ``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_`` or ``GLIBC_TUNABLES``
wins: nothing is changed then. ``PSML_HEAP=system`` leaves the allocator
alone too. On a C library without ``mallopt`` (macOS, musl) this is a no-op.
"""

from __future__ import annotations

import ctypes
import functools
import os

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "configure_heap"]

MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
TRIM_THRESHOLD = 128 * 1024 * 1024
_M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's <malloc.h>
_M_MMAP_THRESHOLD = -3
_USER_TUNABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


@functools.cache
def configure_heap() -> bool:
    """Fix glibc's mmap and trim thresholds for this process (once); see the module docstring.

    Returns:
        True when the thresholds are set (now or by an earlier call), False when they were left
        alone: ``PSML_HEAP=system``, a user's malloc tunable in the environment, or no glibc.
    """
    if os.environ.get("PSML_HEAP", "").strip().lower() == "system":
        return False
    if any(os.environ.get(name) for name in _USER_TUNABLES):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own symbols: libc's, no search
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mallopt answers 1 on success; the trim threshold first, as setting either disables
    # glibc's dynamic adjustment of both.
    ok = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    return mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and ok
