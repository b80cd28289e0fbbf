"""Max-min fair rates by progressive filling: the network model's kernel.

:func:`max_min_rates` is the reference, on flows crossing any links; :func:`two_link_rates`
is the simulator's hot path, for flows that each cross their sender's egress and their
receiver's ingress (plus optional competing one-link flows), vectorised in NumPy and run on
Python floats below :data:`_FEW_FLOWS` flows, with the same arithmetic in the same order.
"""

from __future__ import annotations

import numpy as np

__all__ = ["max_min_rates", "two_link_rates"]


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
    """Max-min fair rates of flows that each cross exactly two links, vectorised.

    The same progressive filling as :func:`max_min_rates`, one NumPy pass per bottleneck level
    instead of per flow: the simulator's hot path with hundreds of concurrent flows.

    Competing flows (cross-traffic) are elastic flows of unbounded demand that cross one link
    each: the same result as :func:`max_min_rates` with each of them a one-link flow. They are
    constrained by their own link only, so they matter only on links that still carry an
    unfrozen flow, and freeze with the flows there when the link saturates.

    Args:
        src: First link of each flow (its sender's egress).
        dst: Second link of each flow (its receiver's ingress).
        capacity: Capacity of every link.
        competing: Competing flows on every link (integers >= 0), or None for none.
    """
    # The unfrozen flows are kept compacted (s, d, idx) so each level touches only them, and
    # the per-link flow counts are updated by the frozen flows instead of recounted.
    if src.size <= _FEW_FLOWS:
        return np.array(_few_flow_rates(src.tolist(), dst.tolist(), capacity, competing))
    nlinks = capacity.size
    counts = np.bincount(src, minlength=nlinks) + np.bincount(dst, minlength=nlinks)
    share = np.empty(nlinks)
    level, tight = _lowest_share(capacity, counts, competing, share)
    freeze = tight[src] | tight[dst]
    # The first level in closed form: a flow's rate is its tighter link's equal share. When
    # every flow crosses a link at the lowest share (a round's symmetric pushes or pulls),
    # that level is the whole answer; so is any level that freezes every flow left.
    if freeze.all():
        return np.full(src.size, level)
    rates = np.zeros(src.size)
    cap = capacity.astype(np.float64)  # a copy
    s, d, idx = src, dst, np.arange(src.size)
    while True:
        rates[idx[freeze]] = level
        frozen = np.bincount(s[freeze], minlength=nlinks) + np.bincount(d[freeze], minlength=nlinks)
        cap -= level * frozen
        counts -= frozen
        keep = ~freeze
        s, d, idx = s[keep], d[keep], idx[keep]
        level, tight = _lowest_share(cap, counts, competing, share)
        freeze = tight[s] | tight[d]
        if freeze.all():
            rates[idx] = level
            return rates


def _lowest_share(
    cap: np.ndarray, counts: np.ndarray, competing: np.ndarray | None, share: np.ndarray
) -> tuple[float, np.ndarray]:
    """One level of progressive filling: the lowest equal share, and the links at it.

    ``share`` is filled in place (a link without flows is at infinity).
    """
    share.fill(np.inf)
    np.divide(cap, counts if competing is None else counts + competing, out=share,
              where=counts > 0)  # fmt: skip
    level = share.min()
    return level, share <= level * (1 + 1e-12)


# Below this many flows the progressive filling runs on Python floats: a simulation's flow set
# is mostly a handful of messages (5 on average with bench_sim's digits MLP at 16 workers),
# where NumPy's per-call cost is most of the work.
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
        bound = level * (1 + 1e-12)
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
