"""The controller feed both backends use: complete steps in order, one ratio per step."""

from __future__ import annotations

from psml_core.control import Controller, ControllerFeed, DC2Controller, Observation


class Recorder(Controller):
    name = "recorder"

    def __init__(self):
        self.seen = []

    def observe(self, obs):
        self.seen.append(obs)

    def ratio(self, step):
        return 1.0 / (1 + len(self.seen))


def test_controller_feed_observes_complete_steps_in_order_and_fixes_ratios():
    ctl = Recorder()
    feed = ControllerFeed(ctl, workers=2)
    feed.report(0, 0, 0.5, 1.0)
    assert feed.ratio(1) == 1.0  # step 0 incomplete: nothing observed yet
    feed.report(1, 0, 0.7, 0.2)
    feed.report(0, 1, 0.1, 0.1)
    assert feed.ratio(1) == 1.0  # fixed the first time it was asked
    assert feed.ratio(2) == 0.5  # step 0 complete now, step 1 not
    assert [(o.step, o.comm_s, o.compute_s) for o in ctl.seen] == [(0, 0.7, 1.0)]


def test_feed_gives_each_observation_the_ratio_its_step_ran_at():
    ctl = DC2Controller(warmup=0)
    seen = []
    ctl.observe = seen.append  # type: ignore[method-assign]
    feed = ControllerFeed(ctl, workers=1)
    assert feed.ratio(0) == 1.0
    feed.report(0, 0, 0.2, 0.1)
    feed.ratio(1)
    assert seen == [Observation(step=0, comm_s=0.2, compute_s=0.1, ratio=1.0)]


def test_feed_network_delay_is_the_slowest_shard_round():
    ctl = Recorder()
    feed = ControllerFeed(ctl, workers=2)
    feed.transfer(0, 0, 0, 9.0)  # a pull before the step was opened: no step to join
    feed.open_step(0, 0, compute_s=1.0)
    feed.open_step(1, 0, compute_s=3.0)
    # worker 0: shard 0's push, request and answer; shard 1's push and answer
    for shard, seconds in [(0, 0.5), (1, 0.25), (0, 0.125), (0, 0.5), (1, 1.0)]:
        feed.transfer(0, 0, shard, seconds)
    feed.transfer(1, 0, 0, 0.75)
    feed.close_step(0, 0)
    assert feed.figures[0] == {0: (1.25, 1.0)}  # max(0.5 + 0.125 + 0.5, 0.25 + 1.0)
    feed.close_step(1, 0)
    feed.close_step(1, 0)  # closing twice, or a step never opened, reports nothing more
    feed.close_step(1, 7)
    feed.ratio(1)
    assert [(o.comm_s, o.compute_s) for o in ctl.seen] == [(1.25, 3.0)]
    assert not feed.open and not feed.figures
