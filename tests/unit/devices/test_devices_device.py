from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from psml_core.config import config_root, load_yaml, schema_dir
from psml_core.devices.device import OPS, Device, device_from_dict, device_names, load_device
from psml_core.errors import ConfigError

SHIPPED = ("a100", "cpu-core", "v100")


def _minimal() -> dict:
    line = {"times": [1e-5, 2e-5, 1e-4]}
    return {
        "compute": {
            "flops_per_s": 1e10,
            "overhead_s": 5e-5,
            "source": {"kind": "estimated", "detail": "a test"},
        },
        "codec_costs": {
            "source": {"kind": "estimated", "detail": "a test"},
            "calibration": {"sizes": [1_000, 10_000, 100_000]},
            "reference": {"times": [1e-6, 2e-6, 1e-5]},
            "codecs": {"none": [{"ratio": None, **{op: dict(line) for op in OPS}}]},
            "wrappers": {"error_feedback": {**line, "inner_decode": True}},
        },
    }


def _write(root: Path, name: str, data: object) -> Path:
    d = root / "devices"
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    return p


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_device_files_validate_and_carry_sources(name):
    dev = load_device(name)
    assert isinstance(dev, Device) and dev.name == name
    assert dev.compute.flops_per_s > 0 and dev.compute.overhead_s >= 0
    for src in (dev.compute.source, dev.codec_costs.source, dev.compute.overhead_source):
        if src is not None:
            assert src.kind in ("measured", "cited", "estimated") and src.detail
    assert len(dev.sha256) == 64
    # every registered codec is priced, and both wrappers are
    from psml_core.codecs import CODECS

    assert set(CODECS.names()) <= set(dev.codec_costs.codecs)
    assert {"error_feedback", "momentum_correction"} <= set(dev.codec_costs.wrappers)


def test_cpu_core_is_measured_and_gpus_cited():
    assert load_device("cpu-core").compute.source.kind == "measured"
    for gpu in ("v100", "a100"):
        dev = load_device(gpu)
        assert dev.compute.source.kind == "cited"
        assert dev.codec_costs.source.kind == "estimated"


def test_config_schema_device_enum_equals_the_files_present():
    with open(schema_dir() / "config.schema.yaml", encoding="utf-8") as fh:
        schema = yaml.safe_load(fh)
    enum = schema["$defs"]["compute"]["properties"]["cost_profile"]["enum"]
    assert sorted(enum) == device_names() == sorted(SHIPPED)
    assert (config_root() / "devices").is_dir()


def test_unknown_device_is_one_line_listing_the_known_names():
    with pytest.raises(ConfigError) as exc:
        load_device("tpu")
    msg = str(exc.value)
    assert "\n" not in msg
    assert "'tpu' is not allowed" in msg and "a100, cpu-core, v100" in msg


def test_unknown_device_in_an_empty_root(tmp_path):
    with pytest.raises(ConfigError, match="no device files"):
        load_device("cpu-core", root=tmp_path)


def test_malformed_file_names_the_file_and_the_key(tmp_path):
    bad = _minimal()
    bad["compute"]["flops_per_s"] = -1
    p = _write(tmp_path, "bad", bad)
    with pytest.raises(ConfigError) as exc:
        load_device("bad", root=tmp_path)
    assert str(p) in str(exc.value) and "compute.flops_per_s" in str(exc.value)


def test_bad_source_kind_and_missing_op(tmp_path):
    bad = _minimal()
    bad["compute"]["source"]["kind"] = "guessed"
    _write(tmp_path, "kind", bad)
    with pytest.raises(ConfigError, match="allowed values: measured, cited, estimated"):
        load_device("kind", root=tmp_path)
    bad = _minimal()
    del bad["codec_costs"]["codecs"]["none"][0]["aggregate"]
    _write(tmp_path, "op", bad)
    with pytest.raises(ConfigError, match="missing required key.*aggregate"):
        load_device("op", root=tmp_path)


