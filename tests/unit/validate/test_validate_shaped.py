"""The simulator against real processes on a shaped link (issue 28), where this host allows it.

Needs root, network namespaces, TUN devices and a C compiler (:func:`preflight`); elsewhere it
is skipped with the reason. Two ranks (one worker, one shard), two methods, 60 iterations on
a 100 Mbit/s link with 5 ms one way: the link model's error (the sim plus the overhead measured
on the unshaped, undelayed link) must be within the validation's bound.
"""

from __future__ import annotations

import subprocess

import pytest

from psml_core.validate.harness import Plan, link_scenario, run_validation
from psml_core.validate.netns import preflight

WHY = preflight()

pytestmark = pytest.mark.skipif(WHY is not None, reason=f"shaped-link validation: {WHY}")


@pytest.mark.slow  # 21-35 s on 2 busy vCPUs: four dist runs, each starting two processes
def test_two_ranks_two_methods_on_a_shaped_link_within_the_bound(smoke) -> None:
    plan = Plan(
        links=(link_scenario(smoke, "100:5", by_name=False),),
        methods=("dense_bsp", "topk_ef"),
        workload="digits_mlp",
        workers=1,
        shards=1,
        iterations=60,  # the first iterations pay TCP slow start: more amortise it
        repeats=1,
        seed=smoke.seeds[0],
        max_error=0.10,
    )
    table = run_validation(smoke, plan, "pytest")
    assert [r.method for r in table.rows] == ["dense_bsp", "topk_ef"]
    outside = [r for r in table.rows if not table.within(r)]
    assert not outside, table.markdown()
    # Every namespace the testbeds made is gone.
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "psmlv" not in left
