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


def _trace(start, *, at_zero: bool, shared_release: bool, loop_logs: bool = False):
    """Workers that start messages the way the sim transport does; the order they ran in.

    Each message's first part appends to a shared log and schedules a timeout (as a pull's
    request reaches the network); the workers start at time 0 (the backend's urgent loop
    starts) or after a timeout, and resume together from one event (a drain's release) or
    each from its own.
    """
    env = simpy.Environment()
    log: list[str] = []
    release = env.event()

    def msg(name: str, d: float):
        log.append(f"{name}>")
        yield env.timeout(d)
        log.append(f"{name}<")

    def worker(name: str):
        if not at_zero:
            yield env.timeout(1.0)
        if shared_release:
            yield release
        if loop_logs:
            log.append(f"{name} begins")  # touches the shared log before its messages start
        procs = [start(env, msg(f"{name}{i}", d)) for i, d in enumerate((0.5, 0.0, 0.5))]
        yield env.all_of(procs)
        log.append(f"{name} done")

    for name in "abc":
        env.process(worker(name))
    if shared_release:
        env.timeout(2.0).callbacks.append(lambda _: release.succeed())
    env.run()
    return log


@pytest.mark.parametrize("at_zero", [False, True])
@pytest.mark.parametrize("shared_release", [False, True])
def test_same_order_as_a_process_where_the_simulator_starts_them(at_zero, shared_release):
    kw = {"at_zero": at_zero, "shared_release": shared_release}
    assert _trace(Started, **kw) == _trace(simpy.Process, **kw)


def test_the_order_differs_when_the_creating_step_touches_the_same_state():
    # The precondition in started.py's docstring, shown to matter: workers released together
    # that log before their messages start interleave differently.
    kw = {"at_zero": False, "shared_release": True, "loop_logs": True}
    assert _trace(Started, **kw) != _trace(simpy.Process, **kw)


def test_a_failure_in_the_first_part_fails_the_process_not_the_creator():
    env = simpy.Environment()

    def bad():
        raise ValueError("broken request")
        yield  # pragma: no cover  (a generator)

    def waiter():
        proc = Started(env, bad())  # the creator goes on
        with pytest.raises(ValueError, match="broken request"):
            yield proc
        return "handled"

    w = env.process(waiter())
    env.run()
    assert w.value == "handled"


def test_refuses_what_is_not_a_generator():
    with pytest.raises(ValueError, match="is not a generator"):
        Started(simpy.Environment(), object())  # type: ignore[arg-type]


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
