"""Hostile data files: refused in one line naming the file, never accepted wrong."""

from __future__ import annotations

import bz2

import pytest

from psml_core.config import DatasetSpec
from psml_core.data import DATASETS
from psml_core.data.libsvm import read_rows
from psml_core.errors import DataError


def _refusal(exc: pytest.ExceptionInfo[DataError], path) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(str(path)), msg
    return msg


@pytest.mark.parametrize("label", ["1", "-1", "0", "+1"])
def test_one_class_data_is_refused(tmp_path, label: str) -> None:
    """All-1 labels fit the binary shortcut ({-1, +1} and {0, 1} both hold {1}): one class."""
    path = tmp_path / "oneclass.svm"
    path.write_text("".join(f"{label} 1:{i} 3:0.5\n" for i in range(1, 9)))
    spec = DatasetSpec(name="svm", source="libsvm", path=str(path))
    with pytest.raises(DataError) as err:
        DATASETS.get("libsvm")(spec).load()
    assert "at least two classes are needed" in _refusal(err, path)


def test_a_damaged_bzip2_file_is_named_damaged_not_a_bad_line(tmp_path) -> None:
    rows = b"".join(b"%d 1:%d 3:0.5 7:-2\n" % (1 if i % 3 else -1, i + 1) for i in range(2000))
    packed = bytearray(bz2.compress(rows))
    packed[len(packed) // 3] ^= 0x10  # garbage reaches the parser before the block's CRC fails
    path = tmp_path / "rcv1_train.binary.bz2"
    path.write_bytes(bytes(packed))
    with pytest.raises(DataError) as err:
        read_rows(path, "datasets.rcv1.path")
    msg = _refusal(err, path)
    assert msg.startswith(f"{path}: damaged bzip2 file") and "re-download" in msg
    assert "delete it" in msg and "datasets.rcv1.path" in msg
