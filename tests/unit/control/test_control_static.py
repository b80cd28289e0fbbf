from __future__ import annotations

import pytest

from psml_core.config import BlockSpec
from psml_core.control import CONTROLLERS, Observation
from psml_core.errors import ConfigError


def test_static_ratio_is_constant():
    c = CONTROLLERS.build(BlockSpec("static", {"ratio": 0.01}))
    c.observe(Observation(step=0, comm_s=10.0, compute_s=0.1))
    assert [c.ratio(t) for t in range(3)] == [0.01] * 3


@pytest.mark.parametrize("ratio", [0.0, -0.1, 1.5])
def test_ratio_outside_unit_interval_rejected(ratio):
    with pytest.raises(ConfigError, match=r"params.ratio must be in \(0, 1\]"):
        CONTROLLERS.build(BlockSpec("static", {"ratio": ratio}))


def test_unknown_param_is_a_config_error():
    with pytest.raises(ConfigError, match="controller 'static': bad params"):
        CONTROLLERS.build(BlockSpec("static", {"gain": 2}))
