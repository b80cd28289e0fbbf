from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from psml_core.config import ComputeSpec, WorkloadSpec, config_root, load_yaml
from psml_core.devices import DEVICE_PROFILES, make_compute_model
from psml_core.devices.compute import ProfileCompute
from psml_core.devices.device import load_device
from psml_core.errors import ConfigError
from psml_core.models import make_model


def _mlp():
    wl = WorkloadSpec(
        name="w", dataset="d", model="mlp", batch_size=4, lr=0.1, iterations=1, hidden=(8,)
    )
    return make_model(wl, 10, 3), np.zeros((4, 10), dtype=np.float32)


def test_profile_time_is_overhead_plus_flops_over_rate():
    model, X = _mlp()
    cm = make_compute_model(ComputeSpec("profile", "v100"))
    prof = load_device("v100").compute
    expected = prof.overhead_s + 6 * (10 * 8 + 8 * 3) * 4 / prof.flops_per_s
    assert cm.seconds(model, X) == pytest.approx(expected)
    assert cm.deterministic and cm.describe()["cost_profile"] == "v100"
    assert DEVICE_PROFILES["v100"] == prof and "v100" in DEVICE_PROFILES
    assert sorted(DEVICE_PROFILES) == ["a100", "cpu-core", "v100"]


@pytest.mark.parametrize("device", ["cpu-core", "v100", "a100"])
def test_profile_is_deterministic_and_describes_its_source(device):
    model, X = _mlp()
    a = make_compute_model(ComputeSpec("profile", device))
    b = make_compute_model(ComputeSpec("profile", device))
    assert [a.seconds(model, X) for _ in range(3)] == [b.seconds(model, X)] * 3
    d = a.describe()
    assert d["model"] == "profile" and d["cost_profile"] == device
    assert d["source"]["kind"] in ("measured", "cited", "estimated") and d["source"]["detail"]
    assert d["device_file"] == f"devices/{device}.yaml" and len(d["device_file_sha256"]) == 64
    json.dumps(d)  # goes into summary.json


def test_profile_reads_the_device_file(tmp_path):
    src = load_yaml(config_root() / "devices" / "cpu-core.yaml")
    src["compute"].update(flops_per_s=1e9, overhead_s=0.5)
    (tmp_path / "devices").mkdir()
    (tmp_path / "devices" / "slow.yaml").write_text(yaml.safe_dump(src), encoding="utf-8")
    model, X = _mlp()
    cm = ProfileCompute(ComputeSpec("profile", "slow"), root=tmp_path)
    assert cm.seconds(model, X) == pytest.approx(0.5 + 6 * (10 * 8 + 8 * 3) * 4 / 1e9)


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
    with pytest.raises(
        ConfigError, match="key 'compute.cost_profile': 'tpu' is not allowed"
    ) as exc:
        make_compute_model(ComputeSpec("profile", "tpu"))
    assert "a100, cpu-core, v100" in str(exc.value)
