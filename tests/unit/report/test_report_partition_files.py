"""The report's placement files: by their keys, by their path, or named by the listing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from psml_core.errors import DataError
from psml_core.report.inputs import partition_files


def _write(path: Path, obj: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path


def test_a_shared_placement_is_named_once_per_method_that_uses_it(tmp_path: Path):
    shared = _write(tmp_path / "w" / "range-0123456789ab.json", {"workload": "w", "method": "a"})
    own = _write(tmp_path / "w" / "parsa-0123456789ab.json", {"workload": "w", "method": "c"})
    got = partition_files([Path(f"w/a={shared}"), Path(f"w/b={shared}"), Path(f"w/c={own}")])
    assert sorted(got) == ["w · a", "w · b", "w · c"]
    assert got["w · b"] == got["w · a"] == {"workload": "w", "method": "a"}


def test_plain_files_keep_their_own_names_beside_named_ones(tmp_path: Path):
    plain = _write(tmp_path / "x" / "m.json", {"workload": "x", "method": "m"})
    shared = _write(tmp_path / "w.json", {"workload": "w", "method": "a"})
    got = partition_files([plain, Path(f"w/b={shared}")])
    assert sorted(got) == ["w · b", "x · m"]


def test_a_pair_named_twice_is_an_error(tmp_path: Path):
    f = _write(tmp_path / "p.json", {"workload": "w"})
    with pytest.raises(DataError, match="two partition files describe 'w · a'"):
        partition_files([Path(f"w/a={f}"), Path(f"w/a={f}")])


def test_a_named_entry_whose_file_is_missing_is_refused_by_its_file(tmp_path: Path):
    from psml_core.report.inputs import partition_entry, require_files

    missing = tmp_path / "gone.json"
    name, file = partition_entry(f"w/a={missing}")
    assert (name, file) == ("w · a", missing)
    with pytest.raises(DataError, match="gone.json' does not exist"):
        require_files([file])
