from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from psml_core.cli import main


def test_config_prints_effective_config(capsys, repo):
    rc = main(
        [
            "config",
            "--configfile",
            str(repo / "config/config.yaml"),
            "--config-dir",
            str(repo / "config"),
            "--set",
            "workers=3",
        ]
    )
    assert rc == 0
    assert "workers: 3" in capsys.readouterr().out


def test_config_error_is_one_line_no_traceback(repo):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "psml_core",
            "config",
            "--configfile",
            str(repo / "config/config.yaml"),
            "--config-dir",
            str(repo / "config"),
            "--set",
            "methods=[nope]",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "unknown method 'nope'" in proc.stderr and "dense_bsp" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_train_end_to_end_and_corrupt_data(smoke, prepared, tmp_path: Path, capsys):
    spec = smoke.runs()[0]
    out = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--run",
                spec.to_json(),
                "--data",
                str(prepared[spec.dataset.name]),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run_id"] == spec.run_id and summary["clock"] == "simulated"
    # A corrupt data file is named, and nothing is written.
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in prepared[spec.dataset.name].iterdir():
        (bad / f.name).write_bytes(f.read_bytes())
    data = bytearray((bad / "data.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (bad / "data.npz").write_bytes(bytes(data))
    capsys.readouterr()
    assert (
        main(
            ["train", "--run", spec.to_json(), "--data", str(bad), "--out", str(tmp_path / "never")]
        )
        == 3
    )
    err = capsys.readouterr().err
    assert "data.npz" in err and "SHA-256" in err
    assert not (tmp_path / "never").exists()


def test_bad_run_json(capsys):
    assert main(["train", "--run", "{nope", "--data", "x", "--out", "y"]) == 2
    assert "--run is not valid JSON" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", ["prepare", "analyze", "partition", "train", "compare", "report"])
def test_every_subcommand_has_help(cmd):
    with pytest.raises(SystemExit) as info:
        main([cmd, "--help"])
    assert info.value.code == 0


def test_dist_launcher_must_exist(smoke, prepared, tmp_path: Path, capsys, monkeypatch):
    import dataclasses

    spec = dataclasses.replace(smoke.runs()[0], backend="dist")
    monkeypatch.setenv("PATH", str(tmp_path))  # no srun here
    rc = main(
        [
            "train",
            "--run",
            spec.to_json(),
            "--data",
            str(prepared[spec.dataset.name]),
            "--out",
            str(tmp_path / "out"),
            "--launcher",
            "srun",
        ]
    )
    assert rc == 2
    assert "--launcher srun: 'srun' is not on PATH" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({"name": "d", "source": "digits", "test_fraction": 1.5}, "key 'test_fraction': 1.5"),
        ({"name": "z", "source": "zipf_sparse", "rows": -4}, "key 'rows': -4 is out of range"),
        ({"name": "z", "source": "zipf_sparse"}, "missing required key(s) rows"),
        ({"name": "d", "source": "digits", "seed": 1.0}, "key 'seed': expected integer"),
        ({"name": "d", "source": "digits", "colour": 1}, "unknown key 'colour'"),
        ({"source": "digits"}, "key 'dataset.name': expected a name"),
        ([1, 2], "expected object, got [1, 2]"),
    ],
)
def test_prepare_rejects_an_invalid_spec(tmp_path: Path, capsys, spec, fragment):
    """A hand-written --spec gets the config's checks: one line, exit 2, no output directory."""
    rc = main(["prepare", "--spec", json.dumps(spec), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("psml prepare: error: ") and err.count("\n") == 1
    assert fragment in err, err
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- bench calibrate


def test_bench_calibrate_quick_writes_device_files_that_load(tmp_path: Path, capsys):
    from psml_core.bench import calibrate as cal
    from psml_core.devices.codec_cost import CodecCostModel
    from psml_core.devices.device import load_device

    out = tmp_path / "devices" / "cpu-core.yaml"
    rc = main(
        [
            "bench",
            "calibrate",
            "--quick",
            "--cost-profile",
            "cpu-core",
            "--out",
            str(out),
            "--estimate-gpu",
            "v100,a100",
            "--note",
            "a test",
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "| codec | ratio | op |" in text and f"wrote {out}" in text
    assert f"psml bench calibrate --cost-profile cpu-core --out {out}" in out.read_text()
    dev = load_device("cpu-core", root=tmp_path)  # validates against device.schema.yaml
    assert dev.compute.source.kind == "measured"
    assert "--quick" in dev.compute.source.detail and "a test" in dev.compute.source.detail
    assert "threads: 1" in dev.codec_costs.source.detail
    assert {"error_feedback", "momentum_correction"} <= set(dev.codec_costs.wrappers)
    assert dev.codec_costs.wrappers["error_feedback"].inner_decode  # observed, not assumed
    for gpu in ("v100", "a100"):
        g = load_device(gpu, root=tmp_path)
        assert g.compute.source.kind == "cited" and g.codec_costs.source.kind == "estimated"
        assert set(g.codec_costs.codecs) == set(dev.codec_costs.codecs)
    # every curve holds one measured time per calibrated size, and the model returns them
    cc = dev.codec_costs
    assert cc.sizes == cal.QUICK.sizes and len(cc.reference.times) == len(cc.sizes)
    topk = cc.codecs["topk"][0]
    assert topk.ratio == cal.QUICK.ratios[0]
    model = CodecCostModel.for_device("cpu-core", root=tmp_path)
    for op, curve in topk.ops.items():
        assert len(curve.times) == len(cc.sizes) and min(curve.times) > 0
        assert [model.op_s("topk", op, n, topk.ratio) for n in cc.sizes] == list(curve.times)
    assert model.op_s("topk", "encode", 4 * cc.sizes[-1], topk.ratio) == pytest.approx(
        4 * topk.ops["encode"].times[-1]
    )
    # the GPU estimate, point by point: relative to the memcpy at the same size, moved at HBM
    spec = cal.GPU_SPECS["v100"]
    gpu = load_device("v100", root=tmp_path).codec_costs
    assert gpu.sizes == cc.sizes
    for i, n in enumerate(cc.sizes):
        ratio_to_memcpy = topk.ops["encode"].times[i] / cc.reference.times[i]
        want = cal.GPU_CALL_OVERHEAD_S + ratio_to_memcpy * 8 * n / spec.hbm_bytes_per_s
        assert gpu.codecs["topk"][0].ops["encode"].times[i] == pytest.approx(want, rel=1e-3)

    # --from regenerates the GPU files from an existing CPU file without measuring
    (tmp_path / "devices" / "v100.yaml").unlink()
    assert main(["bench", "calibrate", "--from", str(out), "--estimate-gpu", "v100"]) == 0
    assert load_device("v100", root=tmp_path).codec_costs == gpu


def test_bench_calibrate_update_remeasures_only_the_named_codecs(tmp_path: Path, capsys):
    from psml_core.bench.calibrate_codecs import DFS_BLOCK_SIZES, OMNIREDUCE_BLOCK_SIZES
    from psml_core.config import load_yaml
    from psml_core.devices.device import load_device

    out = tmp_path / "devices" / "cpu-core.yaml"
    assert (
        main(["bench", "calibrate", "--quick", "--cost-profile", "cpu-core", "--out", str(out)])
        == 0
    )
    before = load_yaml(out)
    dfs = load_device("cpu-core", root=tmp_path).codec_costs.codecs["dfs"]
    assert sorted({e.block_size for e in dfs}) == list(DFS_BLOCK_SIZES)  # priced per B
    omni = load_device("cpu-core", root=tmp_path).codec_costs.codecs["omnireduce"]
    assert sorted({e.block_size for e in omni}) == list(OMNIREDUCE_BLOCK_SIZES)  # so is it
    capsys.readouterr()
    assert main(["bench", "calibrate", "--update", "--codecs", "dfs", "--out", str(out)]) == 0
    after = load_yaml(out)
    assert after["compute"] == before["compute"]
    kept = {k: v for k, v in before["codec_costs"]["codecs"].items() if k != "dfs"}
    assert {k: after["codec_costs"]["codecs"][k] for k in kept} == kept
    assert after["codec_costs"]["reference"] == before["codec_costs"]["reference"]
    assert after["codec_costs"]["calibration"] == before["codec_costs"]["calibration"]
    assert "re-measured dfs" in after["codec_costs"]["source"]["detail"]
    text = out.read_text()
    assert text.startswith("# Device profile 'cpu-core', measured by")
    assert "re-measured on" in text.splitlines()[1] and "Do not edit" in text
    load_device("cpu-core", root=tmp_path)  # still a valid device file
    # missing arguments and estimated tables are one line each
    assert main(["bench", "calibrate", "--update", "--codecs", "dfs"]) == 2
    assert "--update needs --out FILE" in capsys.readouterr().err
    main(["bench", "calibrate", "--from", str(out), "--estimate-gpu", "v100"])
    v100 = str(out.parent / "v100.yaml")
    assert main(["bench", "calibrate", "--update", "--codecs", "dfs", "--out", v100]) == 2
    assert "are estimated, not measured on this machine" in capsys.readouterr().err


def test_bench_calibrate_from_a_file_without_measured_points_is_one_line(tmp_path, capsys):
    import yaml

    old = tmp_path / "old.yaml"
    line = {"a": 1e-5, "b": 1e-9}
    old.write_text(
        yaml.safe_dump(
            {
                "compute": {
                    "flops_per_s": 1e10,
                    "overhead_s": 0.0,
                    "source": {"kind": "measured", "detail": "t"},
                },
                "codec_costs": {
                    "source": {"kind": "measured", "detail": "t"},
                    "reference": line,
                    "codecs": {"none": [{"ratio": None, "encode": line}]},
                    "wrappers": {},
                },
            }
        ),
        encoding="utf-8",
    )
    assert main(["bench", "calibrate", "--from", str(old), "--estimate-gpu", "v100"]) != 0
    err = capsys.readouterr().err
    assert "invalid device file 'old.yaml'" in err and err.count("\n") == 1
    assert not (tmp_path / "v100.yaml").exists()


def test_calibrated_points_are_floored_and_carry_their_spread():
    from psml_core.bench.timing import cost_curve
    from psml_core.devices.device import TIME_FLOOR_S

    got = cost_curve([(0.0, 0.0), (-1e-9, 0.25), (2.00004e-6, 0.125)])
    assert got == {"times": [TIME_FLOOR_S, TIME_FLOOR_S, 2e-6], "spread": 0.25}


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["bench", "calibrate"], "needs --out"),
        (["bench", "calibrate", "--from", "x.yaml"], "--from only feeds --estimate-gpu"),
        (["bench", "calibrate", "--out", "a.yaml", "--from", "b.yaml"], "not both"),
        (["bench", "calibrate", "--out", "a.yaml", "--estimate-gpu", "h100"], "known GPUs: a100"),
        (["bench", "calibrate", "--from", "missing.yaml", "--estimate-gpu", "v100"], "not exist"),
    ],
)
def test_bench_calibrate_bad_arguments_are_one_line(argv, fragment, capsys):
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "value, new, other",
    [("cpu-core", "cost_profile", "torch_device"), ("cuda", "torch_device", "cost_profile")],
)
def test_bench_calibrate_device_is_a_deprecated_alias_of_the_flag_it_meant(
    value, new, other, capsys
):
    """The old --device: a profile's name is --cost-profile, cuda is --torch-device; one line."""
    from psml_core.cli import _parser

    args = _parser().parse_args(["bench", "calibrate", "--device", value, "--out", "a.yaml"])
    assert getattr(args, new) == value and getattr(args, other) is None
    err = capsys.readouterr().err
    flag = "--" + new.replace("_", "-")
    assert err == f"psml bench: --device is deprecated, renamed {flag} (here: {flag} {value})\n"
    with pytest.raises(SystemExit):
        _parser().parse_args(["bench", "--help"])
    out = capsys.readouterr().out
    assert "--cost-profile NAME" in out and "--torch-device {cuda}" in out
    assert "--device" not in out.replace("--torch-device", "")  # hidden


