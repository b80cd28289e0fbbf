"""The wall-clock heartbeat (psml_core.heartbeat): lines while a long step prints nothing."""

from __future__ import annotations

import io
import time

from psml_core.heartbeat import Ticker, stage_lines


def test_a_ticker_beats_after_a_silence_and_stops() -> None:
    beats: list[float] = []
    t = Ticker(0.05, lambda: beats.append(time.monotonic()))
    t.start()
    deadline = time.monotonic() + 10.0  # generous: the machine may be busy
    while len(beats) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    t.stop()
    n = len(beats)
    assert n >= 2
    time.sleep(0.2)
    assert len(beats) == n  # stopped


def test_a_report_restarts_the_silence() -> None:
    t = Ticker(10.0, lambda: None)
    t._last -= 11.0  # noqa: SLF001 - eleven seconds of silence
    assert t.due()
    t.touch()
    assert not t.due()


def test_no_thread_for_a_zero_or_infinite_interval() -> None:
    for interval in (0.0, -1.0, float("inf"), float("nan"), None):
        t = Ticker(interval, lambda: None)
        t.start()
        assert t._thread is None and not t.due()  # noqa: SLF001


def test_stage_lines_name_the_step_beat_while_it_runs_and_time_it(monkeypatch) -> None:
    monkeypatch.delenv("PSML_PROGRESS", raising=False)
    out = io.StringIO()
    with stage_lines("partition", "placing rcv1 (metis)", stream=out, interval_s=0.05) as note:
        note("data: 10 samples")
        time.sleep(0.3)  # one long call that prints nothing (METIS)
    lines = out.getvalue().splitlines()
    assert lines[0] == "psml partition: placing rcv1 (metis)"
    assert lines[1] == "psml partition: data: 10 samples"
    assert any(ln.startswith("psml partition: still placing rcv1 (metis) (") for ln in lines)
    assert lines[-1].startswith("psml partition: placing rcv1 (metis): done in 0.")


def test_stage_lines_are_silenced_by_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("PSML_PROGRESS", "off")
    out = io.StringIO()
    with stage_lines("analyze", "x", stream=out, interval_s=0.01):
        time.sleep(0.05)
    assert out.getvalue() == ""
