from __future__ import annotations

import os
from pathlib import Path

import pytest

from psml_core.atomic import atomic_path, write_json, write_text


def test_write_is_atomic_on_failure(tmp_path: Path):
    target = tmp_path / "out.txt"
    write_text(target, "old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("crash mid-write")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]  # no temp file left


def test_json_is_stable_and_readable(tmp_path: Path):
    write_json(tmp_path / "a.json", {"b": 1, "a": [1, 2]})
    write_json(tmp_path / "b.json", {"a": [1, 2], "b": 1})
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    mode = os.stat(tmp_path / "a.json").st_mode & 0o777
    assert mode & 0o044  # not the 0600 of a bare mkstemp file


def test_nan_is_refused(tmp_path: Path):
    with pytest.raises(ValueError):
        write_json(tmp_path / "x.json", {"a": float("nan")})
    assert not (tmp_path / "x.json").exists()
