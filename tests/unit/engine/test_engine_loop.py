"""The worker loop over a scripted transport: what it records, when it stops, how it runs."""

from __future__ import annotations

import ast
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from psml_core.engine.loop import Pulled, Pushed, Transport, WorkerLoop, done, run_blocking
from psml_core.engine.server import BUDGET_KEY
from psml_core.errors import Diverged

PACKAGE = Path(__file__).resolve().parents[3] / "psml_core"


class FakeWorker:
    """A worker whose gradient is ones (or NaN from step ``nan_at``), loss 1.0."""

    rank = 3

    def __init__(self, nan_at: int = -1) -> None:
        self.steps = 0
        self.nan_at = nan_at
        self.last_batch = np.zeros((2, 2))

    def compute(self) -> tuple[float, np.ndarray]:
        self.steps += 1
        if self.steps - 1 == self.nan_at:
            return math.nan, np.full(4, np.nan)
        return 1.0, np.ones(4)

    def local_round(self, steps: int, step_cost: Any) -> tuple[float, np.ndarray, float]:
        self.steps += steps
        return 0.5, np.full(4, float(steps)), sum(step_cost(self.last_batch) for _ in range(steps))


class ScriptedTransport(Transport):
    """Pulls of 10 B per shard that take 1 s, pushes of 100 B that take 2 s, compute 3 s."""

    def __init__(self, budgets: list[int] | None = None, stops: bool = True) -> None:
        self.remote = [False, True]
        self.stops_diverged = stops
        self.clock = 0.0
        self.budgets = budgets
        self.rows: list[dict[str, Any]] = []
        self.calls: list[str] = []

    def now(self) -> float:
        return self.clock

    def begin(self, t: int, prev_comm: float) -> Any:
        self.calls.append(f"begin {t} {prev_comm:g}")
        return done(None)

    def pull(self, t: int) -> Any:
        self.clock += 1.5
        extra = [{BUDGET_KEY: self.budgets[t]}, {}] if self.budgets else [{}, {}]
        return done(Pulled(up=[10, 10], down=[20, 30], extra=extra, wait=0.5, comm=1.0))

    def step_cost(self, batch: Any) -> float:
        return 3.0

    def computed(self, t: int, cost: float) -> float:
        self.clock += cost
        return cost

    def push(self, t: int, vector: np.ndarray, compute: float, report: Any) -> Any:
        self.calls.append(f"push {t} {vector.sum():g} {report is not None}")
        self.clock += 2.0
        return done(Pushed(up=[100, 200], ratio=0.1, comm=2.0, round_comm=2.0, codec=0.25))

    def record(self, t: int, row: dict[str, Any]) -> None:
        self.rows.append(row)

    def last_row(self) -> dict[str, Any]:
        return self.rows[-1]


def test_a_step_is_recorded_from_its_pull_and_push() -> None:
    tr = ScriptedTransport()
    run_blocking(WorkerLoop(FakeWorker(), tr, iterations=3, rounds=False).run())  # type: ignore[arg-type]
    assert [r["iteration"] for r in tr.rows] == [0, 1, 2]
    row = tr.rows[0]
    assert row["worker"] == 3
    assert (row["shard_bytes_up"], row["shard_bytes_down"]) == ((110, 210), (20, 30))
    assert (row["remote_bytes_up"], row["remote_bytes_down"]) == (210, 30)
    assert (row["compute_s"], row["comm_s"], row["wait_s"], row["codec_s"]) == (3.0, 3.0, 0.5, 0.25)
    assert row["time_s"] == 6.5 and tr.rows[-1]["time_s"] == 19.5
    # the previous round's communication (pull + push) reaches the next step's hook
    assert tr.calls[:3] == ["begin 0 0", "push 0 4 False", "begin 1 3"]


def test_a_spent_budget_folds_the_last_pull_into_the_last_row() -> None:
    tr = ScriptedTransport(budgets=[2, 1, 0, 5])
    worker = FakeWorker()
    run_blocking(WorkerLoop(worker, tr, iterations=4, rounds=True).run())  # type: ignore[arg-type]
    assert [r["local_steps"] for r in tr.rows] == [2, 1]
    assert worker.steps == 3  # the round of budget 0 computes nothing, the 4th never starts
    last = tr.rows[-1]
    assert last["shard_bytes_up"] == (120, 220) and last["shard_bytes_down"] == (40, 60)
    assert last["comm_s"] == 4.0 and last["wait_s"] == 1.0
    assert last["time_s"] == tr.clock
    assert "push 0 8 True" in tr.calls  # a round pushes its change with a round report


def test_a_non_finite_step_ends_the_run_unless_the_transport_goes_on() -> None:
    with pytest.raises(Diverged):
        run_blocking(WorkerLoop(FakeWorker(nan_at=1), ScriptedTransport(), 3, False).run())  # type: ignore[arg-type]
    tr = ScriptedTransport(stops=False)  # a collective's ranks must all reach every step
    run_blocking(WorkerLoop(FakeWorker(nan_at=1), tr, 3, False).run())  # type: ignore[arg-type]
    assert math.isnan(tr.rows[1]["loss"]) and len(tr.rows) == 3


def test_run_blocking_refuses_a_transport_that_suspends() -> None:
    class Suspends(ScriptedTransport):
        def pull(self, t: int) -> Any:
            yield "an event"
            return None

    with pytest.raises(RuntimeError, match="suspended the worker loop on 'an event'"):
        run_blocking(WorkerLoop(FakeWorker(), Suspends(), 2, False).run())  # type: ignore[arg-type]


def _calls(tree: ast.AST, name: str) -> int:
    return sum(
        isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == name
        for n in ast.walk(tree)
    )


def test_the_iteration_is_written_once() -> None:
    """Only the worker loop computes a step and builds its record; backends are transports."""
    where: dict[str, list[str]] = {"compute_step": [], "step_row": []}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for name, found in where.items():
            if _calls(tree, name):
                found.append(path.relative_to(PACKAGE).as_posix())
    assert where["compute_step"] == ["engine/loop.py"]
    # step_row: the loop's record, and a diverged sim run's last record (no step to run)
    assert where["step_row"] == ["engine/loop.py", "engine/sim/backend.py"]
