"""psml_core.heap: the allocator regime, checked by page faults (never by time)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

# 60 times what a dense encode does with a 301K-element gradient: its index list (2.4 MB), the
# values it picks (1.2 MB) and their bytes (1.2 MB), all freed at the end; prints the minor page
# faults this took, with or without configure_heap first. glibc's dynamic thresholds trim the
# freed heap top (over twice the largest mapped block freed) back to the system every time.
_PROBE = """
import json, resource, sys
import numpy as np
from psml_core.heap import configure_heap
ok = configure_heap() if sys.argv[1] == "on" else None
x = np.ones(301_066, dtype=np.float32)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(60):
    idx = np.flatnonzero(x)
    vals = x[idx]
    raw = vals.tobytes()
    del idx, vals, raw
after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
print(json.dumps({"set": ok, "faults": after - before}))
"""

glibc = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="mallopt's thresholds are glibc's",
)


def _probe(mode: str, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "PSML_HEAP"))}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, mode],
        env=clean | env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


@glibc
def test_configured_heap_reuses_freed_vectors_instead_of_faulting_them_in_again() -> None:
    off, on = _probe("off"), _probe("on")
    assert on["set"] is True
    # Unconfigured, the temporaries' ~1,200 pages are faulted in again on every round.
    assert off["faults"] > 60 * 500, off
    # Configured, the first allocation faults its pages in and every later one reuses them.
    assert on["faults"] < 3_000, on


@glibc
def test_a_users_own_malloc_setting_or_psml_heap_system_wins() -> None:
    assert _probe("on", PSML_HEAP="system")["set"] is False
    assert _probe("on", MALLOC_MMAP_THRESHOLD_="131072")["set"] is False
