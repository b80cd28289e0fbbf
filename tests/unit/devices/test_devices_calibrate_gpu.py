"""`psml bench calibrate --torch-device cuda`: the GPU path, run on the CPU (--force-cpu) here."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from psml_core.bench.calibrate import format_summary
from psml_core.cli import main
from psml_core.config import config_root, load_yaml
from psml_core.devices.device import load_device

CPU = config_root() / "devices" / "cpu-core.yaml"


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("gpu")
    out = root / "devices" / "forced.yaml"
    argv = [
        "bench",
        "calibrate",
        "--torch-device",
        "cuda",
        "--force-cpu",
        "--quick",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    return root, out.read_text(encoding="utf-8")


def test_forced_path_writes_a_loadable_profile_that_says_what_it_is(measured) -> None:
    root, text = measured
    dev = load_device("forced", root=root)  # validates against device.schema.yaml
    assert dev.compute.source.kind == "measured"
    assert "FORCED" in dev.description and "FORCED" in dev.compute.source.detail
    costs = dev.codec_costs
    assert costs.source.kind == "estimated"
    assert "host (NumPy) code" in costs.source.detail and "MEASURED" in costs.source.detail
    assert costs.calibration["scaled_from"] == "cpu-core.yaml"
    cpu = load_device("cpu-core")
    assert set(costs.codecs) == set(cpu.codec_costs.codecs)
    # --quick: the smallest size and the fourth (2^18), where a copy has a time per element
    assert costs.sizes == (cpu.codec_costs.sizes[0], cpu.codec_costs.sizes[3])
    assert "--force-cpu" in text and "estimated from cpu-core.yaml" in text


def test_checks_hold_measured_selection_kernels_beside_the_estimate(measured) -> None:
    root, _ = measured
    raw = load_yaml(root / "devices" / "forced.yaml", what="device file")
    checks = raw["codec_costs"]["checks"]
    assert checks["ratio"] == 0.01
    assert len(checks["topk_encode"]["times"]) == 2 and min(checks["topk_encode"]["times"]) > 0


def test_the_summary_says_the_codec_table_is_estimated(measured) -> None:
    root, _ = measured
    raw = load_yaml(root / "devices" / "forced.yaml", what="device file")
    assert "codec costs: estimated from cpu-core.yaml's CPU table" in format_summary(raw)
    assert "codec costs: estimated" in format_summary(load_yaml(CPU.parent / "v100.yaml"))
    assert "codec costs: measured" in format_summary(load_yaml(CPU))


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is visible")
def test_without_a_gpu_the_cuda_path_is_one_line(tmp_path, capsys) -> None:
    assert main(["bench", "calibrate", "--torch-device", "cuda", "--out", str(tmp_path / "g.yaml")])
    err = capsys.readouterr().err
    assert "torch sees no CUDA device" in err and "--force-cpu" in err and err.count("\n") == 1
    assert not (tmp_path / "g.yaml").exists()


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ([], "needs --out"),
        (["--out", "a.yaml", "--estimate-gpu", "v100"], "pick one"),
        (["--out", "a.yaml", "--from", "missing.yaml"], "not exist"),
    ],
)
def test_bad_arguments_are_one_line(extra, fragment, capsys) -> None:
    assert main(["bench", "calibrate", "--torch-device", "cuda", "--force-cpu", *extra]) != 0
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1
