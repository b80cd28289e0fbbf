"""Max-min fair rates by progressive filling: the network model's kernel.

:func:`max_min_rates` is the reference, on flows crossing any links; :func:`two_link_rates`
is the simulator's hot path, for flows that each cross their sender's egress and their
receiver's ingress (plus optional competing one-link flows). It runs on Python floats up to
:data:`_FEW_FLOWS` flows and as a Numba-compiled loop above, with the same arithmetic in the
same order in both (the same floats).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import numpy as np

__all__ = ["load_kernel", "max_min_rates", "two_link_rates"]

log = logging.getLogger(__name__)


def max_min_rates(
    flows: dict[int, tuple[int, ...]], capacity: dict[int, float]
) -> dict[int, float]:
    """Max-min fair rates by progressive filling.

    Args:
        flows: Flow id -> the links it crosses.
        capacity: Link id -> capacity (bytes/s).

    Returns:
        Flow id -> rate (bytes/s). Deterministic: ties are broken by link id.
    """
    rates: dict[int, float] = {}
    cap = dict(capacity)
    active = dict(flows)
    while active:
        users: dict[int, list[int]] = {}
        for fid, links in active.items():
            for link in links:
                users.setdefault(link, []).append(fid)
        share = {link: cap[link] / len(fids) for link, fids in users.items()}
        bottleneck = min(share.values())
        for link in sorted(users):
            if share[link] > bottleneck * (1 + 1e-12):
                continue
            for fid in users[link]:
                if fid in active:
                    rates[fid] = bottleneck
                    for other in active.pop(fid):
                        cap[other] -= bottleneck
    return rates


def two_link_rates(
    src: np.ndarray,
    dst: np.ndarray,
    capacity: np.ndarray,
    competing: np.ndarray | None = None,
) -> np.ndarray:
    """Max-min fair rates of flows that each cross exactly two links.

    The same progressive filling as :func:`max_min_rates`, one pass over the flows per
    bottleneck level: the simulator's hot path, with hundreds of concurrent flows at 64
    workers and more.

    Competing flows (cross-traffic) are elastic flows of unbounded demand that cross one link
    each: the same result as :func:`max_min_rates` with each of them a one-link flow. They are
    constrained by their own link only, so they matter only on links that still carry an
    unfrozen flow, and freeze with the flows there when the link saturates.

    Args:
        src: First link of each flow (its sender's egress).
        dst: Second link of each flow (its receiver's ingress).
        capacity: Capacity of every link.
        competing: Competing flows on every link (integers >= 0), or None for none.

    Raises:
        ValueError: Above :data:`_FEW_FLOWS` flows, where the compiled loop (which has no
            bounds checks of its own) runs: a flow's link that is not one of ``capacity``'s,
            or ``competing`` that is not one count per link.
    """
    if src.size <= _FEW_FLOWS:
        return np.array(_few_flow_rates(src.tolist(), dst.tolist(), capacity, competing))
    nlinks = capacity.size
    if competing is None:
        competing = np.zeros(nlinks, dtype=np.int64)
    elif competing.size != nlinks:
        raise ValueError(f"two_link_rates: {competing.size} competing counts for {nlinks} links")
    return load_kernel()(
        np.ascontiguousarray(src, dtype=np.int64),
        np.ascontiguousarray(dst, dtype=np.int64),
        np.ascontiguousarray(capacity, dtype=np.float64),
        np.ascontiguousarray(competing, dtype=np.int64),
        np.empty(src.size),
    )


def _fill(
    src: np.ndarray, dst: np.ndarray, capacity: np.ndarray, competing: np.ndarray,
    rates: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """Progressive filling as plain loops (compiled by :func:`load_kernel`).

    Each level: every link's equal share ``cap / (flows + competing)``, the lowest of them,
    and every unfrozen flow crossing a link within ``1e-12`` of it frozen at that level; then
    each link's capacity loses ``level * frozen flows``. :func:`_few_flow_rates` is this
    arithmetic in this order on Python floats. Compiled code does not check indices: a link
    out of range raises here rather than touching memory outside the arrays.
    """
    n = src.size
    nlinks = capacity.size
    counts = np.zeros(nlinks, dtype=np.int64)
    for i in range(n):
        if not (0 <= src[i] < nlinks and 0 <= dst[i] < nlinks):
            raise ValueError("two_link_rates: a flow's link is not one of the capacities'")
        counts[src[i]] += 1
        counts[dst[i]] += 1
    cap = capacity.copy()
    share = np.empty(nlinks)
    frozen = np.zeros(nlinks, dtype=np.int64)
    todo = np.arange(n)
    left = n
    while left:
        level = np.inf
        for k in range(nlinks):
            if counts[k] > 0:
                share[k] = cap[k] / (counts[k] + competing[k])
                level = min(level, share[k])
            else:
                share[k] = np.inf
        bound = level * _TIGHT
        kept = 0
        for j in range(left):
            i = todo[j]
            a, b = src[i], dst[i]
            if share[a] <= bound or share[b] <= bound:
                rates[i] = level
                frozen[a] += 1
                frozen[b] += 1
            else:
                todo[kept] = i
                kept += 1
        left = kept
        for k in range(nlinks):
            if frozen[k]:
                cap[k] -= level * frozen[k]
                counts[k] -= frozen[k]
                frozen[k] = 0
    return rates


@functools.cache
def load_kernel() -> Callable[..., np.ndarray]:
    """:func:`_fill` compiled by Numba, loaded on first use.

    A run that never has more than :data:`_FEW_FLOWS` flows at once never imports Numba. A
    benchmark calls this up front to keep the one-time load out of its timings: about 0.4 s
    with Numba's cache, 1 to 1.2 s when it compiles (the first time on a machine).

    No ``fastmath``: IEEE arithmetic with no contraction, so the floats are those of the
    Python path. ``cache=True`` keeps the machine code beside the module, or in Numba's
    user-wide cache where the module's directory is read-only, so a process loads it instead
    of compiling. Where no cache can be used (no writable location, or a cache file another
    process left unreadable), the kernel is compiled in memory with a warning on stderr: each
    process then pays the compilation, never the run.

    Returns:
        The compiled kernel: ``kernel(src, dst, capacity, competing, rates) -> rates``, on
        contiguous int64, float64 and int64 arrays, writing into ``rates``.
    """
    import numba

    try:
        return _first_call(numba.njit(cache=True, nogil=True)(_fill))
    except Exception as exc:  # noqa: BLE001 - any cache failure; compiling is always possible
        log.warning(
            "psml: Numba's cache for the fair-share kernel is unusable (%s: %s); compiling it "
            "in memory (about 1 s per process; NUMBA_CACHE_DIR names a writable cache)",
            type(exc).__name__,
            exc,
        )
        return _first_call(numba.njit(cache=False, nogil=True)(_fill))


def _first_call(kernel: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    # Numba loads (or compiles) a specialization at its first call: make it now, with the
    # types two_link_rates passes, so that load_kernel is the whole one-time cost.
    one = np.zeros(1, dtype=np.int64)
    kernel(one, one + 1, np.ones(2), np.zeros(2, dtype=np.int64), np.empty(1))
    return kernel


# A link is at the level when its share is within this factor of it (rounding of equal shares).
_TIGHT = 1.0 + 1e-12

# Up to this many flows the progressive filling runs on Python floats: a simulation's flow set
# is mostly a handful of messages (5 on average with bench_sim's digits MLP at 16 workers), and
# a run that stays at or below never pays Numba's import and load (see load_kernel).
_FEW_FLOWS = 24


def _few_flow_rates(
    src: list[int], dst: list[int], capacity: np.ndarray, competing: np.ndarray | None
) -> list[float]:
    """:func:`two_link_rates` on lists, the same arithmetic in the same order (same floats)."""
    cap: dict[int, float] = {}
    count: dict[int, int] = {}
    for link in (*src, *dst):
        count[link] = count.get(link, 0) + 1
    for link in count:
        cap[link] = float(capacity[link])
    extra = {link: int(competing[link]) for link in count} if competing is not None else None
    rates = [0.0] * len(src)
    todo = list(range(len(src)))
    while todo:
        share = {
            link: cap[link] / (n if extra is None else n + extra[link])
            for link, n in count.items()
            if n > 0
        }
        level = min(share.values())
        bound = level * _TIGHT
        frozen: dict[int, int] = {}
        keep = []
        for i in todo:
            s, d = src[i], dst[i]
            if share[s] <= bound or share[d] <= bound:
                rates[i] = level
                frozen[s] = frozen.get(s, 0) + 1
                frozen[d] = frozen.get(d, 0) + 1
            else:
                keep.append(i)
        for link, n in frozen.items():
            cap[link] -= level * n
            count[link] -= n
        todo = keep
    return rates
