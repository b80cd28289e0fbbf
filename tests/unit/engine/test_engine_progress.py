"""Progress of long runs: a first line, one heartbeat per evaluation and checkpoint, no effect.

The lines are parsed (``key=value`` fields after ``psml progress``); the sim runs are a few
dozen digits-MLP iterations, the dist one a subprocess ``psml train`` (its rank 0 reports).
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
import re
import subprocess
import sys
import time

import pandas as pd
import pytest

from psml_core.engine.progress import ENV, NO_PROGRESS, PREFIX, Progress
from psml_core.engine.training import train

ITERATIONS, EVAL_EVERY = 23, 5


def spec_for(smoke, iterations=ITERATIONS, **changes):
    run = smoke.run("digits_mlp", "dense_bsp", "dc_10g", smoke.seeds[0])
    wl = dataclasses.replace(run.workload, iterations=iterations, eval_every=EVAL_EVERY)
    return dataclasses.replace(run, workload=wl, **changes)


def parse(text: str) -> list[dict[str, str]]:
    """Every progress line as its fields (``event``, ``iter``, ...)."""
    out = []
    for line in text.splitlines():
        if not line.startswith(PREFIX + " "):
            continue
        body = line[len(PREFIX) + 1 :].split("; ", 1)[0]
        out.append(dict(tok.split("=", 1) for tok in body.split()))
    return out


class Tty(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def run_with(spec, prepared, out, progress):
    train(spec, prepared[spec.dataset.name], out, progress=progress)
    return pd.read_parquet(out / "metrics.parquet")


def test_one_heartbeat_per_evaluation_with_its_fields(smoke, prepared, tmp_path):
    spec = spec_for(smoke)
    stream = io.StringIO()
    metrics = run_with(spec, prepared, tmp_path, Progress(spec.run_id, ITERATIONS, stream=stream))
    lines = parse(stream.getvalue())
    assert lines[0]["event"] == "start"
    assert lines[0]["run"] == spec.run_id
    assert lines[0]["iterations"] == str(ITERATIONS)
    assert lines[0]["workers"] == str(spec.workers)
    assert lines[0]["backend"] == "sim"
    assert "progress follows at each evaluation" in stream.getvalue().splitlines()[0]
    evals = [x for x in lines if x["event"] == "eval"]
    evaluated = metrics.dropna(subset=["test_accuracy"]).groupby("iteration").first()
    assert [int(x["iter"].split("/")[0]) - 1 for x in evals] == list(evaluated.index)
    assert list(evaluated.index) == [4, 9, 14, 19, 22]
    ups = []
    for x, (t, row) in zip(evals, evaluated.iterrows(), strict=True):
        assert x["run"] == spec.run_id
        assert x["iter"] == f"{t + 1}/{ITERATIONS}"
        assert float(x["simulated"].removesuffix("s")) > 0
        assert float(x["wall"].removesuffix("s")) >= 0
        assert math.isclose(float(x["loss"]), row["test_loss"], abs_tol=1e-4)
        assert math.isclose(float(x["acc"]), row["test_accuracy"], abs_tol=1e-4)
        up, down = int(x["up"].removesuffix("B")), int(x["down"].removesuffix("B"))
        assert up > 0 and down > 0
        ups.append((up, down))
    assert ups == sorted(ups)
    # Everything the records hold by the last evaluation, at most.
    assert ups[-1][0] <= metrics["bytes_up"].sum()
    assert ups[-1][1] <= metrics["bytes_down"].sum()
    sims = [float(x["simulated"].removesuffix("s")) for x in evals]
    assert sims == sorted(sims)
    # The last evaluation is when the servers applied the last pushes: near the records' end.
    assert sims[-1] == pytest.approx(metrics["time_s"].max(), rel=0.05)


def test_a_checkpointing_run_logs_its_checkpoints(smoke, prepared, tmp_path):
    spec = spec_for(smoke, iterations=17, checkpoint_every=5)
    stream = io.StringIO()
    run_with(spec, prepared, tmp_path, Progress(spec.run_id, 17, stream=stream))
    lines = parse(stream.getvalue())
    assert lines[0]["checkpoint_every"] == "5"
    ckpts = [x for x in lines if x["event"] == "checkpoint"]
    assert [x["iter"] for x in ckpts] == ["5/17", "10/17", "15/17"]
    for x in ckpts:
        assert {"simulated", "wall", "up", "down"} <= x.keys()
        assert int(x["up"].removesuffix("B")) > 0


def test_progress_changes_no_metric_byte(smoke, prepared, tmp_path):
    """Lines, a bar and a heartbeat at every iteration: the same metrics.parquet, byte for byte."""
    spec = spec_for(smoke, checkpoint_every=10)
    data = prepared[spec.dataset.name]
    train(spec, data, tmp_path / "quiet", progress=NO_PROGRESS)
    loud = Progress(spec.run_id, ITERATIONS, stream=io.StringIO(), interval_s=1e-9)
    train(spec, data, tmp_path / "loud", progress=loud)
    bar = Progress(spec.run_id, ITERATIONS, stream=Tty(), interval_s=1e-9)
    train(spec, data, tmp_path / "bar", progress=bar)
    assert [x["event"] for x in parse(loud.stream.getvalue())].count("heartbeat") >= ITERATIONS - 5
    quiet = (tmp_path / "quiet" / "metrics.parquet").read_bytes()
    assert (tmp_path / "loud" / "metrics.parquet").read_bytes() == quiet
    assert (tmp_path / "bar" / "metrics.parquet").read_bytes() == quiet


def test_not_a_terminal_gets_plain_flushed_lines_only(smoke, prepared, tmp_path, capsys):
    """progress=None (what ``psml train`` uses): stderr, here not a terminal: no bar."""
    spec = spec_for(smoke)
    train(spec, prepared[spec.dataset.name], tmp_path)
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err
    events = [x["event"] for x in parse(err)]
    assert events[0] == "start" and events.count("eval") == 5


def test_a_terminal_gets_a_bar_and_whole_lines_above_it(smoke, prepared, tmp_path):
    spec = spec_for(smoke)
    tty = Tty()
    run_with(spec, prepared, tmp_path, Progress(spec.run_id, ITERATIONS, stream=tty))
    text = tty.getvalue()
    assert "\r" in text and f"{ITERATIONS}/{ITERATIONS}" in text  # the bar, to its end
    lines = [ln for ln in re.split(r"[\r\n]", text) if ln.startswith(PREFIX)]
    assert [x["event"] for x in parse("\n".join(lines))].count("eval") == 5


def test_the_environment_silences_it(monkeypatch):
    monkeypatch.setenv(ENV, "off")
    assert Progress.from_env("r", 10) is NO_PROGRESS
    monkeypatch.setenv(ENV, "plain")
    assert not Progress.from_env("r", 10, env={ENV: "plain"}).bar_enabled
    assert Progress.from_env("r", 10, env={"PSML_PROGRESS_INTERVAL": "5"}).interval_s == 5


def test_the_dist_backend_reports_from_rank_0(smoke, prepared, tmp_path):
    """A spawned dist run: its rank 0 prints the evaluations, on the wall clock only."""
    spec = spec_for(smoke, iterations=12, backend="dist", shards=2, workers=2)
    cmd = [sys.executable, "-m", "psml_core.cli", "train", "--run", spec.to_json(),
           "--data", str(prepared[spec.dataset.name]), "--out", str(tmp_path)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != ENV}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = parse(done.stderr)
    assert lines[0]["event"] == "start" and lines[0]["backend"] == "dist"
    evals = [x for x in lines if x["event"] == "eval"]
    assert sorted(x["iter"] for x in evals) == ["10/12", "12/12", "5/12"]
    for x in evals:
        assert "simulated" not in x and x["bytes"] == "shard0"
        assert {"wall", "loss", "acc", "up", "down"} <= x.keys()
    assert "\r" not in done.stderr


@pytest.mark.parametrize("clock", ["simulated", "wall-clock"])
def test_line_format(clock):
    stream = io.StringIO()
    p = Progress("w/m/s/seed0", 100, clock, stream=stream, interval_s=0)
    p.evaluation(49, sim_time=1.5, loss=0.25, accuracy=0.875, bytes_up=10, bytes_down=20)
    (x,) = parse(stream.getvalue())
    assert x["event"] == "eval" and x["iter"] == "50/100" and x["run"] == "w/m/s/seed0"
    assert (x.get("simulated") == "1.5s") == (clock == "simulated")
    assert (x["loss"], x["acc"], x["up"], x["down"]) == ("0.2500", "0.8750", "10B", "20B")


def test_a_broken_stream_stops_the_lines_not_the_run() -> None:
    """`psml train ... 2>&1 | head`: a write that fails ends the reporting, nothing else."""

    class Broken(io.StringIO):
        def write(self, s: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    p = Progress("r", 10, stream=Broken(), bar=False, interval_s=0)
    p.start(iterations=10)
    p.tick(0)
    p.evaluation(1, loss=0.5, accuracy=0.5)
    p.close()


@pytest.mark.parametrize("interval", [-1.0, 0.0, float("inf"), float("nan")])
def test_no_heartbeat_for_a_non_positive_or_non_finite_interval(interval: float) -> None:
    out = io.StringIO()
    p = Progress("r", 10, stream=out, bar=False, interval_s=interval)
    for t in range(5):
        p.tick(t)
    assert "heartbeat" not in out.getvalue()


def test_a_timer_beats_before_the_first_iteration(smoke, prepared, tmp_path, monkeypatch):
    """The heartbeat was checked only inside the iteration loop: a slow data check (or
    placement, or one long iteration) printed nothing. Now a timer beats, naming the step."""
    import psml_core.engine.training as training

    spec = spec_for(smoke)
    slow_load = training.load_prepared

    def load(path):
        time.sleep(0.4)  # a large data set's SHA-256 check
        return slow_load(path)

    monkeypatch.setattr(training, "load_prepared", load)
    out = io.StringIO()
    progress = Progress(spec.run_id, ITERATIONS, stream=out, bar=False, interval_s=0.1)
    train(spec, prepared[spec.dataset.name], tmp_path, progress=progress)
    lines = parse(out.getvalue())
    beats = [x for x in lines if x["event"] == "heartbeat" and x.get("stage") == "data"]
    assert beats and all(x["iter"] == f"0/{ITERATIONS}" for x in beats)
    first_eval = next(i for i, x in enumerate(lines) if x["event"] == "eval")
    assert lines.index(beats[0]) < first_eval
    assert not progress._ticker._thread.is_alive()  # noqa: SLF001 - stopped with the run


def test_a_run_that_fails_before_training_stops_its_heartbeat(smoke, tmp_path):
    """The timer must not outlive a run whose data check (or placement, or build) failed."""
    from psml_core.errors import DataError

    spec = spec_for(smoke)
    progress = Progress(spec.run_id, ITERATIONS, stream=io.StringIO(), bar=False, interval_s=0.05)
    with pytest.raises(DataError):
        train(spec, tmp_path / "no-data", tmp_path / "out", progress=progress)
    thread = progress._ticker._thread  # noqa: SLF001
    assert thread is not None and not thread.is_alive()
