"""A flow-level network model on SimPy: full-duplex NICs shared max-min fairly.

Every machine has an egress and an ingress link of the scenario's bandwidth. A message from
machine a to machine b is a flow over (egress a, ingress b). Concurrent flows share each link
max-min fairly (progressive filling), so P workers pushing to one server split its ingress
bandwidth: the server-NIC contention the specs ask for. A message costs

    per-message overhead  +  (payload + header bytes) at the fair-share rate  +  latency,

and a message between a worker and its colocated shard (same machine) costs nothing on the wire.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

__all__ = ["FairShareNetwork", "max_min_rates"]

_EPS = 1e-9


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


@dataclass
class _Flow:
    links: tuple[int, int]
    size: float
    remaining: float
    done: simpy.Event
    rate: float = 0.0


@dataclass
class FairShareNetwork:
    """Machines with full-duplex NICs on a non-blocking core; see the module docstring.

    Args:
        env: The SimPy environment.
        machines: Number of machines.
        bandwidth_Bps: NIC bandwidth per direction, bytes per second.
        latency_s: One-way latency per message, seconds.
        overhead_s: Per-message software overhead, seconds.
        header_bytes: Bytes added to every message on the wire.
        bandwidth_steps: ``(at_s, bytes_per_s)`` pairs: the NIC bandwidth from that simulated
            time on. Flows in progress continue at the new fair-share rates.
    """

    env: simpy.Environment
    machines: int
    bandwidth_Bps: float
    latency_s: float
    overhead_s: float
    header_bytes: int = 0
    bandwidth_steps: tuple[tuple[float, float], ...] = ()
    _flows: dict[int, _Flow] = field(default_factory=dict)
    _next_id: int = 0
    _last: float = 0.0
    _generation: int = 0

    def __post_init__(self) -> None:
        for at, bps in sorted(self.bandwidth_steps):
            self.env.process(self._change_bandwidth(at, bps))

    def _change_bandwidth(self, at: float, bps: float) -> Generator[Any, Any, None]:
        yield self.env.timeout(at)
        self._advance()
        self.bandwidth_Bps = bps
        self._reschedule()

    def transfer(
        self, src: int, dst: int, nbytes: int, extra_delay_s: float = 0.0
    ) -> simpy.Process:
        """Send ``nbytes`` from machine ``src`` to ``dst``; the process ends on arrival.

        Args:
            src: Sending machine.
            dst: Receiving machine.
            nbytes: Payload bytes (the header is added).
            extra_delay_s: Delay on top of the latency (from a delay process).
        """
        return self.env.process(self._transfer(src, dst, nbytes, extra_delay_s))

    def wire_bytes(self, nbytes: int) -> int:
        """Bytes a message of ``nbytes`` payload occupies on the wire (header included)."""
        return nbytes + self.header_bytes

    def _transfer(
        self, src: int, dst: int, nbytes: int, extra_delay_s: float
    ) -> Generator[Any, Any, None]:
        if src == dst:
            return
        if self.overhead_s:
            yield self.env.timeout(self.overhead_s)
        size = self.wire_bytes(nbytes)
        if size > 0:
            done = self.env.event()
            self._advance()
            # Egress links are 0..M-1, ingress links M..2M-1.
            self._flows[self._next_id] = _Flow(
                (src, self.machines + dst), float(size), float(size), done
            )
            self._next_id += 1
            self._reschedule()
            yield done
        if self.latency_s + extra_delay_s:
            yield self.env.timeout(self.latency_s + extra_delay_s)

    def _advance(self) -> None:
        dt = self.env.now - self._last
        if dt > 0:
            for f in self._flows.values():
                f.remaining -= f.rate * dt
        self._last = self.env.now

    def _reschedule(self) -> None:
        if not self._flows:
            return
        cap = float(self.bandwidth_Bps)
        links = {link for f in self._flows.values() for link in f.links}
        rates = max_min_rates(
            {fid: f.links for fid, f in self._flows.items()}, dict.fromkeys(links, cap)
        )
        for fid, f in self._flows.items():
            f.rate = rates[fid]
        nxt = min(max(f.remaining, 0.0) / f.rate for f in self._flows.values())
        self._generation += 1
        self.env.process(self._wake(self._generation, nxt))

    def _wake(self, generation: int, delay: float) -> Generator[Any, Any, None]:
        yield self.env.timeout(delay)
        if generation != self._generation:
            return  # superseded by a later change of the flow set
        self._advance()
        # Relative tolerance: the flow that set this wake-up has only rounding error left.
        finished = [fid for fid, f in self._flows.items() if f.remaining <= _EPS * f.size]
        for fid in finished:
            self._flows.pop(fid).done.succeed()
        self._reschedule()
