"""Hostile dist endings: C++ frames stay in the rank's log; a killed parent's pickled data set
does not stay in the temp folder."""

from __future__ import annotations

import os
import subprocess
import sys

from psml_core.engine.scratch import OWNER, remove_stale, scratch_dir
from psml_core.engine.torchdist import rank_log
from psml_core.engine.torchdist.session import _say


def test_a_ranks_cpp_frames_go_to_its_log_and_one_line_names_it(tmp_path, capfd) -> None:
    saved_fd, saved_err = os.dup(2), sys.stderr
    try:
        log = rank_log.divert_native_stderr(tmp_path / "run.ranks", 1)
        os.write(2, b"".join(b"frame #%d: c10::Error::Error(...)\n" % i for i in range(12)))
        _say("psml dist: rank 1 (shard 1) stops: lost the rendezvous store")
    finally:
        sys.stderr.flush()
        os.dup2(saved_fd, 2)
        os.close(saved_fd)
        sys.stderr = saved_err
        rank_log._LOG = rank_log._NATIVE = None  # noqa: SLF001
    terminal = capfd.readouterr().err
    assert terminal.count("\n") == 1 and "frame #" not in terminal
    assert terminal.rstrip().endswith(f"details in {log}")
    assert log.read_text().count("frame #") == 12


def test_a_killed_parents_pickled_data_is_removed_at_the_next_start(tmp_path) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    left = tmp_path / "psml-dist-killed"
    left.mkdir()
    (left / "inputs.pkl").write_bytes(b"the whole data set, pickled")
    (left / OWNER).write_text(gone.stdout)
    assert remove_stale("psml-dist-", tmp_path) == [left]
    with scratch_dir("psml-dist-", tmp_path) as mine:
        assert (mine / OWNER).read_text().strip() == str(os.getpid())
    assert not left.exists() and not mine.exists()
