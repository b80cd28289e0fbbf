"""Config files and names a new user gets wrong: each is one line naming the file or key and
the fix, when the config loads (each of these was accepted, or a traceback, before)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from psml_core.cli import main
from psml_core.config import load_yaml
from psml_core.data.digits import ROWS
from psml_core.errors import ConfigError, did_you_mean
from psml_core.recipes import load_experiment
from psml_core.registry import Registry

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (b"tier: smoke\nworkers: 4\nworkers: 8\n", "key 'workers' is written twice (first at"),
        (b"datasets:\n  a: {source: digits, seed: 1, seed: 2}\n", "key 'seed' is written twice"),
        (b"", "is empty (no settings); write at least `tier: smoke`"),
        (b"tier: smoke\n# caf\xe9\n", "is not UTF-8 text (byte 0xe9 on line 2); save it as UTF-8"),
    ],
)  # fmt: skip
def test_a_bad_config_file_is_one_line_from_psml_config(tmp_path, capsys, text, fragment):
    cf = tmp_path / "config.yaml"
    cf.write_bytes(text)
    assert main(["config", "--configfile", str(cf), "--config-dir", str(REPO / "config")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(cf) in err and fragment in err, err


def test_a_non_utf8_config_is_no_traceback(tmp_path):
    """It was 33 lines of traceback from psml config."""
    cf = tmp_path / "config.yaml"
    cf.write_bytes(b"tier: smoke\n\xff\xfe\n")
    proc = subprocess.run(
        [sys.executable, "-m", "psml_core", "config", "--configfile", str(cf)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "not UTF-8 text" in proc.stderr


def test_yaml_files_psml_reads_refuse_a_key_written_twice(tmp_path):
    p = tmp_path / "methods.yaml"
    p.write_text("a:\n  codec: {name: none}\na:\n  codec: {name: topk}\n")
    with pytest.raises(ConfigError, match=r"line 3, column 1: key 'a' is written twice"):
        load_yaml(p, "methods file")
    p.write_text("base: &b {x: 1}\nderived:\n  <<: *b\n  y: 2\n")  # merge keys still work
    assert load_yaml(p) == {"base": {"x": 1}, "derived": {"x": 1, "y": 2}}


def test_more_workers_than_training_rows_is_refused():
    """workers: 100000 had no bound; digits has 1,437 training rows at the default split."""
    rows = ROWS - math.ceil(ROWS * 0.2)
    with pytest.raises(ConfigError, match=r"'workers': 100000 is out of range; must be <= 4096"):
        load_experiment({"tier": "smoke", "workers": 100000}, REPO / "config")
    with pytest.raises(ConfigError, match=rf"'workers': 4000 workers.*{rows} training rows"):
        load_experiment({"tier": "smoke", "workers": 4000}, REPO / "config")
    load_experiment({"tier": "smoke", "workers": rows, "shards": 2}, REPO / "config")
    with pytest.raises(ConfigError, match="'workers': 1438 workers"):
        load_experiment({"tier": "smoke", "workers": rows + 1}, REPO / "config")


def test_the_digits_row_count_is_the_data_sets():
    from sklearn.datasets import load_digits

    assert load_digits().data.shape[0] == ROWS


def test_a_libsvm_file_that_does_not_exist_is_named_when_the_config_loads(tmp_path):
    ds = {"digits": {"source": "libsvm", "path": str(tmp_path / "nope.svm"), "n_features": 64}}
    with pytest.raises(ConfigError, match=r"'datasets.digits.path': '.*nope.svm' does not exist"):
        load_experiment({"tier": "smoke", "datasets": ds}, REPO / "config")
    ds["digits"]["test_path"] = str(tmp_path / "test.svm")
    (tmp_path / "nope.svm").write_text("1 1:1\n-1 2:1\n")
    with pytest.raises(ConfigError, match=r"'datasets.digits.test_path'"):
        load_experiment({"tier": "smoke", "datasets": ds}, REPO / "config")
    (tmp_path / "test.svm").write_text("1 1:1\n")
    load_experiment({"tier": "smoke", "datasets": ds}, REPO / "config")


@pytest.mark.parametrize(
    ("user", "fragment"),
    [
        ({"methods": ["tpok_ef"]}, "unknown method 'tpok_ef'; did you mean 'topk_ef'? known"),
        ({"backend": "dsit"}, "unknown backend 'dsit'; did you mean 'dist'? known backends"),
        ({"wokers": 4}, "unknown key 'wokers' in '(top level)'; did you mean 'workers'?"),
        ({"tier": "smoek"}, "did you mean 'smoke'?"),
    ],
)
def test_misspelt_names_suggest_the_close_one(user, fragment):
    with pytest.raises(ConfigError) as err:
        load_experiment({"tier": "smoke", **user}, REPO / "config")
    assert fragment in str(err.value)


def test_did_you_mean():
    assert did_you_mean("tpok_ef", ["topk_ef", "dense_bsp"]) == "did you mean 'topk_ef'? "
    assert did_you_mean("DFS", ["dfs", "pcp"]) == "did you mean 'dfs'? "
    assert did_you_mean("nope", ["a", "b"]) == ""
    reg: Registry[int] = Registry("widget")
    reg.register("topk")(1)
    with pytest.raises(ConfigError, match=r"unknown widget 'tpok'; did you mean 'topk'\? known"):
        reg.get("tpok")
