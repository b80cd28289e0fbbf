"""A rank's native output in its log file; psml's own lines on the terminal.

When a peer or the store host dies, torch's C++ layers (c10d's TCPStore, gloo) write a warning
and a dozen ``frame #N`` lines of C++ backtrace straight to file descriptor 2, below Python,
once per rank. :func:`divert_native_stderr` points descriptor 2 at the rank's log file, so
those lines (and any Python traceback) land there, and gives ``sys.stderr`` a duplicate of the
terminal, so psml's own lines still reach it. A rank's failure line then names the log
(:func:`log_hint`): one line per rank on the terminal, the details in the file.

The log folder is ``$PSML_DIST_LOG_DIR`` when set (``psml train`` sets it to ``<out>.ranks``,
the folder its torchrun launch uses too), else ``<out>.ranks`` of a launched rank's ``--out``.
A rank whose log stays empty removes it at a clean finish (:func:`drop_if_empty`).
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

__all__ = [
    "LOG_DIR_ENV",
    "current_log",
    "divert_native_stderr",
    "drop_if_empty",
    "log_dir",
    "log_hint",
    "native_stream",
]

LOG_DIR_ENV = "PSML_DIST_LOG_DIR"
"""The folder of the ranks' logs (``rank<r>.log``)."""

_LOG: Path | None = None
_NATIVE: TextIO | None = None


def log_dir(env: Mapping[str, str], out: str | os.PathLike[str] | None) -> Path | None:
    """Where a rank logs: ``$PSML_DIST_LOG_DIR``, else ``<out>.ranks``, else None (no log)."""
    if env.get(LOG_DIR_ENV):
        return Path(env[LOG_DIR_ENV])
    if out:
        p = Path(out)
        return p.with_name(p.name + ".ranks")
    return None


def current_log() -> Path | None:
    """This process's rank log, once diverted; else None."""
    return _LOG


def log_hint() -> str:
    """``"; details in <log>"`` for a failure line, or ``""`` when nothing was diverted."""
    return f"; details in {_LOG}" if _LOG is not None else ""


def native_stream() -> TextIO:
    """Where tracebacks go: the rank's log once diverted, else ``sys.stderr``."""
    return _NATIVE if _NATIVE is not None else sys.stderr


def divert_native_stderr(directory: Path, rank: int) -> Path:
    """Point descriptor 2 at ``directory/rank<rank>.log``; ``sys.stderr`` keeps the terminal.

    Returns:
        The log's path.
    """
    global _LOG, _NATIVE
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"rank{rank}.log"
    sys.stderr.flush()
    terminal = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.dup2(fd, 2)
    finally:
        os.close(fd)
    sys.stderr = io.TextIOWrapper(
        io.FileIO(terminal, "w", closefd=True), encoding="utf-8", line_buffering=True
    )
    _NATIVE = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding="utf-8", line_buffering=True
    )
    _LOG = path
    return path


def drop_if_empty() -> None:
    """At a clean finish: remove an empty log, and its folder once no rank's log is left."""
    if _LOG is None:
        return
    try:
        if _LOG.stat().st_size == 0:
            _LOG.unlink()
            _LOG.parent.rmdir()  # fails while another rank's log is there: that is fine
    except OSError:
        pass
