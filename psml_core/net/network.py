"""A flow-level network model on SimPy: full-duplex NICs shared max-min fairly.

Every machine has an egress and an ingress link of the scenario's bandwidth. A message from
machine a to machine b is a flow over (egress a, ingress b). Concurrent flows share each link
max-min fairly (progressive filling), so P workers pushing to one server split its ingress
bandwidth: the server-NIC contention of a parameter server. A message costs

    per-message overhead  +  (payload + header bytes) at the fair-share rate  +  latency,

and a message between a worker and its colocated shard (same machine) costs nothing on the wire.
The transfer holds the links as long as ``(payload + header bytes) / efficiency`` bytes would:
``efficiency`` is the transport's payload per byte of the link's rate (the scenario's
``wire_efficiency``; TCP/IPv4 at MTU 1500 carries 1448 payload bytes per 1500-byte packet).
The bytes a message is recorded with stay its payload plus header bytes.

Optional cross-traffic (:mod:`psml_core.net.cross_traffic`) adds competing long-lived elastic
flows on the NIC links, a time-varying number per link: they take their max-min fair share of
the link like any message, so a message alone on its bottleneck with ``c`` competitors moves
at ``B / (c + 1)`` and its transfer time grows with its bytes and the competition.

Cost and the rate window. The fair shares are recomputed whenever the set of flows changes,
once per simulated instant (all changes of one instant together). With hundreds of workers
nearly every message starts or ends at an instant of its own, and that recomputation (the
progressive filling, and the flow table's updates around it) is a large part of the
simulator's time. ``rate_window_s`` > 0 recomputes at most once per window while
messages are in flight: a flow that starts inside a window moves from the window's end, and one
that ends frees its bandwidth for the others there, so every message's timing is off by at most
about one window per change it sees. The sim backend sets the window to ``rate_window`` (a
scenario setting, default 0.02) times the scenario's latency, so the error is a small fraction
of the shortest message's own time; ``rate_window: 0`` is the exact fluid model.

Event order. A message is no SimPy process: it is a timeout for its software overhead, then
a row in the flow table, then its arrival event fired ``latency + delay`` after the flow's
last byte (the ``sent`` event of :meth:`FairShareNetwork.send` fires at that last byte).
Events of one simulated instant run in the order they were scheduled (SimPy's heap breaks
ties by insertion). The fair shares of an instant are recomputed by one timeout of zero
delay scheduled at its first change, so every change already queued for that instant is in
it; flows that end together land in ascending slot order (slots are reused lowest first).
Everything is a function of the schedule, so a run is byte-identical whenever it is repeated.
"""

from __future__ import annotations

import functools
import heapq
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import simpy

from psml_core.net.cross_traffic import CrossTraffic
from psml_core.net.fair_share import max_min_rates, two_link_rates

__all__ = ["FairShareNetwork", "max_min_rates", "two_link_rates"]  # the kernels: fair_share.py

_EPS = 1e-9


class _FlowTable:
    """Active flows as parallel arrays (struct of arrays): the hot loops stay in NumPy.

    Slots are reused, lowest first; a free slot has rate 0, so advancing every slot by
    ``rate * dt`` leaves it alone. ``landing`` holds what a flow's end sets off.
    """

    def __init__(self) -> None:
        self.src = np.zeros(0, dtype=np.int64)
        self.dst = np.zeros(0, dtype=np.int64)
        self.size = np.zeros(0)
        self.remaining = np.zeros(0)
        self.rate = np.zeros(0)
        self.active = np.zeros(0, dtype=bool)
        self.landing: list[_Landing | None] = []
        self._free: list[int] = []  # a heap of free slots
        self.count = 0

    def add(self, src: int, dst: int, size: float, landing: _Landing) -> None:
        if not self._free:
            n = self.active.size
            grow = max(16, n)
            self.src = np.concatenate([self.src, np.zeros(grow, dtype=np.int64)])
            self.dst = np.concatenate([self.dst, np.zeros(grow, dtype=np.int64)])
            self.size = np.concatenate([self.size, np.ones(grow)])
            self.remaining = np.concatenate([self.remaining, np.zeros(grow)])
            self.rate = np.concatenate([self.rate, np.zeros(grow)])
            self.active = np.concatenate([self.active, np.zeros(grow, dtype=bool)])
            self.landing.extend([None] * grow)
            self._free.extend(range(n, n + grow))  # ascending: already a heap
        i = heapq.heappop(self._free)
        self.src[i], self.dst[i] = src, dst
        self.size[i] = self.remaining[i] = size
        self.active[i] = True
        self.landing[i] = landing
        self.count += 1

    def remove(self, i: int) -> _Landing:
        self.active[i] = False
        self.rate[i] = 0.0
        self.remaining[i] = 0.0
        landing, self.landing[i] = self.landing[i], None
        heapq.heappush(self._free, i)
        self.count -= 1
        assert landing is not None
        return landing


