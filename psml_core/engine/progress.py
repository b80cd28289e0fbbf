"""Progress of a long training run: a first line, then one line per evaluation and checkpoint.

:func:`psml_core.engine.training.train` makes a :class:`Progress` and hands it to the backend,
which reports what it already computes; a reporter only reads those numbers, never touches a
random generator or the order of events, so the results are the same with and without it.

Every line starts with ``psml progress`` and is ``key=value`` fields (one per blank)::

    psml progress run=digits/dense_bsp/dc_10g/seed0 event=eval iter=50/500 simulated=1.234s
        wall=3.2s loss=0.4321 acc=0.8765 up=123456B down=654321B

* ``event``: ``start`` (the first line, before the backend runs), ``eval`` (the global model was
  evaluated after iteration ``iter``), ``checkpoint`` (a sim checkpoint was written: the next
  iteration to run is ``iter`` + 1), ``resumed`` (a sim run resumed from its checkpoint) or
  ``heartbeat`` (nothing else was printed for :data:`INTERVAL_ENV` seconds of wall time: a timer
  thread started with the first line, so it also covers loading and checking the data, the
  placement, building the job and one long iteration, with ``stage=`` naming the step);
* ``iter=k/N``: k of the run's N iterations are done (an evaluation "after iteration t" of the
  records is ``iter=t+1``);
* ``simulated``: the sim backend's virtual clock; ``wall``: wall-clock seconds since the start;
* ``loss``/``acc``: the test loss and accuracy of the evaluated model (``eval`` only);
* ``up``/``down``: bytes sent up (workers to shards) and down so far. The dist backend's rank 0
  sees only shard 0's traffic: its lines say ``bytes=shard0``.

Output goes to stderr. On a terminal a ``tqdm`` bar shows the iterations and the lines are
written above it; elsewhere (a Snakemake log file) there are only the lines, each flushed.
``PSML_PROGRESS=off`` silences it, ``PSML_PROGRESS=plain`` keeps the lines but never draws a
bar; ``PSML_PROGRESS_INTERVAL`` (seconds, default 30; 0: never) sets the heartbeat interval.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any, TextIO

from psml_core.heartbeat import (
    DEFAULT_INTERVAL_S,
    ENV,
    INTERVAL_ENV,
    Ticker,
    interval_from_env,
    quiet_from_env,
)

__all__ = ["ENV", "INTERVAL_ENV", "NO_PROGRESS", "NullProgress", "Progress"]

PREFIX = "psml progress"


class Progress:
    """Reports one run's progress on ``stream`` (stderr by default); see the module docstring.

    Args:
        run_id: The run's id.
        iterations: The run's iterations.
        clock: The backend's clock: "simulated" adds a ``simulated`` field to the lines that
            know it; "wall-clock" shows ``wall`` only.
        stream: Where the lines go (default: ``sys.stderr`` at each write).
        bar: Draw a ``tqdm`` bar (None: when ``stream`` is a terminal).
        interval_s: Wall seconds without a line after which a ``heartbeat`` line is printed
            (by a timer thread from :meth:`start` or the first :meth:`tick` on, and checked at
            each iteration); 0 or None: never.
        epoch: ``time.time()`` the run started at (default: now); a dist rank gets its
            spawner's, so that ``wall`` counts from the start of ``train``.
    """

    enabled = True

    def __init__(
        self,
        run_id: str,
        iterations: int,
        clock: str = "simulated",
        *,
        stream: TextIO | None = None,
        bar: bool | None = None,
        interval_s: float | None = DEFAULT_INTERVAL_S,
        epoch: float | None = None,
    ) -> None:
        self.run_id, self.iterations, self.clock = run_id, iterations, clock
        self._stream = stream
        self._bar_wanted = bar
        # 0, a negative or a non-finite interval: no wall-clock heartbeat.
        interval = float(interval_s or 0.0)
        self.interval_s = interval if 0.0 < interval < float("inf") else 0.0
        self.epoch = time.time() if epoch is None else epoch
        self._t0 = time.monotonic() - max(0.0, time.time() - self.epoch)
        self._ticker = Ticker(self.interval_s, self._heartbeat)
        self._stage: str | None = None
        self._sim: float | None = None
        self._done = 0  # iterations done, as far as reported
        self._bar: Any = None
        self._closed = False
        self._lock = threading.Lock()  # dist: evaluations are reported from a thread

    @classmethod
    def from_env(
        cls,
        run_id: str,
        iterations: int,
        clock: str = "simulated",
        env: Mapping[str, str] | None = None,
    ) -> Progress:
        """The reporter ``PSML_PROGRESS`` and ``PSML_PROGRESS_INTERVAL`` ask for."""
        if quiet_from_env(env):
            return NO_PROGRESS
        interval = interval_from_env(env)
        mode = (os.environ if env is None else env).get(ENV, "").strip().lower()
        bar = False if mode == "plain" else None
        return cls(run_id, iterations, clock, bar=bar, interval_s=interval)

    def settings(self) -> dict[str, Any]:
        """What a process started for this run needs to report the same way (picklable)."""
        return {
            "enabled": True,
            "bar": self.bar_enabled,
            "interval_s": self.interval_s,
            "epoch": self.epoch,
        }

    @classmethod
    def from_settings(
        cls, run_id: str, iterations: int, clock: str, settings: Mapping[str, Any] | None
    ) -> Progress:
        """The reporter :meth:`settings` describes (None or disabled: :data:`NO_PROGRESS`)."""
        if not settings or not settings.get("enabled"):
            return NO_PROGRESS
        return cls(
            run_id,
            iterations,
            clock,
            bar=settings.get("bar"),
            interval_s=settings.get("interval_s"),
            epoch=settings.get("epoch"),
        )

    # -- what the engine reports -------------------------------------------------------------

    def start(self, **fields: Any) -> None:
        """The first line: the run's shape (workers, backend, ...), before anything runs."""
        when = "each evaluation"
        if self.interval_s:
            when += f" and every {self.interval_s:g} s of wall time"
        self._line("start", None, {**fields, "clock": self.clock}, f"progress follows at {when}")
        self._ticker.start()

    def stage(self, name: str) -> None:
        """Set the run's current step, which heartbeats name (``stage=``).

        The steps: ``data``, ``placement``, ``build``, ``train``, ``write``.
        """
        self._stage = name

    def handover(self) -> None:
        """Other processes report from now on (a dist run's rank 0): no more heartbeats here."""
        self._ticker.stop()

    def tick(self, iteration: int, sim_time: float | None = None) -> None:
        """Iteration ``iteration`` (0-based) is done; cheap, call it once per iteration."""
        done = iteration + 1
        self._sim = sim_time
        self._ticker.start()  # a rank that never called start(): beat from its first iteration
        if done > self._done and not self._closed:
            with self._lock:
                try:
                    self._advance(done)
                except (OSError, ValueError):  # a broken stderr: see _line
                    self._closed = True
        if self._ticker.due():
            self._heartbeat()

    def _heartbeat(self) -> None:
        """A ``heartbeat`` line: iterations done so far and the current step."""
        self._line("heartbeat", self._done, {"simulated": self._sim, "stage": self._stage})

    def evaluation(
        self,
        iteration: int,
        *,
        sim_time: float | None = None,
        loss: float | None = None,
        accuracy: float | None = None,
        bytes_up: int | None = None,
        bytes_down: int | None = None,
        scope: str | None = None,
    ) -> None:
        """The model after ``iteration`` was evaluated: loss, accuracy and traffic so far."""
        self._line(
            "eval",
            iteration + 1,
            {
                "simulated": sim_time,
                "loss": loss,
                "acc": accuracy,
                "up": bytes_up,
                "down": bytes_down,
                "bytes": scope,
            },
        )

    def checkpoint(
        self,
        iteration: int,
        *,
        sim_time: float | None = None,
        bytes_up: int | None = None,
        bytes_down: int | None = None,
    ) -> None:
        """A checkpoint was written at the drain before ``iteration`` (0-based)."""
        fields = {"simulated": sim_time, "up": bytes_up, "down": bytes_down}
        self._line("checkpoint", iteration, fields)

    def resumed(self, iteration: int, sim_time: float | None = None) -> None:
        """The run resumed from a checkpoint; it goes on with ``iteration`` (0-based)."""
        self._line("resumed", iteration, {"simulated": sim_time})

    def close(self) -> None:
        """Stop the heartbeat and close the bar, if one was drawn (the lines stay)."""
        self._ticker.stop()
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None
            self._closed = True

    # -- output -------------------------------------------------------------------------------

    @property
    def stream(self) -> TextIO:
        """Where the lines go."""
        return self._stream if self._stream is not None else sys.stderr

    @property
    def bar_enabled(self) -> bool:
        """Whether a bar is drawn: as asked, else when the stream is a terminal."""
        if self._bar_wanted is not None:
            return self._bar_wanted
        isatty = getattr(self.stream, "isatty", None)
        try:
            return bool(isatty and isatty())
        except ValueError:  # a closed stream
            return False

    def _advance(self, done: int) -> None:
        """Move the bar to ``done`` iterations (under the lock); drawn at the first call."""
        if done <= self._done:
            return
        if self._bar is None and not self._closed and self.bar_enabled:
            from tqdm import tqdm

            self._bar = tqdm(
                total=self.iterations,
                initial=self._done,
                file=self.stream,
                desc=self.run_id,
                unit="it",
                dynamic_ncols=True,
                mininterval=0.5,
            )
        if self._bar is not None:
            self._bar.update(done - self._done)
        self._done = done

    def format(self, event: str, done: int | None, fields: Mapping[str, Any]) -> str:
        """One line (without the newline)."""
        parts = [PREFIX, f"run={self.run_id}", f"event={event}"]
        if done is not None:
            parts.append(f"iter={done}/{self.iterations}")
        sim = fields.get("simulated")
        if sim is not None and self.clock == "simulated":
            parts.append(f"simulated={sim:.6g}s")
        if event != "start":
            parts.append(f"wall={time.monotonic() - self._t0:.1f}s")
        for key, value in fields.items():
            if value is None or key == "simulated":
                continue
            if key in ("loss", "acc"):
                parts.append(f"{key}={value:.4f}" if math.isfinite(value) else f"{key}=nan")
            elif key in ("up", "down"):
                parts.append(f"{key}={int(value)}B")
            else:
                parts.append(f"{key}={value}")
        return " ".join(parts)

    def _line(
        self, event: str, done: int | None, fields: Mapping[str, Any], tail: str | None = None
    ) -> None:
        line = self.format(event, done, fields)
        if tail:
            line = f"{line}; {tail}"
        with self._lock:
            if self._closed:
                return
            self._ticker.touch()
            stream = self.stream
            try:
                if done is not None and event in ("eval", "heartbeat", "checkpoint", "resumed"):
                    self._advance(done)
                if self._bar is not None:
                    from tqdm import tqdm

                    tqdm.write(line, file=stream)
                else:
                    print(line, file=stream, flush=True)
            except (OSError, ValueError):
                # A closed or broken stderr (`psml train ... 2>&1 | head`) must not stop the
                # run: progress is only a view of it. Report nothing more.
                self._closed = True


class NullProgress(Progress):
    """Reports nothing (the backends' default)."""

    enabled = False

    def __init__(self) -> None:
        super().__init__("", 0, interval_s=0)

    def settings(self) -> dict[str, Any]:
        """Disabled."""
        return {"enabled": False}

    def start(self, **fields: Any) -> None:
        """Nothing."""

    def tick(self, iteration: int, sim_time: float | None = None) -> None:
        """Nothing."""

    def stage(self, name: str) -> None:
        """Nothing."""

    def _line(
        self, event: str, done: int | None, fields: Mapping[str, Any], tail: str | None = None
    ) -> None:
        """Nothing."""

    def close(self) -> None:
        """Nothing."""


NO_PROGRESS: Progress = NullProgress()
"""The no-op reporter."""
