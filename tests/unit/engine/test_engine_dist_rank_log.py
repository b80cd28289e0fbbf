"""A dist rank's C++ output goes to its log; the terminal gets psml's one line naming it.

In-process: descriptor 2 is pointed at the log and back around each test, as
:func:`~psml_core.engine.torchdist.rank_log.divert_native_stderr` does in a rank.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from psml_core.engine.torchdist import rank_log
from psml_core.engine.torchdist.session import _say

FRAMES = (
    "[W1128 TCPStore.cpp:125] [c10d] recvValue failed: Connection reset by peer\n"
    "Exception raised from recvBytes at c10d/Utils.hpp:784 (most recent call first):\n"
    + "".join(f"frame #{i}: c10::Error::Error(...) + 0x9d\n" for i in range(12))
)


@contextmanager
def diverted(tmp_path: Path) -> Iterator[Path]:
    """A rank's descriptor 2 diverted to ``tmp_path/ranks/rank3.log``; all undone after.

    Entered inside the test body: pytest points descriptor 2 at its own capture again
    between a fixture's setup and the test.
    """
    saved_fd, saved_err = os.dup(2), sys.stderr
    try:
        yield rank_log.divert_native_stderr(tmp_path / "ranks", 3)
    finally:
        sys.stderr.flush()
        os.dup2(saved_fd, 2)
        os.close(saved_fd)
        sys.stderr = saved_err
        rank_log._LOG = None  # noqa: SLF001 - undo what a rank keeps for its life
        rank_log._NATIVE = None  # noqa: SLF001


def test_cpp_frames_go_to_the_log_and_psmls_line_names_it(tmp_path, capfd) -> None:
    with diverted(tmp_path) as log:
        os.write(2, FRAMES.encode())  # what c10d writes, below Python
        _say("psml dist: rank 3 (worker 1) stops: lost the rendezvous store")
    terminal = capfd.readouterr().err
    lines = terminal.strip().splitlines()
    assert lines == [
        f"psml dist: rank 3 (worker 1) stops: lost the rendezvous store; details in {log}"
    ]
    assert log.read_text() == FRAMES


def test_a_traceback_goes_to_the_log(tmp_path, capfd) -> None:
    with diverted(tmp_path) as log:
        print("Traceback (most recent call last): ...", file=rank_log.native_stream(), flush=True)
    assert capfd.readouterr().err == ""
    assert "Traceback" in log.read_text()


def test_where_the_log_goes(tmp_path) -> None:
    assert rank_log.log_dir({}, None) is None
    assert rank_log.log_dir({}, tmp_path / "run") == tmp_path / "run.ranks"
    env = {rank_log.LOG_DIR_ENV: str(tmp_path / "logs")}
    assert rank_log.log_dir(env, tmp_path / "run") == tmp_path / "logs"


def test_an_empty_log_is_removed_at_a_clean_finish(tmp_path) -> None:
    with diverted(tmp_path) as log:
        assert log.exists()
        rank_log.drop_if_empty()
    assert not log.exists() and not log.parent.exists()


def test_without_a_log_nothing_is_added(capfd) -> None:
    _say("psml dist: rank 0 (shard 0) failed: x")
    assert capfd.readouterr().err == "psml dist: rank 0 (shard 0) failed: x\n"
    assert Path(rank_log.native_stream().name) == Path(sys.stderr.name)
