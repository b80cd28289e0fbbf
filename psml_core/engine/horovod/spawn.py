r"""The local spawner: a horovod run from a plain process (``psml train``, tests).

The calling process pickles the :class:`~psml_core.engine.job.Job` itself (so whatever the
caller set on it, e.g. a controller, is what runs) and the options into a private temporary
directory, and runs::

    horovodrun -np P -H localhost:P --gloo --start-timeout T \\
        python -m psml_core.engine.horovod.launch --spawned DIR

Every rank unpickles the same job, rank 0 writes the result into DIR atomically, and the parent
returns it. ``horovodrun`` ends every rank when one fails; the parent raises
:class:`~psml_core.errors.RunError` quoting the end of the ranks' output (which names the
failed rank). A run past ``HorovodOptions.timeout_s`` is killed as a process group.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import subprocess
import sys
from pathlib import Path

from psml_core.atomic import write_bytes
from psml_core.engine.horovod.result import HorovodResult
from psml_core.engine.horovod.runtime import HorovodOptions, horovodrun_path, import_horovod
from psml_core.engine.job import Job
from psml_core.engine.scratch import scratch_dir
from psml_core.errors import RunError

__all__ = ["INPUTS", "LOG", "RESULT", "horovodrun_command", "spawn_local", "write_result"]

INPUTS = "inputs.pkl"
RESULT = "result.pkl"
LOG = "horovodrun.log"
_TAIL_LINES = 40
_FIRST_FAILED = re.compile(
    r"The first process to do so was:\s*Process name: (\d+)\s*Exit code: (-?\d+)"
)


def horovodrun_command(workers: int, options: HorovodOptions, directory: Path) -> list[str]:
    """The ``horovodrun`` command line of a local run with ``workers`` ranks."""
    return [
        horovodrun_path(),
        "-np",
        str(workers),
        "-H",
        f"localhost:{workers}",
        "--gloo",
        "--start-timeout",
        str(options.start_timeout_s),
        sys.executable,
        "-m",
        "psml_core.engine.horovod.launch",
        "--spawned",
        str(directory),
    ]


_SHUTDOWN = "HorovodInternalError: Horovod has been shut down"
_RANK_LINE = re.compile(r"^\[(\d+)\]<", re.MULTILINE)


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    # psml_core must be importable in the ranks even when run from a checkout.
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(no output)"
    return "\n".join(lines[-_TAIL_LINES:])


def _failure(path: Path, run_id: str, workers: int, rc: int) -> str:
    """A RunError message: the rank that failed first (as horovodrun reports it) and its output."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    first = _FIRST_FAILED.search(text)
    if first is None:
        return (
            f"run {run_id!r}: horovodrun -np {workers} exited with status {rc}; "
            f"last output:\n{_tail(path)}"
        )
    rank, code = first.group(1), first.group(2)
    lines = text.splitlines()

    def output(r: str) -> list[str]:
        return [ln for ln in lines if ln.startswith(f"[{r}]<")]

    # A rank whose collective was cut short by another's failure reports Horovod's shutdown
    # and may exit first; the cause is the rank with an error of its own.
    if _SHUTDOWN in "\n".join(output(rank)):
        ranks = sorted({m.group(1) for m in _RANK_LINE.finditer(text)}, key=int)
        said = {r: "\n".join(output(r)) for r in ranks if r != rank}
        causes = [r for r, out in said.items() if "Error" in out and _SHUTDOWN not in out]
        if causes:
            cause = causes[0]
            return (
                f"run {run_id!r}: rank {cause} failed first (rank {rank} exited first, with exit "
                f"code {code}, because Horovod shut down after rank {cause}'s error); horovodrun "
                f"stopped the other ranks. Last output of rank {cause}:\n"
                + "\n".join(output(cause)[-_TAIL_LINES:])
            )
    return (
        f"run {run_id!r}: rank {rank} failed first (exit code {code}); horovodrun stopped the "
        f"other ranks. Last output of rank {rank}:\n" + "\n".join(output(rank)[-_TAIL_LINES:])
    )


def spawn_local(job: Job, options: HorovodOptions) -> HorovodResult:
    """Run ``job`` with ``job.spec.workers`` Horovod ranks on this host; rank 0's result.

    Raises:
        ConfigError: Horovod or horovodrun is missing.
        RunError: a rank failed, or the run exceeded ``options.timeout_s``.
    """
    import_horovod()  # a clear error before anything starts
    with scratch_dir("psml-horovod-") as tmp:  # the pickled job: never left behind
        directory = Path(tmp)
        write_bytes(directory / INPUTS, pickle.dumps({"job": job, "options": options}))
        cmd = horovodrun_command(job.spec.workers, options, directory)
        log = directory / LOG
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=_child_env(), start_new_session=True
            )
            try:
                rc = proc.wait(timeout=options.timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise RunError(
                    f"run {job.spec.run_id!r}: horovodrun did not finish within "
                    f"{options.timeout_s:g} s (PSML_HOROVOD_TIMEOUT); last output:\n{_tail(log)}"
                ) from None
            finally:
                if proc.poll() is None:  # interrupted: leave no rank behind
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        result_path = directory / RESULT
        if rc != 0 or not result_path.is_file():
            raise RunError(_failure(log, job.spec.run_id, job.spec.workers, rc))
        result: HorovodResult = pickle.loads(result_path.read_bytes())
    return result


def write_result(directory: Path, result: HorovodResult) -> None:
    """Rank 0 of a spawned run: hand the result back to the parent (atomically)."""
    write_bytes(directory / RESULT, pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
