"""`psml tune --jobs N`: its pool workers do not outlive a killed parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

PARENT = r"""
import os, sys, time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from psml_core.tune_command import _exit_with_parent

def pid_then_sleep():
    return os.getpid()

def long_sleep():
    time.sleep(600)

if __name__ == "__main__":
    with ProcessPoolExecutor(1, mp_context=get_context("spawn"), initializer=_exit_with_parent,
                             initargs=(os.getpid(), 0.1)) as pool:
        print(pool.submit(pid_then_sleep).result(), flush=True)
        pool.submit(long_sleep)
        time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by init) counts as gone.
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def test_a_killed_parent_takes_its_pool_workers_with_it(tmp_path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        worker = int(proc.stdout.readline())
        assert _alive(worker)
        proc.send_signal(signal.SIGKILL)  # no shutdown, no cleanup: as `kill -9` or an OOM kill
        proc.wait(timeout=30)
        deadline = time.monotonic() + 30  # the watch polls every 0.1 s; 30 s is only a bound
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(worker), "the pool worker outlived its killed parent"
    finally:
        proc.kill()
