"""The local spawners' private folders in the system temp folder, never left behind.

A local spawner (dist, horovod) writes its ranks' inputs there: the run's settings and the
whole data set, pickled. :func:`scratch_dir` makes the folder (``0700``, from
:func:`tempfile.mkdtemp`), records the owner's pid in it (:data:`OWNER`) and removes it when
the block ends, at interpreter exit (:mod:`atexit`), and on SIGTERM (turned into
``SystemExit(143)`` so that the spawner's own clean-up runs too) or SIGINT. A parent killed
with SIGKILL cannot clean up, so each new folder first removes the stale ones
(:func:`remove_stale`): same prefix, same user, an owner pid that no longer runs.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["OWNER", "remove_stale", "scratch_dir"]

OWNER = "owner.pid"
"""The file in a scratch folder that holds its owner's process id."""

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists (signal 0 checks without sending anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it runs
        return True
    return True


def remove_stale(prefix: str, root: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove this user's ``<prefix>*`` folders whose owner process has gone; the removed.

    A folder without a readable owner file (another tool's, or one being made) is left alone.

    Args:
        prefix: The folders' name prefix (``psml-dist-``).
        root: Where to look; default the system temp folder.
    """
    removed = []
    for d in Path(root or tempfile.gettempdir()).glob(f"{prefix}*"):
        try:
            if d.is_symlink() or not d.is_dir() or d.stat().st_uid != os.getuid():
                continue
            pid = int((d / OWNER).read_text(encoding="ascii").strip())
        except (OSError, ValueError):
            continue
        if pid != os.getpid() and not _running(pid):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def _on_signal(cleanup: Callable[[], None], previous: dict[int, Any]) -> Callable[..., None]:
    def handler(signum: int, frame: Any) -> None:
        before = previous.get(signum)
        if before == signal.SIG_IGN:  # the process ignored it before: it goes on, so do we
            return
        cleanup()
        if callable(before):  # e.g. SIGINT's KeyboardInterrupt
            before(signum, frame)
        else:
            raise SystemExit(128 + signum)  # unwinds: the spawner stops its ranks on the way

    return handler


@contextmanager
def scratch_dir(prefix: str, root: str | os.PathLike[str] | None = None) -> Iterator[Path]:
    """A private folder that is gone when the block ends, the process exits or is stopped.

    Args:
        prefix: The folder's name prefix; stale folders with it are removed first.
        root: Where to make it; default the system temp folder.
    """
    remove_stale(prefix, root)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    (path / OWNER).write_text(f"{os.getpid()}\n", encoding="ascii")

    def cleanup() -> None:
        shutil.rmtree(path, ignore_errors=True)

    atexit.register(cleanup)
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():  # signals: main thread only
        handler = _on_signal(cleanup, previous)
        for sig in _SIGNALS:
            previous[sig] = signal.signal(sig, handler)
    try:
        yield path
    finally:
        for sig, before in previous.items():
            signal.signal(sig, before if before is not None else signal.SIG_DFL)
        cleanup()
        atexit.unregister(cleanup)
