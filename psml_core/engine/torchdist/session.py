"""A rank's membership of a dist run: rendezvous store, gloo process group, and a watchdog.

Failure handling. Gloo alone cannot guarantee that every process stops when one dies: it
reports a broken connection only to operations on that very pair, and a rank blocked on
another pair (a worker waiting for one shard's answer while another shard died) never sees it
(it would wait for ``op_timeout_s``). So every rank runs a
watchdog thread with its own store connection that, every ``heartbeat_s``:

* bumps this rank's heartbeat counter, and checks the others' (ranks that finished cleanly
  are skipped); one that has not moved for ``dead_after_s`` is declared dead;
* reads the ``abort`` key, which the first rank to fail sets (``compare_set``: the first
  writer wins, so the root cause is what everybody reports); the local spawner sets it too
  when a child exits non-zero.

Either way the process prints one line naming the failed rank and leaves with ``os._exit(1)``
(a main thread blocked inside gloo cannot be interrupted any other way). A lost store
connection means its host — rank 0, the torchrun agent or the spawner — is gone: also fatal.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import traceback
from datetime import timedelta
from typing import NoReturn

import torch.distributed as dist

from psml_core.engine.torchdist.env import RankEnv
from psml_core.engine.torchdist.rank_log import drop_if_empty, log_hint, native_stream
from psml_core.engine.torchdist.settings import DistOptions, Layout
from psml_core.engine.torchdist.wire import PeerLost
from psml_core.errors import ConfigError, RunError

__all__ = ["Session", "current_session"]

_CURRENT: Session | None = None


def current_session() -> Session | None:
    """The session this process opened (launched ranks), or None (a plain process)."""
    return _CURRENT


def _say(line: str) -> None:
    # The terminal's one line per rank; torch's C++ frames went to the rank's log, named here.
    print(line + log_hint(), file=sys.stderr, flush=True)


def _first_line(exc: BaseException) -> str:
    # c10 errors append a C++ backtrace; one line is what a person needs.
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class Session:
    """Store, process group and watchdog of one rank.

    Args:
        env: Rank, world size and rendezvous address.
        layout: Which rank is which role.
        options: Timeouts and accounting options.
    """

    def __init__(self, env: RankEnv, layout: Layout, options: DistOptions) -> None:
        self.env, self.layout, self.options = env, layout, options
        self.rank = env.rank
        self.me = layout.describe(env.rank)
        self.t0 = 0.0
        self._store: dist.Store | None = None
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None
        self._exiting = False

    # ------------------------------------------------------------------ store

    def _connect(self, is_master: bool) -> dist.Store:
        base = dist.TCPStore(
            self.env.master_addr,
            self.env.master_port,
            None,
            is_master,
            timedelta(seconds=self.options.start_timeout_s),
            wait_for_workers=False,
        )
        return dist.PrefixStore(f"psml/{self.env.attempt}", base)

    @property
    def store(self) -> dist.Store:
        """The main thread's store connection."""
        assert self._store is not None, "session not open"
        return self._store

    def _store_host(self) -> str:
        return {
            "agent": "the torchrun agent",
            "spawner": "the local spawner (parent process)",
        }.get(self.env.store_host, self.layout.describe(0))

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Join: connect, wait for every rank (naming missing ones), start gloo and the watchdog."""
        global _CURRENT
        opts, world = self.options, self.layout.world_size
        try:
            self._store = self._connect(self.env.hosts_store)
        except (RuntimeError, OSError) as exc:
            raise RunError(
                f"{self.me}: cannot reach the rendezvous store at {self.env.master_addr}:"
                f"{self.env.master_port} ({_first_line(exc)})"
            ) from None
        self.store.add(f"hb/{self.rank}", 1)
        self.store.set(f"arrived/{self.rank}", socket.gethostname())
        keys = [f"arrived/{r}" for r in range(world)]
        deadline = time.monotonic() + opts.start_timeout_s
        while True:
            self._check_abort(self.store)
            missing = [r for r, k in enumerate(keys) if not self.store.check([k])]
            if not missing:
                break
            if time.monotonic() > deadline:
                names = ", ".join(self.layout.describe(r) for r in missing)
                raise RunError(f"{self.me}: {names} did not join within {opts.start_timeout_s:g} s")
            time.sleep(0.05)
        try:
            dist.init_process_group(
                "gloo",
                store=dist.PrefixStore("pg", self.store),
                rank=self.rank,
                world_size=world,
                timeout=timedelta(seconds=opts.op_timeout_s),
            )
        except RuntimeError as exc:  # a rank died while the mesh was being connected
            raise PeerLost(f"gloo: {exc}", None) from None
        self._watchdog = threading.Thread(target=self._watch, name="psml-watchdog", daemon=True)
        self._watchdog.start()
        _CURRENT = self

    def start_clock(self) -> float:
        """A barrier, then this rank's clock origin: every rank's ``time_s`` starts together."""
        try:
            dist.barrier()
        except RuntimeError as exc:
            raise PeerLost(f"gloo: {exc}", None) from None
        self.t0 = time.perf_counter()
        return self.t0

    def close(self) -> None:
        """Clean finish, after rank 0 has every result.

        Rank 0 hosts the store under srun, so it leaves last: the others stop their watchdog
        and mark themselves done; rank 0 waits for every mark, then stops its own.
        """
        global _CURRENT
        world = self.layout.world_size
        if self.rank == 0:
            keys = [f"done/{r}" for r in range(1, world)]
            deadline = time.monotonic() + self.options.dead_after_s + 5
            while not all(self.store.check([k]) for k in keys):
                if time.monotonic() > deadline:
                    self.abort("other ranks did not finish after sending their results")
                time.sleep(0.02)
            self._stop_watchdog()
        else:
            self._stop_watchdog()
            self.store.set(f"done/{self.rank}", "1")
        dist.destroy_process_group()
        _CURRENT = None
        drop_if_empty()

    def _stop_watchdog(self) -> None:
        self._stop.set()
        if self._watchdog is not None:
            self._watchdog.join()

    # ------------------------------------------------------------------ failure

    def abort(self, reason: str, quiet_unless_first: bool = False) -> NoReturn:
        """This rank failed: tell everybody (first failure wins), say it, exit 1.

        ``quiet_unless_first``: say it only if this rank's failure is the one posted (an error
        every rank finds at once, such as a setting, is then said once).
        """
        self._exiting = True  # this rank says its own failure; its watchdog stays quiet
        first = self._post_abort(f"{self.me} failed: {reason}")
        if first or not quiet_unless_first:
            _say(f"psml dist: {self.me} failed: {reason}")
        self._exit()

    def _exit(self) -> NoReturn:
        """Leave now; a store host first gives the others time to read the ``abort`` key."""
        if self.env.hosts_store:
            time.sleep(2 * self.options.heartbeat_s + 0.5)
        os._exit(1)

    def fail(self, exc: BaseException) -> NoReturn:
        """Abort for an exception, its traceback in the rank's log (a broken pipe: peer_lost).

        A ConfigError is bad input, not a bug: its one line, no traceback. Without a log
        (a plain process), the traceback goes to stderr.
        """
        if isinstance(exc, PeerLost):
            self.peer_lost(exc, exc.peer)
        if isinstance(exc, ConfigError):
            self.abort(str(exc), quiet_unless_first=True)
        traceback.print_exception(exc, file=native_stream())
        self.abort(f"{type(exc).__name__}: {_first_line(exc)}")

    def peer_lost(self, exc: BaseException, peer: int | None) -> NoReturn:
        """Gloo saw a broken connection: let the watchdog name the root cause, else name ``peer``.

        The peer may have died (its heartbeat stops) or exited after failing (it set ``abort``);
        the watchdog reports either within ``dead_after_s`` and exits the process.
        """
        time.sleep(self.options.dead_after_s + 3 * self.options.heartbeat_s)
        who = self.layout.describe(peer) if peer is not None else "a peer"
        self.abort(f"lost the connection to {who} ({_first_line(exc)})")

    def _post_abort(self, message: str) -> bool:
        """Post ``message`` as the run's failure unless one is posted; whether it is ours."""
        try:
            store = self._store or self._connect(False)
            return bytes(store.compare_set("abort", "", message)) == message.encode()
        except Exception:  # noqa: BLE001 - best effort: the store may be what failed
            return True

    def _check_abort(self, store: dist.Store) -> None:
        if self._exiting:
            return
        if store.check(["abort"]):
            cause = store.get("abort").decode()
            _say(f"psml dist: {self.me} stops: {cause}")
            self._exit()

    def _watch(self) -> None:
        """The watchdog loop (see the module docstring)."""
        opts, world = self.options, self.layout.world_size
        try:
            store = self._connect(False)
        except Exception as exc:  # noqa: BLE001
            _say(f"psml dist: {self.me}: watchdog cannot reach the store: {_first_line(exc)}")
            os._exit(1)
        others = [r for r in range(world) if r != self.rank]
        seen = {r: (-1, time.monotonic()) for r in others}
        done: set[int] = set()
        while not self._stop.wait(opts.heartbeat_s):
            try:
                store.add(f"hb/{self.rank}", 1)
                self._check_abort(store)
                now = time.monotonic()
                for r in others:
                    if r in done:
                        continue
                    if store.check([f"done/{r}"]):
                        done.add(r)
                        continue
                    beat = store.add(f"hb/{r}", 0)
                    if beat != seen[r][0]:
                        seen[r] = (beat, now)
                    elif now - seen[r][1] > opts.dead_after_s:
                        cause = (
                            f"{self.layout.describe(r)} stopped: no heartbeat for "
                            f"{now - seen[r][1]:.0f} s (the process died or hangs)"
                        )
                        store.compare_set("abort", "", cause)
                        self._check_abort(store)
            except Exception as exc:  # noqa: BLE001 - any store failure is fatal
                if self._stop.is_set():
                    return
                _say(
                    f"psml dist: {self.me} stops: lost the rendezvous store hosted by "
                    f"{self._store_host()} ({_first_line(exc)}); it has exited or crashed"
                )
                os._exit(1)
