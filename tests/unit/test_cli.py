from __future__ import annotations

import json
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
