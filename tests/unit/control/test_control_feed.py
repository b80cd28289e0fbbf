"""The controller feed both backends use: complete steps in order, one ratio per step."""

from __future__ import annotations

from psml_core.control import Controller, ControllerFeed


def test_controller_feed_observes_complete_steps_in_order_and_fixes_ratios():
    class Recorder(Controller):
        name = "recorder"

        def __init__(self):
            self.seen = []

        def observe(self, obs):
            self.seen.append(obs)

        def ratio(self, step):
            return 1.0 / (1 + len(self.seen))

    ctl = Recorder()
    feed = ControllerFeed(ctl, workers=2)
    feed.report(0, 0, 0.5, 1.0)
    assert feed.ratio(1) == 1.0  # step 0 incomplete: nothing observed yet
    feed.report(1, 0, 0.7, 0.2)
    feed.report(0, 1, 0.1, 0.1)
    assert feed.ratio(1) == 1.0  # fixed the first time it was asked
    assert feed.ratio(2) == 0.5  # step 0 complete now, step 1 not
    assert [(o.step, o.comm_s, o.compute_s) for o in ctl.seen] == [(0, 0.7, 1.0)]


# --------------------------------------------------------------------------- touched pulls (jpdc)
