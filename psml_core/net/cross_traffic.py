"""Cross-traffic: competing flows that share the NICs with the run's own messages.

A delay process (:mod:`psml_core.net.delay`) adds a latency that no amount of compression can
shorten. Cross-traffic instead takes bandwidth: a machine's NIC link (egress or ingress) that
carries ``c`` competing flows gives each of the run's messages on it at most ``B / (c + 1)``, so
a message's transfer time grows with its bytes *and* with the current competition, and a
compressed message spends less time in it. This is the delay that DC2 measures and reacts to.

Model and assumptions:

* Competing flows are long-lived elastic flows (bulk TCP-like transfers of other tenants) with
  unbounded demand. Each crosses one NIC link of the run (its other end is outside the run and
  never the bottleneck), and they share every link max-min fairly with the run's messages: the
  :class:`~psml_core.net.network.FairShareNetwork` counts them in its progressive filling.
* The number of competing flows on every link is a step function of simulated time, derived
  from the run seed and the time alone (lazy seeded blocks, as in :mod:`psml_core.net.delay`),
  so a run resumed from a checkpoint sees the same competition as one that never stopped, and
  the network wakes only when the count actually changes.

Kinds (a scenario's ``cross_traffic`` entry, ``kind`` plus the constructor's parameters):

* ``constant``: ``flows`` competing flows on every NIC direction, always;
* ``markov``: a two-state chain over competing-flow counts (``flows: [0, 9]``) that switches
  state with probability ``switch_prob`` every ``period_ms``: the high delay variation scenario;
* ``poisson``: an independent Poisson(``mean``) count every ``period_ms``: low delay variation;
* ``trace``: counts read from a CSV file with columns ``time_s,flows``.

``markov`` and ``poisson`` take ``scope``: ``shared`` (one chain for the whole network: a
congested core or WAN path that every NIC direction sees) or ``per_machine`` (each machine's NIC,
egress and ingress, has its own chain, seeded by (seed, machine)).

Tuning: with ``c`` competing flows a lone message gets ``1 / (c + 1)`` of the link, so
``flows: [0, 9]`` makes the available bandwidth drop 10x in the high state, and the transfer
time of a message of ``n`` bytes rise from ``n / B`` to ``10 n / B``. Pick ``period_ms`` near
the iteration time and ``switch_prob`` for the mean sojourn ``period_ms / switch_prob`` you want
(0.05 per 100 ms: a state lasts 2 s on average). Competitors are counted per link and share it
with the run's own messages: where ``P`` workers push to one server at once, each message gets
``B / (P + c)`` of the server's ingress, so ``c`` must be large next to ``P`` (about ``9 P``) for
the same 10x drop there; on the workers' own links ``c`` counts as is.
"""

from __future__ import annotations

import csv
import math
import numbers
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from psml_core.errors import ConfigError, DataError
from psml_core.registry import Registry

__all__ = ["CROSS_TRAFFIC", "CrossTraffic", "make_cross_traffic"]

_SCOPES = ("shared", "per_machine")


class CrossTraffic(ABC):
    """Competing flows on every NIC link, as a step function of simulated time.

    Links are numbered as in the network: machine ``m``'s egress is link ``m``, its ingress
    link ``machines + m``.

    Args:
        seed: Run seed.
        machines: Number of machines of the run.
    """

    name: ClassVar[str]

    def __init__(self, seed: int, machines: int) -> None:
        if machines < 1:
            raise ConfigError(f"cross_traffic {self.name!r}: needs machines >= 1, got {machines}")
        self.seed = seed
        self.machines = machines

    @abstractmethod
    def link_flows(self, t: float) -> np.ndarray:
        """Competing flows on every link at time ``t`` (int64 array of ``2 * machines``).

        The counts hold on ``[t0, next_change(t0))`` for every change time ``t0``; a change at
        exactly ``t`` is in force at ``t``. The array is the caller's to keep.
        """

    @abstractmethod
    def next_change(self, t: float) -> float:
        """The first time after ``t`` (strictly) at which the counts may change; inf if never.

        A few kinds may return a time at which nothing changes (rarely: at most once per
        several thousand periods); the caller finds the same counts there.
        """

    def at(self, machine: int, t: float) -> tuple[int, int]:
        """Competing flows on ``machine``'s (egress, ingress) at time ``t``."""
        if not 0 <= machine < self.machines:
            raise IndexError(f"machine {machine} not in 0..{self.machines - 1}")
        flows = self.link_flows(t)
        return int(flows[machine]), int(flows[self.machines + machine])