def test_not_yaml_and_non_finite(tmp_path):
    d = tmp_path / "devices"
    d.mkdir()
    (d / "broken.yaml").write_text("compute: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_device("broken", root=tmp_path)
    bad = _minimal()
    bad["codec_costs"]["reference"]["times"][1] = float("nan")
    _write(tmp_path, "nan", bad)
    with pytest.raises(ConfigError, match=r"reference\.times\[1\]"):
        load_device("nan", root=tmp_path)


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (lambda d: d["codecs"]["none"][0]["encode"].update(times=[1e-5, 2e-5]), "one time per"),
        (lambda d: d["wrappers"]["error_feedback"]["times"].append(1.0), "one time per"),
        (lambda d: d["reference"].update(times=[1e-6, 2e-6, 3e-6, 4e-6]), "one time per"),
        (lambda d: d["codecs"]["none"][0]["decode"]["times"].__setitem__(0, 0.0), "times"),
        (lambda d: d["codecs"]["none"][0]["aggregate"]["times"].__setitem__(2, -1e-6), "times"),
        (lambda d: d["codecs"]["none"][0]["encode"].update(times=[]), "times"),
        (lambda d: d["calibration"].update(sizes=[1_000, 100_000, 10_000]), "ascending"),
        (lambda d: d["calibration"].update(sizes=[1_000, 1_000, 10_000]), "sizes"),
        (lambda d: d.pop("calibration"), "calibration"),
        (lambda d: d["codecs"]["none"][0]["encode"].update(a=1e-5), "a"),
    ],
)
def test_cost_curves_need_one_positive_time_per_calibrated_size(edit, fragment):
    data = _minimal()
    edit(data["codec_costs"])
    with pytest.raises(ConfigError, match=fragment) as exc:
        device_from_dict(data, "x", source="device file 'x.yaml'")
    assert "x.yaml" in str(exc.value) and "\n" not in str(exc.value)


def test_curves_are_aligned_with_the_calibrated_sizes():
    dev = device_from_dict(_minimal(), "x", source="test")
    cc = dev.codec_costs
    assert cc.sizes == (1_000, 10_000, 100_000)
    assert cc.reference.sizes == cc.sizes and cc.reference.times == (1e-6, 2e-6, 1e-5)
    assert cc.codecs["none"][0].ops["encode"].at(10_000) == 2e-5
    assert cc.wrappers["error_feedback"].curve.at(100_000) == 1e-4


def test_ratios_must_ascend_and_null_ratio_is_alone():
    data = _minimal()
    e = data["codec_costs"]["codecs"]["none"][0]
    data["codec_costs"]["codecs"]["topk"] = [{**e, "ratio": 0.1}, {**e, "ratio": 0.01}]
    with pytest.raises(ConfigError, match="ascending"):
        device_from_dict(data, "x", source="test")
    data["codec_costs"]["codecs"]["topk"] = [{**e, "ratio": None}, {**e, "ratio": 0.01}]
    with pytest.raises(ConfigError, match="exactly one entry"):
        device_from_dict(data, "x", source="test")


def test_loading_is_cached_until_the_file_changes(tmp_path):
    p = _write(tmp_path, "dev", _minimal())
    one = load_device("dev", root=tmp_path)
    assert load_device("dev", root=tmp_path) is one
    data = _minimal()
    data["compute"]["flops_per_s"] = 2e10
    p.write_text(yaml.safe_dump(data) + "# changed\n", encoding="utf-8")
    assert load_device("dev", root=tmp_path).compute.flops_per_s == 2e10


def test_describe_names_the_file_and_its_hash():
    d = load_device("cpu-core").describe()
    assert d["cost_profile"] == "cpu-core" and d["device_file"] == "devices/cpu-core.yaml"
    assert d["source"]["kind"] == "measured" and len(d["device_file_sha256"]) == 64
    raw = load_yaml(config_root() / "devices" / "cpu-core.yaml")
    assert d["flops_per_s"] == raw["compute"]["flops_per_s"]
