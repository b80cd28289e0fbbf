"""The local spawner: a dist run without torchrun, as ``psml train`` and the tests use it.

The calling process hosts the rendezvous store on a free loopback port, writes the job's
inputs (RunSpec, data set, placement, options) to a private temporary directory, and starts
P + S children with torchrun-style variables. Every child rebuilds the Job from those inputs
(deterministic), rank 0 writes its result there, and the parent returns it.

Children come from a ``multiprocessing`` *forkserver* that has imported psml and torch once,
so a rank starts in milliseconds instead of seconds, from a clean single-threaded process (no
OpenMP pool inherited, unlike a plain fork). As with any spawn/forkserver start, a script that
calls the backend directly needs the ``if __name__ == "__main__":`` guard. Each child receives
the parent's *current* environment explicitly (the forkserver's may be older).

A child that exits non-zero is seen within 50 ms: the parent posts the ``abort`` key naming
it (unless a child already named the root cause), the others stop on their own within a
heartbeat, stragglers get SIGTERM then SIGKILL, and :class:`~psml_core.errors.RunError` names
the rank. Nothing is written: the results exist only in the temporary directory.

That directory (``psml-dist-*``, holding the pickled data set) is removed when the run ends,
fails, or the parent is stopped (SIGTERM, SIGINT, exit); one left by a parent killed with
SIGKILL is removed by the next spawner's start (:mod:`psml_core.engine.scratch`).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import sys
import time
from datetime import timedelta
from multiprocessing.process import BaseProcess
from pathlib import Path

import torch.distributed as dist

from psml_core.engine.job import Job
from psml_core.engine.progress import NO_PROGRESS, Progress
from psml_core.engine.scratch import scratch_dir
from psml_core.engine.torchdist.rank_log import LOG_DIR_ENV
from psml_core.engine.torchdist.result import INPUTS, RESULT, DistResult
from psml_core.engine.torchdist.settings import DistOptions, Layout
from psml_core.errors import RunError

__all__ = ["INPUTS", "PREFIX", "RESULT", "spawn_local"]

PREFIX = "psml-dist-"
"""The name prefix of the spawner's private folder in the system temp folder (:mod:`..scratch`)."""

_DROP = ("TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT")


def _context() -> multiprocessing.context.BaseContext:
    ctx = multiprocessing.get_context("forkserver")
    # No-op once the forkserver runs: the ranks fork from a process that imported psml already.
    ctx.set_forkserver_preload(["psml_core.engine.torchdist.launch"])
    return ctx


def _child(env: dict[str, str], directory: str) -> None:
    """A rank: the parent's environment, then the launcher's spawned mode."""
    os.environ.clear()
    os.environ.update(env)
    from psml_core.engine.torchdist.launch import main

    code = main(["--spawned", directory])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"


def _child_env(rank: int, world: int, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP}
    env.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        PSML_DIST_STORE="external",
    )
    return env


def _stop(procs: list[BaseProcess], grace_s: float) -> None:
    """Let the others leave on the abort key; then SIGTERM, then SIGKILL."""
    deadline = time.monotonic() + grace_s
    while any(p.exitcode is None for p in procs) and time.monotonic() < deadline:
        time.sleep(0.05)
    for action in ("terminate", "kill"):
        alive = [p for p in procs if p.exitcode is None]
        if not alive:
            return
        for p in alive:
            getattr(p, action)()
        end = time.monotonic() + 3.0
        while any(p.exitcode is None for p in alive) and time.monotonic() < end:
            time.sleep(0.05)


def spawn_local(job: Job, options: DistOptions, progress: Progress = NO_PROGRESS) -> DistResult:
    """Run ``job`` on P + S local processes; return rank 0's result.

    ``progress``: rank 0 reports as it describes (:meth:`Progress.settings`).

    Raises:
        RunError: naming the first rank that failed.
    """
    layout = Layout(job.spec.shards, job.spec.workers)
    world = layout.world_size
    host = dist.TCPStore(
        "127.0.0.1",
        0,
        None,
        True,
        timedelta(seconds=options.start_timeout_s),
        wait_for_workers=False,
    )
    store = dist.PrefixStore("psml/0", host)
    ctx = _context()
    with scratch_dir(PREFIX) as tmp:
        inputs = {
            "spec": job.spec,
            "dataset": job.dataset,
            "assignment": job.assignment,
            "options": options,
            "progress": progress.settings(),
        }
        Path(tmp, INPUTS).write_bytes(pickle.dumps(inputs, protocol=pickle.HIGHEST_PROTOCOL))
        procs: list[BaseProcess] = []
        try:
            for rank in range(world):
                env = _child_env(rank, world, host.port)
                p = ctx.Process(target=_child, args=(env, str(tmp)), name=f"psml-dist-rank{rank}")
                p.start()
                procs.append(p)
            while True:
                codes = [p.exitcode for p in procs]
                if all(c == 0 for c in codes):
                    break
                failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
                if failed:
                    r, c = failed[0]
                    own = f"{layout.describe(r)} exited with {_exit_text(c or 0)}"
                    store.compare_set("abort", "", own)
                    cause = store.get("abort").decode()
                    _stop(procs, grace_s=options.heartbeat_s + 2)
                    logs = os.environ.get(LOG_DIR_ENV)
                    where = f"; each rank's log is in {logs}/" if logs else ""
                    raise RunError(
                        f"dist run {job.spec.run_id!r} failed: {cause}; the other ranks were "
                        f"stopped and no results were written{where}"
                    )
                time.sleep(0.05)
        finally:
            _stop(procs, grace_s=0)
        path = Path(tmp, RESULT)
        if not path.exists():
            raise RunError(f"dist run {job.spec.run_id!r}: rank 0 exited cleanly without a result")
        result: DistResult = pickle.loads(path.read_bytes())
    return result