def test_hash_writes_the_data_set_partition_and_train_then_read(smoke, prepared, tmp_path, capsys):
    """`psml hash` hashes once; a jpdc run on its output equals the run on the raw data set."""
    spec = smoke.run("rcv1_logreg", "jpdc", "dc_10g", smoke.seeds[0])
    assert spec.method.hashing is not None
    hashing = json.dumps(dataclasses.asdict(spec.method.hashing))
    hashed = tmp_path / "hashed"
    raw = str(prepared[spec.dataset.name])
    argv = ["hash", "--data", raw, "--hashing", hashing, "--seed", str(spec.seed)]
    assert main([*argv, "--out", str(hashed)]) == 0
    meta = json.loads((hashed / "manifest.json").read_text())["meta"]["hashing"]
    assert (meta["seed"], meta["signed"]) == (spec.seed, spec.method.hashing.signed)
    outs = {}
    for name, data in (("raw", raw), ("hashed", str(hashed))):
        part = tmp_path / f"{name}.npz"
        assert main(["partition", "--run", spec.to_json(), "--data", data, "--out", str(part),
                     "--traffic", str(tmp_path / f"{name}.json")]) == 0  # fmt: skip
        run = tmp_path / f"run_{name}"
        assert main(["train", "--run", spec.to_json(), "--data", data, "--partition", str(part),
                     "--out", str(run)]) == 0  # fmt: skip
        outs[name] = (part.read_bytes(), (run / "metrics.parquet").read_bytes())
    assert outs["raw"] == outs["hashed"]  # the same assignment and byte-identical metrics
    files = json.loads((tmp_path / "run_hashed" / "summary.json").read_text())["provenance"]
    assert sorted(files["data_sha256"]) == [
        f"hashed m={meta['buckets']} seed {spec.seed}/{name}"
        for name in ("data.npz", "manifest.json")
    ]  # the report's data table tells the hashed files from the raw ones
    raw_files = json.loads((tmp_path / "run_raw" / "summary.json").read_text())["provenance"]
    assert sorted(raw_files["data_sha256"]) == ["data.npz", "manifest.json"]  # read raw
    # Hashing a hashed data set again is refused (it would shrink m once more).
    assert main(["hash", "--data", str(hashed), *argv[3:], "--out", str(tmp_path / "twice")]) == 2
    assert "hashed already" in capsys.readouterr().err
    # A data set hashed with another seed is refused, naming the fix.
    other = tmp_path / "other"
    assert main([*argv[:-1], str(spec.seed + 1), "--out", str(other)]) == 0
    capsys.readouterr()
    rc = main(
        ["train", "--run", spec.to_json(), "--data", str(other), "--out", str(tmp_path / "x")]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "already hashed" in err and "psml hash" in err


def test_partition_analyze_and_hash_say_what_they_do_and_when_done(
    smoke, prepared, tmp_path, capsys, monkeypatch
):
    """They logged nothing until done: now a first line, heartbeats, and the time taken."""
    monkeypatch.delenv("PSML_PROGRESS", raising=False)
    spec = smoke.run("rcv1_logreg", "jpdc", "dc_10g", smoke.seeds[0])
    data = str(prepared[spec.dataset.name])
    argv = ["partition", "--run", spec.to_json(), "--data", data]
    assert (
        main([*argv, "--out", str(tmp_path / "p.npz"), "--traffic", str(tmp_path / "p.json")]) == 0
    )
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        "psml partition: placing rcv1_logreg's samples and keys for jpdc (placement parsa, "
        "4 workers, 2 shards)"
    )
    assert re.match(r"psml partition: placing .*: done in \d+\.\d s$", err[-1])
    assert (
        main(["analyze", "--data", data, "--workers", "4", "--out", str(tmp_path / "a.json")]) == 0
    )
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"psml analyze: sparsity statistics of {data}"
    assert "done in" in err[-1]
    hashing = json.dumps(dataclasses.asdict(spec.method.hashing))
    hash_argv = ["hash", "--data", data, "--hashing", hashing, "--seed", "0"]
    assert main([*hash_argv, "--out", str(tmp_path / "h")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"psml hash: hashing {data} (seed 0)" and "done in" in err[-1]


def test_psml_config_lists_the_plugins(repo, capsys):
    assert main(["config", "--config-dir", str(repo / "config")]) == 0
    assert capsys.readouterr().out.startswith("# plugins: none\n")


@pytest.mark.parametrize("cmd", [["runs"], ["show", "digits_mlp/dense_bsp/dc_10g/seed0"]])
def test_a_closed_pipe_ends_quietly(repo, tmp_path, cmd):
    """`psml runs | head -1` was a BrokenPipeError traceback and status 1."""
    if cmd[0] == "show":  # a summary to show
        run = tmp_path / "summary.json"
        run.write_text(json.dumps({"run_id": "r", "tier": "smoke", "backend": "sim",
            "workload": "w", "method": "m", "scenario": "s", "seed": 0, "clock": "simulated",
            "final_test_accuracy": 0.5, "final_train_loss": 1.0, "total_time_s": 1.0,
            "bytes_up": 1, "bytes_down": 1, "iterations": 1}))  # fmt: skip
        cmd = ["show", str(run)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "psml_core", *cmd],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # the reader is gone before psml writes a line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert err == ""
