"""A shaped testbed on one Linux host: one network namespace per rank, joined by a delay line.

Topology: a star. Node ``i`` lives in namespace ``psmlv<pid>[name]n<i>`` with a TUN device ``pv<i>``
and the address ``10.77.0.<i+1>/24``; the delay line forwards every packet between the TUN
devices after the link's one-way delay (``netem`` where the kernel has it would do the same, but
none of the machines this was built on had it). Rates are the kernel's: ``tbf`` on each TUN
device shapes its node's uplink, and with more than two nodes a ``tbf`` on an ``ifb`` device that
the TUN device's ingress is redirected to shapes its downlink, so that P workers pushing into one
shard share the shard's NIC as in the simulator. TUN devices carry IP packets without a link
header, so ``tbf`` counts exactly the IP bytes: the rate is the IP-layer rate.

Only addresses inside these namespaces are used; nothing reaches the host's own network. Every
namespace is deleted, and the delay line (with its non-persistent TUN devices) stopped, when the
:class:`Testbed` closes: on a normal exit, an exception, Ctrl-C, SIGTERM or SIGHUP. A SIGKILL
leaves the namespaces (``ip netns list``; ``ip netns del NAME`` removes one); the delay line
then stops by itself (its parent's death, or ``max_seconds``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from psml_core.errors import RunError
from psml_core.validate.delayline import DelayLine, build

__all__ = ["Link", "Node", "Testbed", "preflight"]

MTU = 1500
SUBNET = "10.77.0"


@dataclass(frozen=True)
class Link:
    """Every node's NIC: ``rate_mbit`` each direction (None: unshaped), one-way ``delay_us``."""

    rate_mbit: float | None
    delay_us: float

    @property
    def label(self) -> str:
        """``100mbit_2ms``: a name for tables and files."""
        rate = f"{self.rate_mbit:g}mbit" if self.rate_mbit else "unshaped"
        return f"{rate}_{self.delay_us / 1000:g}ms"

    def tbf(self) -> list[str]:
        """The tbf arguments: a burst of two packets (or 50 us at the rate), a queue of 0.2 s."""
        assert self.rate_mbit is not None
        rate_bps = self.rate_mbit * 1e6
        burst = max(2 * MTU, int(rate_bps / 8 * 50e-6))
        limit = max(4 << 20, int(rate_bps / 8 * 0.2))
        return ["tbf", "rate", f"{int(rate_bps)}bit", "burst", str(burst), "limit", str(limit)]


@dataclass(frozen=True)
class Node:
    """One namespace of the testbed."""

    netns: str
    ifname: str
    address: str

    def argv(self, argv: list[str]) -> list[str]:
        """``argv`` run inside this node's namespace."""
        return ["ip", "netns", "exec", self.netns, *argv]


def preflight() -> str | None:
    """Why the testbed cannot be built here (one line), or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, TUN devices and tc); run it as root"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"needs iproute2's `{tool}` (apt-get install iproute2)"
    if not Path("/dev/net/tun").exists():
        return "no TUN device (/dev/net/tun): load the tun module or run where it exists"
    if shutil.which(os.environ.get("CC", "cc")) is None:
        return "needs a C compiler (cc) to build the delay line"
    probe = f"psmlv{os.getpid()}probe"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip() or 'ip netns add failed'}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RunError(f"`{' '.join(argv)}` failed: {done.stderr.strip() or done.returncode}")


class Testbed:
    """``nodes`` namespaces joined by a shaped link; a context manager that removes it all.

    Args:
        nodes: Namespaces (one per rank).
        link: The link every node's NIC gets.
        max_seconds: The delay line stops by itself after this long.
        rt_priority: The delay line's SCHED_FIFO priority (0: normal scheduling).
        name: Tells this testbed's namespaces from another's of the same process.
        congestion: TCP congestion control on the testbed's route (None: the host's default).
            cubic by default, Linux's own default: a host default of BBR paces small
            application-limited messages below the link's rate (measured here: +1.3 ms for
            19,240 B on an unshaped 2 ms link), which is no property of the link.
    """

    def __init__(
        self,
        nodes: int,
        link: Link,
        max_seconds: float = 3600,
        rt_priority: int = 10,
        name: str = "",
        congestion: str | None = "cubic",
    ) -> None:
        if not 2 <= nodes <= 32:
            raise RunError(f"a testbed has 2 to 32 nodes, not {nodes}")
        self.link, self.max_seconds, self.rt_priority = link, max_seconds, rt_priority
        self.congestion = congestion
        tag = f"psmlv{os.getpid()}{name}"
        self.nodes = [Node(f"{tag}n{i}", f"pv{i}", f"{SUBNET}.{i + 1}") for i in range(nodes)]
        self.line: DelayLine | None = None
        self.made: list[str] = []
        self.report = ""
        self._handlers: dict[int, Any] = {}

    def __enter__(self) -> Testbed:
        self._trap_signals()
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _trap_signals(self) -> None:
        def stop(signum: int, _frame: FrameType | None) -> None:
            raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

        for sig in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(ValueError):  # not the main thread: the caller's signals
                self._handlers[sig] = signal.signal(sig, stop)

    def _build(self) -> None:
        exe = build()
        for node in self.nodes:
            _run(["ip", "netns", "add", node.netns])
            self.made.append(node.netns)
            _run(node.argv(["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]))
            _run(["ip", "-n", node.netns, "link", "set", "lo", "up"])
        ports = [(f"/var/run/netns/{n.netns}", n.ifname, n.address) for n in self.nodes]
        self.line = DelayLine(exe, self.link.delay_us, ports, self.max_seconds, self.rt_priority)
        shape_down = self.link.rate_mbit is not None and len(self.nodes) > 2
        for node in self.nodes:
            ip = ["ip", "-n", node.netns]
            _run([*ip, "addr", "add", f"{node.address}/24", "dev", node.ifname])
            _run([*ip, "link", "set", node.ifname, "mtu", str(MTU), "up"])
            if self.congestion:  # per route: a namespace may not change its default
                route = [f"{SUBNET}.0/24", "dev", node.ifname, "congctl", self.congestion]
                _run([*ip, "route", "replace", *route])
            if self.link.rate_mbit is None:
                continue
            tc = node.argv(["tc"])
            _run([*tc, "qdisc", "add", "dev", node.ifname, "root", *self.link.tbf()])
            if shape_down:
                ifb = f"{node.ifname}i"
                _run([*ip, "link", "add", ifb, "type", "ifb"])
                _run([*ip, "link", "set", ifb, "up"])
                _run([*tc, "qdisc", "add", "dev", node.ifname, "handle", "ffff:", "ingress"])
                redirect = ["action", "mirred", "egress", "redirect", "dev", ifb]
                match = ["protocol", "all", "u32", "match", "u32", "0", "0", *redirect]
                _run([*tc, "filter", "add", "dev", node.ifname, "parent", "ffff:", *match])
                _run([*tc, "qdisc", "add", "dev", ifb, "root", *self.link.tbf()])

    def close(self) -> None:
        """Stop the delay line and delete every namespace made (idempotent)."""
        if self.line is not None:
            self.report = self.line.stop()
            self.line = None
        while self.made:
            subprocess.run(["ip", "netns", "del", self.made.pop()], capture_output=True)
        for sig, handler in self._handlers.items():
            signal.signal(sig, handler)
        self._handlers.clear()

    def popen(self, i: int, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start ``argv`` inside node ``i``'s namespace."""
        return subprocess.Popen(self.nodes[i].argv(argv), **kwargs)
