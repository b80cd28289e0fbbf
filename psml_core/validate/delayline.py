"""The delay line: a small C program, built on demand with the system's C compiler.

``delayline.c`` (beside this module) forwards IPv4 packets between TUN devices, one per network
namespace, after a fixed one-way delay: the part of a link that ``tc`` cannot give where the
kernel has no ``netem``. It is compiled because a Python select loop adds milliseconds of
jitter on a busy machine; the C loop wakes with 1 ns timer slack under ``SCHED_FIFO`` and
reports its lateness (delivery minus due time) when it stops.
"""

from __future__ import annotations

import hashlib
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from psml_core.errors import RunError

__all__ = ["SOURCE", "DelayLine", "build"]

SOURCE = Path(__file__).with_name("delayline.c")


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "psml"


def build(cache: Path | None = None) -> Path:
    """The compiled delay line (built once per source version, kept in ``~/.cache/psml``).

    Raises:
        RunError: no C compiler, or the build failed (its first error line).
    """
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        raise RunError("no C compiler (cc) to build the delay line; install gcc or set CC")
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    out = (cache or _cache_dir()) / f"psml-delayline-{digest}"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        exe = Path(tmp) / "delayline"
        done = subprocess.run(
            [cc, "-O2", "-Wall", "-o", str(exe), str(SOURCE)], capture_output=True, text=True
        )
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["no output"])[0]
            raise RunError(f"building the delay line with {cc} failed: {first}")
        os.replace(exe, out)  # atomic: a concurrent build leaves one complete binary
    return out


class DelayLine:
    """A running delay line between the TUN ports it creates.

    Args:
        exe: The compiled program (:func:`build`).
        delay_us: One-way delay, microseconds.
        ports: (namespace path, TUN device name, IPv4 address) per port.
        max_seconds: It exits by itself after this long.
        rt_priority: SCHED_FIFO priority (0: the normal scheduler).
    """

    def __init__(
        self,
        exe: Path,
        delay_us: float,
        ports: list[tuple[str, str, str]],
        max_seconds: float,
        rt_priority: int = 10,
    ) -> None:
        argv = [str(exe), "--delay-us", f"{delay_us:g}", "--max-seconds", f"{max_seconds:g}"]
        argv += ["--rt", str(rt_priority)]
        for path, ifname, addr in ports:
            argv += ["--port", f"{path},{ifname},{addr}"]
        # Its standard input stays open while we live: it exits when that pipe closes.
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.report = ""
        self.ready = self._wait_ready(timeout_s=10.0)

    def _wait_ready(self, timeout_s: float) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.1)
            if ready:
                line = self.proc.stdout.readline().decode().strip()
                if line.startswith("ready"):
                    return line
                break
            if self.proc.poll() is not None:
                break
        err = self.stop()
        raise RunError(f"the delay line did not start: {err or 'no message'}")

    def stop(self) -> str:
        """Stop it (its TUN devices vanish with it); return its last line of counts."""
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        assert self.proc.stderr is not None
        lines = self.proc.stderr.read().decode().strip().splitlines()
        self.report = lines[-1] if lines else ""
        return self.report
