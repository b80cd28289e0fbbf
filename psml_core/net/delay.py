"""Delay processes: extra one-way latency per iteration, netem-style, seeded and reproducible.

Each process maps a training iteration to an extra delay (seconds) that every message of that
iteration experiences on top of the link latency. DC2's scenarios:

* low delay variation: ``normal`` with mean 5 ms, sd 1 ms (truncated at 0);
* high delay variation: ``markov``, a two-state chain between 1 ms and 100 ms that switches
  state with probability 0.05 per iteration;
* a measured trace: ``trace``, a CSV file with columns ``step,delay_ms``.
"""

from __future__ import annotations

import csv
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from psml_core.errors import ConfigError, DataError
from psml_core.registry import Registry

__all__ = ["DELAYS", "DelayProcess", "make_delay"]


class DelayProcess(ABC):
    """Extra delay of every message of an iteration."""

    name: ClassVar[str]

    @abstractmethod
    def delay_s(self, step: int) -> float:
        """The extra one-way delay (seconds) of messages of iteration ``step`` (>= 0)."""


DELAYS: Registry[type[DelayProcess]] = Registry("delay process")


@DELAYS.register("constant")
class ConstantDelay(DelayProcess):
    """The same extra delay every iteration.

    Args:
        seed: Unused (every process takes the run seed).
        ms: Delay in milliseconds.
    """

    def __init__(self, seed: int, ms: float = 0.0) -> None:
        self.s = ms / 1e3

    def delay_s(self, step: int) -> float:
        """The constant."""
        return self.s


class _Sequence(DelayProcess):
    """A delay sequence drawn lazily in blocks, so any step can be asked in any order."""

    _BLOCK = 4096

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._values = np.empty(0)

    @abstractmethod
    def _extend(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """The next ``count`` delays (seconds)."""

    def delay_s(self, step: int) -> float:
        """The step's draw."""
        while step >= self._values.size:
            block = self._values.size // self._BLOCK
            rng = np.random.default_rng([self.seed, 7919, block])
            self._values = np.concatenate([self._values, self._extend(rng, self._BLOCK)])
        return float(self._values[step])


@DELAYS.register("normal")
class NormalDelay(_Sequence):
    """Independent normal delays, truncated at 0: the "low delay variation" scenario.

    Args:
        seed: Run seed.
        mean_ms: Mean (DC2 spec: 5).
        std_ms: Standard deviation (DC2 spec: 1).
    """

    def __init__(self, seed: int, mean_ms: float = 5.0, std_ms: float = 1.0) -> None:
        super().__init__(seed)
        self.mean, self.std = mean_ms / 1e3, std_ms / 1e3

    def _extend(self, rng: np.random.Generator, count: int) -> np.ndarray:
        return np.maximum(0.0, rng.normal(self.mean, self.std, count))


@DELAYS.register("markov")
class MarkovDelay(_Sequence):
    """A two-state Markov chain between a low and a high delay: "high delay variation".

    The chain starts low and switches state with probability ``switch_prob`` at each iteration.

    Args:
        seed: Run seed.
        low_ms: Delay in the low state (DC2 spec: 1).
        high_ms: Delay in the high state (DC2 spec: 100).
        switch_prob: Per-iteration switching probability (DC2 spec: 0.05).
    """

    def __init__(
        self, seed: int, low_ms: float = 1.0, high_ms: float = 100.0, switch_prob: float = 0.05
    ) -> None:
        super().__init__(seed)
        if not 0.0 <= switch_prob <= 1.0:
            raise ConfigError(f"delay 'markov': switch_prob must be in [0, 1], got {switch_prob}")
        self.levels = np.array([low_ms, high_ms]) / 1e3
        self.p = switch_prob
        self._state = 0

    def _extend(self, rng: np.random.Generator, count: int) -> np.ndarray:
        flips = rng.random(count) < self.p
        # State after each step: the running parity of switches, continuing from the last block.
        states = (self._state + np.cumsum(flips)) % 2
        self._state = int(states[-1])
        return self.levels[states]


@DELAYS.register("trace")
class TraceDelay(DelayProcess):
    """Delays read from a CSV trace with columns ``step,delay_ms``; past its end, the last value.

    Args:
        seed: Unused.
        path: The CSV file.
    """

    def __init__(self, seed: int, path: str = "") -> None:
        p = Path(path)
        if not p.is_file():
            raise DataError(f"delay trace {path!r} does not exist; give scenarios.*.delay.path")
        steps, delays = [], []
        with open(p, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            if reader.fieldnames is None or not {"step", "delay_ms"} <= set(reader.fieldnames):
                raise DataError(f"{path}: a delay trace needs the header 'step,delay_ms'")
            for line, row in enumerate(reader, start=2):
                try:
                    step, ms = int(row["step"]), float(row["delay_ms"])
                except (TypeError, ValueError):
                    raise DataError(
                        f"{path} line {line}: expected an integer step and a "
                        f"delay in ms, got {row!r}"
                    ) from None
                if ms < 0 or not np.isfinite(ms) or (steps and step <= steps[-1]):
                    raise DataError(
                        f"{path} line {line}: delays must be finite and >= 0 and "
                        "steps strictly increasing"
                    )
                steps.append(step)
                delays.append(ms / 1e3)
        if not steps:
            raise DataError(f"{path}: the delay trace is empty")
        self.steps = np.array(steps)
        self.delays = np.array(delays)

    def delay_s(self, step: int) -> float:
        """The delay of the last trace row at or before ``step`` (the first row before it)."""
        i = int(np.searchsorted(self.steps, step, side="right")) - 1
        return float(self.delays[max(i, 0)])


def make_delay(spec: dict[str, Any] | None, seed: int) -> DelayProcess:
    """The delay process of a scenario's ``delay`` entry (none: zero delay)."""
    if not spec:
        return ConstantDelay(seed, 0.0)
    params = {k: v for k, v in spec.items() if k != "kind"}
    cls = DELAYS.get(spec["kind"], where="scenarios.*.delay.kind")
    try:
        return cls(seed, **params)
    except TypeError as exc:
        raise ConfigError(f"delay {spec['kind']!r}: bad params {params} ({exc})") from None
