"""The spawners' private folders (the pickled data set) are never left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from psml_core.engine.scratch import OWNER, remove_stale, scratch_dir

PREFIX = "psml-dist-"


def _gone_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    return int(proc.stdout)


def _folder(root, name: str, owner: int | None) -> object:
    d = root / f"{PREFIX}{name}"
    d.mkdir()
    (d / "inputs.pkl").write_bytes(b"the whole data set")
    if owner is not None:
        (d / OWNER).write_text(f"{owner}\n")
    return d


def test_only_folders_whose_owner_has_gone_are_removed(tmp_path) -> None:
    dead = _folder(tmp_path, "dead", _gone_pid())
    alive = _folder(tmp_path, "alive", os.getppid())
    mine = _folder(tmp_path, "mine", os.getpid())
    unowned = _folder(tmp_path, "unowned", None)
    (tmp_path / f"{PREFIX}file").write_text("not a folder")
    other = tmp_path / "psml-horovod-x"
    other.mkdir()
    (other / OWNER).write_text(f"{_gone_pid()}\n")
    assert remove_stale(PREFIX, tmp_path) == [dead]
    assert not dead.exists()
    assert alive.is_dir() and mine.is_dir() and unowned.is_dir() and other.is_dir()


def test_a_garbled_owner_file_is_left_alone(tmp_path) -> None:
    d = _folder(tmp_path, "odd", None)
    (d / OWNER).write_text("not a pid")
    assert remove_stale(PREFIX, tmp_path) == [] and d.is_dir()


def test_the_folder_records_its_owner_and_goes_at_the_end(tmp_path) -> None:
    stale = _folder(tmp_path, "stale", _gone_pid())
    with scratch_dir(PREFIX, tmp_path) as d:
        assert not stale.exists()  # a new start clears what a SIGKILLed parent left
        assert (d / OWNER).read_text().strip() == str(os.getpid())
        assert oct(d.stat().st_mode & 0o777) == "0o700"
        (d / "inputs.pkl").write_bytes(b"data")
    assert not d.exists()
    with pytest.raises(RuntimeError), scratch_dir(PREFIX, tmp_path) as d2:
        raise RuntimeError("a failed run")
    assert not d2.exists()


def test_sigterm_removes_the_folder_and_unwinds(tmp_path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stop, scratch_dir(PREFIX, tmp_path) as d:
        (d / "inputs.pkl").write_bytes(b"data")
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler runs between bytecodes of the main thread
            pass
    assert stop.value.code == 128 + signal.SIGTERM
    assert not d.exists()
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is put back


def test_an_ignored_sigint_does_not_remove_a_running_folder(tmp_path) -> None:
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with scratch_dir(PREFIX, tmp_path) as d:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                pass
            assert d.is_dir()  # the process goes on, and so does its run
    finally:
        signal.signal(signal.SIGINT, before)