CROSS_TRAFFIC: Registry[type[CrossTraffic]] = Registry("cross-traffic kind")


def _count(kind: str, what: str, value: Any) -> int:
    """A competing-flow count from the config: an integer >= 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value != int(value)
    ):
        raise ConfigError(f"cross_traffic {kind!r}: {what} must be an integer, got {value!r}")
    if value < 0:
        raise ConfigError(f"cross_traffic {kind!r}: {what} must be >= 0, got {value!r}")
    return int(value)


@CROSS_TRAFFIC.register("constant")
class ConstantCrossTraffic(CrossTraffic):
    """The same number of competing flows on every NIC direction, always.

    Args:
        seed: Unused (every kind takes the run seed).
        machines: Number of machines.
        flows: Competing flows per link (0: no cross-traffic; 1: half the bandwidth).
    """

    def __init__(self, seed: int, machines: int, flows: int = 0) -> None:
        super().__init__(seed, machines)
        self.flows = _count(self.name, "flows", flows)

    def link_flows(self, t: float) -> np.ndarray:
        """The constant on every link."""
        return np.full(2 * self.machines, self.flows, dtype=np.int64)

    def next_change(self, t: float) -> float:
        """Never."""
        return math.inf


class _Periodic(CrossTraffic):
    """Counts drawn once per period on one or ``machines`` chains, lazily in seeded blocks.

    Period ``k`` is ``[k * period, (k + 1) * period)``. Chain ``c``'s values for periods
    ``[b * BLOCK, (b + 1) * BLOCK)`` come from a generator keyed by (seed, scope, c, b), and
    blocks are drawn in order (a block may carry state from the previous one), so any time can
    be asked in any order and gets the same answer. Only the changes are stored, as one event
    list (time, chain, new value) sorted by time then chain.
    """

    _BLOCK = 4096
    _TAG = 104729  # keeps these streams apart from the delay processes' (seed, 7919, block)
    _LOOKAHEAD = 4  # blocks next_change draws past the horizon before it gives a no-op time

    def __init__(self, seed: int, machines: int, period_ms: float, scope: str) -> None:
        super().__init__(seed, machines)
        if not (isinstance(period_ms, numbers.Real) and period_ms > 0 and math.isfinite(period_ms)):
            raise ConfigError(
                f"cross_traffic {self.name!r}: period_ms must be > 0, got {period_ms!r}"
            )
        if scope not in _SCOPES:
            raise ConfigError(
                f"cross_traffic {self.name!r}: scope must be one of {', '.join(_SCOPES)}, "
                f"got {scope!r}"
            )
        self.period = float(period_ms) / 1e3
        self.scope = scope
        self.chains = machines if scope == "per_machine" else 1
        self._blocks = 0
        self._horizon = 0.0  # every change before this time is in the event list
        self._carry = np.zeros(self.chains, dtype=np.int64)
        self._initial = np.zeros(self.chains, dtype=np.int64)
        self._n = 0  # events in the list
        self._time = np.empty(0)
        self._chain = np.empty(0, dtype=np.int64)
        self._value = np.empty(0, dtype=np.int64)
        self._applied = 0  # events folded into _state (a cursor: sequential queries are cheap)
        self._state = self._initial.copy()

    @property
    def _static(self) -> bool:
        """Whether the counts never change (then no block past the first is drawn)."""
        return False

    @abstractmethod
    def _draw(self, rng: np.random.Generator, count: int, carry: int, first: bool) -> np.ndarray:
        """One chain's values for the next ``count`` periods (int64), after value ``carry``.

        ``first``: the block starts at period 0 (then ``carry`` is meaningless and the first
        value is the chain's initial one).
        """

    def _extend(self) -> None:
        b, n = self._blocks, self._BLOCK
        k0 = b * n
        times, chains, values = [], [], []
        for c in range(self.chains):
            rng = np.random.default_rng([self.seed, self._TAG, _SCOPES.index(self.scope), c, b])
            vals = self._draw(rng, n, int(self._carry[c]), b == 0)
            if b == 0:
                self._initial[c] = vals[0]
                prev = np.concatenate([vals[:1], vals[:-1]])
            else:
                prev = np.concatenate([self._carry[c : c + 1], vals[:-1]])
            self._carry[c] = vals[-1]
            j = np.flatnonzero(vals != prev)
            times.append((k0 + j).astype(np.float64) * self.period)
            chains.append(np.full(j.size, c, dtype=np.int64))
            values.append(vals[j])
        t, ch, v = np.concatenate(times), np.concatenate(chains), np.concatenate(values)
        order = np.lexsort((ch, t))
        self._append(t[order], ch[order], v[order])
        if b == 0:
            self._state = self._initial.copy()
        self._blocks += 1
        self._horizon = (self._blocks * n) * self.period

    def _append(self, t: np.ndarray, ch: np.ndarray, v: np.ndarray) -> None:
        need = self._n + t.size
        if need > self._time.size:  # amortised doubling: long runs stay linear
            size = max(need, 2 * self._time.size, 1024)
            self._time = np.concatenate([self._time[: self._n], np.empty(size - self._n)])
            self._chain = np.concatenate(
                [self._chain[: self._n], np.empty(size - self._n, dtype=np.int64)]
            )
            self._value = np.concatenate(
                [self._value[: self._n], np.empty(size - self._n, dtype=np.int64)]
            )
        self._time[self._n : need] = t
        self._chain[self._n : need] = ch
        self._value[self._n : need] = v
        self._n = need

    def _ensure(self, t: float) -> None:
        if self._blocks == 0:
            self._extend()
        if self._static:
            return
        if not math.isfinite(t):
            raise ValueError(f"cross-traffic asked at time {t}")
        while self._horizon <= t:
            self._extend()

    def _chain_values(self, t: float) -> np.ndarray:
        self._ensure(t)
        n = int(np.searchsorted(self._time[: self._n], t, side="right"))
        if n < self._applied:  # asked about the past: replay from the start
            self._state, self._applied = self._initial.copy(), 0
        if n > self._applied:
            # The last event of each chain in the slice wins.
            ch = self._chain[self._applied : n][::-1]
            val = self._value[self._applied : n][::-1]
            chains, last = np.unique(ch, return_index=True)
            self._state[chains] = val[last]
            self._applied = n
        return self._state

    def link_flows(self, t: float) -> np.ndarray:
        """Competing flows on every link at time ``t``."""
        vals = self._chain_values(t)
        if self.chains == 1:
            return np.full(2 * self.machines, vals[0], dtype=np.int64)
        return np.concatenate([vals, vals])

    def next_change(self, t: float) -> float:
        """The next period boundary after ``t`` at which some chain changes value."""
        self._ensure(t)
        if self._static:
            return math.inf
        n = int(np.searchsorted(self._time[: self._n], t, side="right"))
        for _ in range(self._LOOKAHEAD):
            if n < self._n:
                break
            self._extend()
        return float(self._time[n]) if n < self._n else self._horizon


@CROSS_TRAFFIC.register("markov")
class MarkovCrossTraffic(_Periodic):
    """A two-state chain over competing-flow counts: the "high delay variation" scenario.

    The chain starts in the first state and, at the start of every period after the first,
    switches state with probability ``switch_prob``. The mean sojourn in a state is
    ``period_ms / switch_prob``.

    Args:
        seed: Run seed.
        machines: Number of machines.
        flows: Competing flows per link in the two states, e.g. ``[0, 9]``: the full bandwidth,
            then a tenth of it.
        switch_prob: Probability of switching state at each period boundary.
        period_ms: Period of the chain, milliseconds.
        scope: ``shared`` (one chain for every NIC direction) or ``per_machine`` (one chain per
            machine, for its egress and ingress, seeded by (seed, machine)).
    """

    def __init__(
        self,
        seed: int,
        machines: int,
        flows: tuple[int, int] | list[int] = (0, 9),
        switch_prob: float = 0.05,
        period_ms: float = 100.0,
        scope: str = "shared",
    ) -> None:
        if not isinstance(flows, list | tuple) or len(flows) != 2:
            raise ConfigError(
                f"cross_traffic 'markov': flows must be two counts [low, high], got {flows!r}"
            )
        if not (isinstance(switch_prob, numbers.Real) and 0.0 <= switch_prob <= 1.0):
            raise ConfigError(
                f"cross_traffic 'markov': switch_prob must be in [0, 1], got {switch_prob!r}"
            )
        self.levels = np.array([_count(self.name, "flows", f) for f in flows], dtype=np.int64)
        self.p = float(switch_prob)
        super().__init__(seed, machines, period_ms, scope)

    @property
    def _static(self) -> bool:
        return self.p == 0.0 or self.levels[0] == self.levels[1]

    def _draw(self, rng: np.random.Generator, count: int, carry: int, first: bool) -> np.ndarray:
        flips = rng.random(count) < self.p
        if first:
            flips[0] = False  # period 0 is in the first state
            state = 0
        else:
            state = 0 if carry == self.levels[0] else 1
        return self.levels[(state + np.cumsum(flips)) % 2]


@CROSS_TRAFFIC.register("poisson")
class PoissonCrossTraffic(_Periodic):
    """An independent Poisson number of competing flows every period: low delay variation.

    Args:
        seed: Run seed.
        machines: Number of machines.
        mean: Mean competing flows per link (e.g. 1: a lone message gets about half the link,
            now alone, now sharing with 2 or 3 others).
        period_ms: How long each draw holds, milliseconds.
        scope: ``shared`` or ``per_machine``, as for ``markov``.
    """

    def __init__(
        self,
        seed: int,
        machines: int,
        mean: float = 1.0,
        period_ms: float = 100.0,
        scope: str = "shared",
    ) -> None:
        if not (isinstance(mean, numbers.Real) and 0.0 <= mean < 1e6):
            raise ConfigError(f"cross_traffic 'poisson': mean must be in [0, 1e6), got {mean!r}")
        self.mean = float(mean)
        super().__init__(seed, machines, period_ms, scope)

    @property
    def _static(self) -> bool:
        return self.mean == 0.0

    def _draw(self, rng: np.random.Generator, count: int, carry: int, first: bool) -> np.ndarray:
        return rng.poisson(self.mean, count).astype(np.int64)


@CROSS_TRAFFIC.register("trace")
class TraceCrossTraffic(CrossTraffic):
    """Competing flows read from a CSV trace with columns ``time_s,flows``, on every link.

    Each row's count holds from its time until the next row's; before the first row, the first
    row's count; after the last, the last.

    Args:
        seed: Unused.
        machines: Number of machines.
        path: The CSV file.
    """

    def __init__(self, seed: int, machines: int, path: str = "") -> None:
        super().__init__(seed, machines)
        p = Path(path)
        if not p.is_file():
            raise DataError(
                f"cross-traffic trace {path!r} does not exist; give scenarios.*.cross_traffic.path"
            )
        times: list[float] = []
        flows: list[int] = []
        with open(p, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            if reader.fieldnames is None or not {"time_s", "flows"} <= set(reader.fieldnames):
                raise DataError(f"{path}: a cross-traffic trace needs the header 'time_s,flows'")
            for line, row in enumerate(reader, start=2):
                try:
                    at, n = float(row["time_s"]), float(row["flows"])
                except (TypeError, ValueError):
                    raise DataError(
                        f"{path} line {line}: expected a time in s and a flow count, got {row!r}"
                    ) from None
                if (
                    not math.isfinite(at)
                    or at < 0
                    or n < 0
                    or n != int(n)
                    or (times and at <= times[-1])
                ):
                    raise DataError(
                        f"{path} line {line}: times must be finite, >= 0 and strictly "
                        "increasing, and flows integers >= 0"
                    )
                times.append(at)
                flows.append(int(n))
        if not times:
            raise DataError(f"{path}: the cross-traffic trace is empty")
        keep = [0] + [i for i in range(1, len(flows)) if flows[i] != flows[i - 1]]
        self.times = np.array([times[i] for i in keep])
        self.flows = np.array([flows[i] for i in keep], dtype=np.int64)

    def link_flows(self, t: float) -> np.ndarray:
        """The count of the last row at or before ``t`` on every link."""
        i = int(np.searchsorted(self.times, t, side="right")) - 1
        return np.full(2 * self.machines, self.flows[max(i, 0)], dtype=np.int64)

    def next_change(self, t: float) -> float:
        """The next row time after ``t`` with a different count."""
        i = int(np.searchsorted(self.times, t, side="right"))
        # Row 0 changes nothing: its count holds before it too.
        i = max(i, 1)
        return float(self.times[i]) if i < self.times.size else math.inf


def make_cross_traffic(
    spec: dict[str, Any] | None, seed: int, machines: int
) -> CrossTraffic | None:
    """The cross-traffic of a scenario's ``cross_traffic`` entry; None for none.

    Args:
        spec: ``{"kind": ..., **constructor parameters}``, or None / empty for no cross-traffic.
        seed: Run seed.
        machines: Number of machines of the run.
    """
    if not spec:
        return None
    params = {k: v for k, v in spec.items() if k != "kind"}
    if "kind" not in spec:
        raise ConfigError(
            "scenarios.*.cross_traffic needs a 'kind'; known cross-traffic kinds: "
            + ", ".join(CROSS_TRAFFIC.names())
        )
    cls = CROSS_TRAFFIC.get(spec["kind"], where="scenarios.*.cross_traffic.kind")
    try:
        return cls(seed, machines, **params)
    except TypeError as exc:
        raise ConfigError(f"cross_traffic {spec['kind']!r}: bad params {params} ({exc})") from None
