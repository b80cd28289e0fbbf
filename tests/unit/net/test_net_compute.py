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
    assert cm.seconds(model, X, measured_s=123.0) == pytest.approx(expected)
    assert cm.deterministic


def test_measured_returns_the_measurement():
    cm = make_compute_model(ComputeSpec("measured"))
    assert cm.seconds(None, None, measured_s=0.25) == 0.25  # type: ignore[arg-type]
    assert not cm.deterministic


def test_unknown_device():
    with pytest.raises(ConfigError, match="key 'compute.device': 'tpu' is not allowed"):
        make_compute_model(ComputeSpec("profile", "tpu"))
