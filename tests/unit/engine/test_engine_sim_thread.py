"""A shard's server thread: one holder at a time, first come first served, no event when free."""

from __future__ import annotations

import simpy

from psml_core.engine.sim.thread import ServerThread


def test_requests_are_served_one_at_a_time_in_the_order_they_asked():
    env = simpy.Environment()
    thread = ServerThread(env)
    spans: list[tuple[str, float, float]] = []

    def job(name: str, arrive: float, work: float):
        yield env.timeout(arrive)
        turn = thread.acquire()
        if turn is not None:
            yield turn
        start = env.now
        yield env.timeout(work)
        spans.append((name, start, env.now))
        thread.release()

    for name, arrive, work in [("a", 0.0, 2.0), ("b", 0.5, 1.0), ("c", 0.2, 1.0), ("d", 5.0, 1.0)]:
        env.process(job(name, arrive, work))
    env.run()
    assert spans == [("a", 0.0, 2.0), ("c", 2.0, 3.0), ("b", 3.0, 4.0), ("d", 5.0, 6.0)]
    assert not thread.busy and not thread.queue


def test_a_free_thread_is_taken_without_an_event():
    env = simpy.Environment()
    thread = ServerThread(env)
    assert thread.acquire() is None and thread.busy
    waiting = thread.acquire()
    assert waiting is not None and not waiting.triggered
    thread.release()  # handed over, still busy
    assert waiting.triggered and thread.busy
    thread.release()
    assert not thread.busy
