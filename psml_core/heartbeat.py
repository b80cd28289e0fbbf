"""A wall-clock heartbeat: a line when a long step has printed nothing for a while.

A job that computes for minutes inside one call (METIS, reading and hashing a large data set,
one long training iteration) would otherwise print nothing until it ends, and a user watching
its log cannot tell a slow job from a hung one. :class:`Ticker` calls back from a daemon thread
whenever nothing was reported for ``interval_s`` seconds; :func:`stage_lines` wraps one step of a
``psml`` command in a first line, heartbeats and a last line with the time it took.

The heartbeat only prints: it never touches a random generator or the order of events, so the
results are the same with and without it. ``PSML_PROGRESS=off`` silences the lines and
``PSML_PROGRESS_INTERVAL`` (seconds, default 30; 0: never) sets the interval, as for training
(:mod:`psml_core.engine.progress`).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import TextIO

__all__ = [
    "DEFAULT_INTERVAL_S",
    "ENV",
    "INTERVAL_ENV",
    "Ticker",
    "interval_from_env",
    "quiet_from_env",
    "stage_lines",
]

ENV = "PSML_PROGRESS"
INTERVAL_ENV = "PSML_PROGRESS_INTERVAL"
DEFAULT_INTERVAL_S = 30.0
_OFF = ("0", "off", "false", "no", "none")
_MIN_WAIT_S = 0.01  # a tiny interval must not spin the thread


def quiet_from_env(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``PSML_PROGRESS`` switches progress lines off."""
    env = os.environ if env is None else env
    return env.get(ENV, "").strip().lower() in _OFF


def interval_from_env(env: Mapping[str, str] | None = None) -> float:
    """``PSML_PROGRESS_INTERVAL`` in seconds (default 30; unreadable: the default)."""
    env = os.environ if env is None else env
    raw = env.get(INTERVAL_ENV, "").strip()
    try:
        return float(raw) if raw else DEFAULT_INTERVAL_S
    except ValueError:
        return DEFAULT_INTERVAL_S


class Ticker:
    """Calls ``beat()`` from a daemon thread after ``interval_s`` seconds without a report.

    Args:
        interval_s: Seconds of silence before a beat; 0, negative or not finite: never.
        beat: What to do (print a line); exceptions in it stop the ticker.

    :meth:`touch` says something was reported (the silence starts again); :meth:`stop` ends
    the thread. A ticker that was never started costs nothing.
    """

    def __init__(self, interval_s: float | None, beat: Callable[[], None]) -> None:
        interval = float(interval_s or 0.0)
        self.interval_s = interval if 0.0 < interval < math.inf else 0.0
        self._beat = beat
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (once; not for a zero interval)."""
        if self.interval_s and self._thread is None and not self._stop.is_set():
            self._thread = threading.Thread(target=self._run, name="psml-heartbeat", daemon=True)
            self._thread.start()

    def touch(self) -> None:
        """Something was reported just now."""
        self._last = time.monotonic()

    def due(self) -> bool:
        """Whether ``interval_s`` seconds passed since the last report."""
        return bool(self.interval_s) and time.monotonic() - self._last >= self.interval_s

    def stop(self) -> None:
        """End the thread (waits for a beat in progress)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)

    def _run(self) -> None:
        while True:
            wait = self.interval_s - (time.monotonic() - self._last)
            if self._stop.wait(max(wait, _MIN_WAIT_S)):
                return
            if self.due():
                try:
                    self._beat()
                except Exception:  # a beat must never take the job down; stop beating
                    return
                self.touch()


@contextmanager
def stage_lines(
    command: str,
    what: str,
    *,
    stream: TextIO | None = None,
    interval_s: float | None = None,
) -> Iterator[Callable[[str], None]]:
    """Lines around one step of a ``psml`` command: started, heartbeats, done in N s.

    ``psml partition: placing ... (parsa)`` first, ``psml partition: still placing ... (30 s so
    far)`` after each interval without a line, and ``psml partition: placing ... done in 42.1 s``
    at the end. The context yields ``note(text)``, which prints one more line (and restarts the
    silence). Nothing is printed when ``PSML_PROGRESS`` is off.

    Args:
        command: The command's name (``partition``, ``analyze``, ``hash``).
        what: The step, as a verb phrase.
        stream: Where the lines go (default: stderr at each line).
        interval_s: The heartbeat interval (default: ``PSML_PROGRESS_INTERVAL`` or 30 s).
    """
    quiet = quiet_from_env()
    t0 = time.monotonic()

    def say(text: str) -> None:
        if quiet:
            return
        with suppress(OSError, ValueError):  # a closed stderr must not stop the step
            print(f"psml {command}: {text}", file=stream or sys.stderr, flush=True)

    ticker = Ticker(
        interval_from_env() if interval_s is None else interval_s,
        lambda: say(f"still {what} ({time.monotonic() - t0:.0f} s so far)"),
    )

    def note(text: str) -> None:
        say(text)
        ticker.touch()

    say(what)
    if not quiet:
        ticker.start()
    try:
        yield note
    finally:
        ticker.stop()
    say(f"{what}: done in {time.monotonic() - t0:.1f} s")
