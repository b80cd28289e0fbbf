"""Started: a SimPy process whose generator runs up to its first wait where it is created."""

from __future__ import annotations

import pytest
import simpy

from psml_core.engine.sim.started import Started


def test_runs_to_its_first_wait_at_once_then_resumes_like_a_process():
    env = simpy.Environment()
    seen: list[tuple[str, float]] = []

    def gen():
        seen.append(("start", env.now))
        yield env.timeout(2.0)
        seen.append(("after", env.now))
        return "done"

    proc = Started(env, gen())
    assert seen == [("start", 0.0)]  # a simpy.Process would not have started yet
    assert proc.is_alive
    env.run()
    assert seen == [("start", 0.0), ("after", 2.0)]
    assert proc.value == "done" and not proc.is_alive


def test_a_condition_waits_for_it_and_sees_its_value():
    env = simpy.Environment()

    def part(d: float):
        yield env.timeout(d)
        return d

    def waiter():
        procs = [Started(env, part(d)) for d in (3.0, 1.0, 2.0)]
        got = yield env.all_of(procs)
        return [got[p] for p in procs], env.now

    w = env.process(waiter())
    env.run()
    assert w.value == ([3.0, 1.0, 2.0], 3.0)


def test_same_order_as_a_process_when_nothing_else_runs_in_the_creating_step():
    def trace(start):
        env = simpy.Environment()
        log: list[str] = []

        def msg(name: str, d: float):
            log.append(f"{name}>")
            yield env.timeout(d)
            log.append(f"{name}<")

        def worker(name: str):
            yield env.timeout(1.0)
            procs = [start(env, msg(f"{name}{i}", d)) for i, d in enumerate((0.5, 0.0, 0.5))]
            yield env.all_of(procs)
            log.append(f"{name} done")

        for name in "ab":
            env.process(worker(name))
        env.run()
        return log

    assert trace(Started) == trace(simpy.Process)


def test_a_failure_fails_the_process_and_reaches_whoever_waits():
    env = simpy.Environment()

    def bad():
        yield env.timeout(1.0)
        raise ValueError("broken message")

    def waiter():
        with pytest.raises(ValueError, match="broken message"):
            yield Started(env, bad())
        return "handled"

    w = env.process(waiter())
    env.run()
    assert w.value == "handled"


def test_the_creating_process_stays_the_active_one():
    env = simpy.Environment()
    active: list[object] = []

    def child():
        yield env.timeout(1.0)

    def parent():
        Started(env, child())
        active.append(env.active_process)
        yield env.timeout(0.0)

    p = env.process(parent())
    env.run()
    assert active == [p]