class _Landing(NamedTuple):
    """What a flow's end sets off: the sender is free, and the message lands a delay later."""

    sent: simpy.Event | None
    arrival: simpy.Event
    delay_s: float


def _fire_after(env: simpy.Environment, event: simpy.Event, delay: float) -> None:
    """Trigger ``event`` (value None) ``delay`` seconds from now: a timeout the caller holds.

    SimPy's own Timeout is exactly this (a successful event scheduled with a delay); an event
    created up front lets the caller wait for an arrival whose time is not yet known. From
    now on the event reports ``triggered``, as a timeout does; it is *processed* (its waiters
    resume) at the arrival. Nothing may read ``triggered`` as "arrived".
    """
    assert delay >= 0, delay
    event._ok = True
    event._value = None
    env.schedule(event, delay=delay)


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
        efficiency: Payload bytes per byte of the links' rate (framing of the transport).
        bandwidth_steps: ``(at_s, bytes_per_s)`` pairs: the NIC bandwidth from that simulated
            time on. Flows in progress continue at the new fair-share rates.
        nic_bandwidth: Machine -> its own NIC bandwidth (bytes/s, both directions), fixed
            whatever the bandwidth steps say.
        nic_latency: Machine -> its own latency (s); a message takes the larger of its two
            endpoints' latencies.
        cross_traffic: Competing flows on the NIC links (None: none). The network asks it
            for the counts in force whenever it recomputes rates, and wakes at its next change
            only while messages are in flight, so an idle network schedules nothing.
        rate_window_s: The fair shares are recomputed at most once per this much simulated
            time while messages are in flight (0: at every instant the flow set changes, the
            exact fluid model). The first change after a quiet window is applied at once; later
            ones wait for the window's end, so every flow's start and end reach the other
            flows' rates at most ``rate_window_s`` late (a new flow waits that long at most
            before it moves). See the module docstring.
    """

    env: simpy.Environment
    machines: int
    bandwidth_Bps: float
    latency_s: float
    overhead_s: float
    header_bytes: int = 0
    efficiency: float = 1.0
    bandwidth_steps: tuple[tuple[float, float], ...] = ()
    nic_bandwidth: dict[int, float] = field(default_factory=dict)
    nic_latency: dict[int, float] = field(default_factory=dict)
    cross_traffic: CrossTraffic | None = None
    rate_window_s: float = 0.0
    _flows: _FlowTable = field(default_factory=_FlowTable)
    _last: float = 0.0
    _generation: int = 0
    _pending: bool = False
    _held: float = -math.inf  # the last recomputation while messages were in flight
    _epoch: int = 0  # bumped when the network goes idle: a pending recomputation is void
    _ct_flows: np.ndarray | None = None  # competing flows per link now
    _ct_next: float = -math.inf  # when they next change: before it, _ct_flows holds
    _capacity: np.ndarray | None = None  # every link's capacity (bytes/s), rebuilt on a step

    def __post_init__(self) -> None:
        # A simulation resumed from a checkpoint starts later: past steps are in force already.
        start = self.env.now
        for at, bps in sorted(self.bandwidth_steps):
            if at < start:
                self.bandwidth_Bps = bps
            else:
                step = self.env.timeout(at - start)
                step.callbacks.append(functools.partial(self._change_bandwidth, bps))

    def _change_bandwidth(self, bps: float, _: simpy.Event) -> None:
        self._advance()
        self.bandwidth_Bps = bps
        self._capacity = None
        self._reschedule_soon()

    def transfer(self, src: int, dst: int, nbytes: int, extra_delay_s: float = 0.0) -> simpy.Event:
        """Send ``nbytes`` from machine ``src`` to ``dst``; the event fires on arrival.

        Args:
            src: Sending machine.
            dst: Receiving machine.
            nbytes: Payload bytes (the header is added).
            extra_delay_s: Delay on top of the latency (from a delay process).
        """
        arrival = self.env.event()
        self._start(src, dst, nbytes, extra_delay_s, None, arrival)
        return arrival

    def send(
        self, src: int, dst: int, nbytes: int, extra_delay_s: float = 0.0
    ) -> tuple[simpy.Event, simpy.Event]:
        """Like :meth:`transfer`, with an event for when the message has left ``src``'s NIC.

        The sender is free then (a socket's send completes once the bytes are handed over,
        and what it sends next queues behind them); the second event fires on arrival.
        """
        sent, arrival = self.env.event(), self.env.event()
        self._start(src, dst, nbytes, extra_delay_s, sent, arrival)
        return sent, arrival

    def wire_bytes(self, nbytes: int) -> int:
        """Bytes a message of ``nbytes`` payload occupies on the wire (header included)."""
        return nbytes + self.header_bytes

    def _start(
        self,
        src: int,
        dst: int,
        nbytes: int,
        extra_delay_s: float,
        sent: simpy.Event | None,
        arrival: simpy.Event,
    ) -> None:
        # A message is no process: a timeout for its software overhead, a flow in the table,
        # and its arrival fired a delay after the flow ends (see "Event order" above).
        if src == dst:
            if sent is not None:
                sent.succeed()
            arrival.succeed()
            return
        latency = max(
            self.nic_latency.get(src, self.latency_s), self.nic_latency.get(dst, self.latency_s)
        )
        landing = _Landing(sent, arrival, latency + extra_delay_s)
        size = self.wire_bytes(nbytes) / self.efficiency
        if self.overhead_s:
            ready = self.env.timeout(self.overhead_s)
            ready.callbacks.append(functools.partial(self._enter, src, dst, size, landing))
        else:
            self._enter(src, dst, size, landing)

    def _enter(self, src: int, dst: int, size: float, landing: _Landing, _: object = None) -> None:
        if size <= 0:
            self._land(landing)
            return
        self._advance()
        # Egress links are 0..M-1, ingress links M..2M-1.
        self._flows.add(src, self.machines + dst, float(size), landing)
        self._reschedule_soon()

    def _land(self, landing: _Landing) -> None:
        if landing.sent is not None:
            landing.sent.succeed()
        if landing.delay_s:
            _fire_after(self.env, landing.arrival, landing.delay_s)
        else:
            landing.arrival.succeed()

    def _advance(self) -> None:
        now = self.env.now
        dt = now - self._last
        if dt > 0 and self._flows.count:
            f = self._flows
            f.remaining -= f.rate * dt  # free slots have rate 0
        self._last = now

    def _reschedule_soon(self) -> None:
        # Many flows start or end at the same instant (a BSP round): recompute the fair shares
        # once, after every event already queued for this instant, instead of once per flow;
        # with a rate window, once per window.
        if not self._pending:
            self._pending = True
            wait = max(0.0, self._held + self.rate_window_s - self.env.now)
            due = self.env.timeout(wait)
            due.callbacks.append(functools.partial(self._deferred, self._epoch))

    def _deferred(self, epoch: int, _: simpy.Event) -> None:
        if epoch != self._epoch:
            return  # the network went idle meanwhile: nothing to recompute
        self._pending = False
        self._advance()
        if self.rate_window_s:
            self._held = self.env.now
        self._reschedule()

    def _went_idle(self) -> None:
        # No flow left: the next message starts a fresh window, exactly as in a new network
        # (a run resumed from a checkpoint, taken when nothing is in flight, stays identical).
        self._held = -math.inf
        if self._pending:
            self._pending = False
            self._epoch += 1

    def _link_capacity(self) -> np.ndarray:
        if self._capacity is None:
            capacity = np.full(2 * self.machines, float(self.bandwidth_Bps))
            for m, bps in self.nic_bandwidth.items():
                capacity[m] = capacity[self.machines + m] = bps
            self._capacity = capacity
        return self._capacity

    def _reschedule(self) -> None:
        f = self._flows
        if not f.count:
            return
        live = np.flatnonzero(f.active)
        now = self.env.now
        if self.cross_traffic is not None and self._ct_next <= now:
            self._set_competition(now)  # a change passed while no message was in flight
        capacity = self._link_capacity()
        f.rate[live] = two_link_rates(f.src[live], f.dst[live], capacity, self._ct_flows)
        nxt = float(np.min(np.maximum(f.remaining[live], 0.0) / f.rate[live]))
        change = None
        if self.cross_traffic is not None and self._ct_next - now <= nxt:
            # Wake at the next change of competition rather than at the next completion.
            change, nxt = self._ct_next, max(self._ct_next - now, 0.0)
        self._generation += 1
        wake = self.env.timeout(nxt)
        wake.callbacks.append(functools.partial(self._wake, self._generation, change))

    def _set_competition(self, at: float) -> None:
        assert self.cross_traffic is not None
        self._ct_flows = self.cross_traffic.link_flows(at)
        self._ct_next = self.cross_traffic.next_change(at)

    def _wake(self, generation: int, change: float | None, _: simpy.Event) -> None:
        if generation != self._generation:
            return  # superseded by a later change of the flow set
        self._advance()
        if change is not None:
            # The competition changes now. Query at the change's own time, not at `now`: the
            # clock may sit an ulp short of it after `now + (change - now)`.
            self._set_competition(change)
        f = self._flows
        # Relative tolerance: the flow that set this wake-up has only rounding error left. A
        # flow whose remainder would drain within the clock's resolution at `now` is done too:
        # late in a long run `now + dt == now` for such a dt, and waiting for it never ends.
        tick = 4.0 * float(np.spacing(max(self.env.now, 1.0)))
        left = f.remaining <= np.maximum(_EPS * f.size, f.rate * tick)
        for i in np.flatnonzero(f.active & left).tolist():  # ascending slot order
            self._land(f.remove(i))
        if self.rate_window_s and not f.count:
            self._went_idle()
        else:
            self._reschedule_soon()
