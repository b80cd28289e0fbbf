"""The testbed's own ceiling: TCP goodput between two of its namespaces, without shaping.

An unshaped link of the testbed is no zero link: every packet crosses two TUN devices and the
delay line, a user-space process on the same cores as the ranks, so bulk data moves at a
finite rate (1.8 to 2.5 Gbit/s measured on the 2-vCPU VM this was built on). The calibration
run on that link must not count this time as the ranks' software overhead, or the calibrated
sim charges it again on a shaped link, where the shaping, not the delay line, sets the rate. So
:func:`measure` times a bulk TCP transfer across the unshaped testbed and the calibration's sim
link runs at that rate (:mod:`.harness`).

Run inside the namespaces by :func:`measure`::

    python -m psml_core.validate.throughput serve ADDR PORT
    python -m psml_core.validate.throughput send ADDR PORT BYTES   # prints the seconds
"""

from __future__ import annotations

import socket
import statistics
import subprocess
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from psml_core.validate.netns import Testbed

__all__ = ["measure"]

CHUNK = 1 << 20


def _serve(addr: str, port: int) -> None:
    """Accept one connection, read it to its end, answer one byte."""
    with socket.create_server((addr, port)) as srv:
        conn, _ = srv.accept()
        with conn:
            while conn.recv(CHUNK):
                pass
            conn.sendall(b"k")


def _send(addr: str, port: int, nbytes: int) -> float:
    """Send ``nbytes`` and wait for the receiver's byte; the seconds it took."""
    buf = bytes(CHUNK)
    deadline = time.monotonic() + 10.0
    while True:  # the server may not listen yet
        try:
            conn = socket.create_connection((addr, port), timeout=30.0)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with conn:
        t0 = time.perf_counter()
        left = nbytes
        while left > 0:
            n = min(left, CHUNK)
            conn.sendall(buf[:n])
            left -= n
        conn.shutdown(socket.SHUT_WR)
        conn.recv(1)
        return time.perf_counter() - t0


def measure(tb: Testbed, nbytes: int = 64 << 20, repeats: int = 3, port: int = 29300) -> float:
    """Median TCP goodput from node 0 to node 1 of ``tb``, bits per second.

    Raises:
        RuntimeError: a transfer failed (its stderr's last line).
    """
    rates = []
    for k in range(repeats):
        addr, p = tb.nodes[1].address, str(port + k)
        me = [sys.executable, "-m", __name__]
        server = tb.popen(1, [*me, "serve", addr, p], stderr=subprocess.PIPE)
        try:
            sender = tb.popen(
                0,
                [*me, "send", addr, p, str(nbytes)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            out, err = sender.communicate(timeout=120)
            if sender.returncode:
                why = err.decode(errors="replace").strip().splitlines() or ["no output"]
                raise RuntimeError(f"testbed throughput probe failed: {why[-1]}")
            rates.append(8 * nbytes / float(out.decode().strip()))
        finally:
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    return statistics.median(rates)


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "serve":
        _serve(argv[1], int(argv[2]))
        return 0
    if len(argv) >= 4 and argv[0] == "send":
        print(f"{_send(argv[1], int(argv[2]), int(argv[3])):.9f}", flush=True)
        return 0
    print("usage: throughput serve ADDR PORT | send ADDR PORT BYTES", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
