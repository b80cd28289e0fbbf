from __future__ import annotations

import numpy as np
import pytest

from psml_core.config import ComputeSpec, WorkloadSpec
from psml_core.errors import ConfigError
from psml_core.models import make_model
from psml_core.net import DEVICE_PROFILES, make_compute_model


def test_profile_time_is_overhead_plus_flops_over_rate():
    wl = WorkloadSpec(
        name="w", dataset="d", model="mlp", batch_size=4, lr=0.1, iterations=1, hidden=(8,)
    )
    model = make_model(wl, 10, 3)
    X = np.zeros((4, 10), dtype=np.float32)
    cm = make_compute_model(ComputeSpec("profile", "v100"))
    prof = DEVICE_PROFILES["v100"]
    expected = prof.overhead_s + 6 * (10 * 8 + 8 * 3) * 4 / prof.flops_per_s
    assert cm.seconds(model, X) == pytest.approx(expected)
    assert cm.deterministic and cm.describe()["device"] == "v100"


def test_measured_is_calibrated_once_and_scales_with_flops():
    wl = WorkloadSpec(
        name="w", dataset="d", model="mlp", batch_size=4, lr=0.1, iterations=1, hidden=(32,)
    )
    model = make_model(wl, 64, 10)
    rng = np.random.default_rng(0)
    X, y = rng.random((32, 64), dtype=np.float32), rng.integers(0, 10, 32)
    cm = make_compute_model(ComputeSpec("measured"))
    with pytest.raises(RuntimeError, match="before calibrate"):
        cm.seconds(model, X)
    cm.calibrate(model, X, y, model.init_params(0))
    one = cm.seconds(model, X)
    assert one > 0 and cm.seconds(model, X[:16]) == pytest.approx(one / 2)
    assert cm.seconds(model, X) == one  # fixed after calibration
    assert not cm.deterministic
    assert cm.describe()["calibration_batch_wall_clock_s"] > 0


def test_unknown_device():
    with pytest.raises(ConfigError, match="key 'compute.device': 'tpu' is not allowed"):
        make_compute_model(ComputeSpec("profile", "tpu"))
