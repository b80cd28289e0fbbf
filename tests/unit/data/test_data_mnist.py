"""The mnist source reads the user's IDX files; every test writes its own small files."""

from __future__ import annotations

import gzip
import hashlib
import struct
from pathlib import Path

import numpy as np
import pytest

from psml_core.config import DatasetSpec
from psml_core.data import DATASETS, MnistSource
from psml_core.data.mnist import FILES, parse_idx
from psml_core.errors import ConfigError, DataError


def idx(arr: np.ndarray) -> bytes:
    """An IDX file of unsigned bytes: magic, type 0x08, dims, big-endian sizes, values."""
    head = b"\x00\x00\x08" + bytes([arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    return head + arr.astype(np.uint8).tobytes()


def write_set(d: Path, n_train=12, n_test=5, gz=True, side=28, seed=0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = {
        FILES[0]: rng.integers(0, 256, (n_train, side, side)),
        FILES[1]: rng.integers(0, 10, n_train),
        FILES[2]: rng.integers(0, 256, (n_test, side, side)),
        FILES[3]: rng.integers(0, 10, n_test),
    }
    d.mkdir(parents=True, exist_ok=True)
    for name, arr in arrays.items():
        data = idx(arr)
        (d / (f"{name}.gz" if gz else name)).write_bytes(gzip.compress(data) if gz else data)
    return arrays


def load(path=None, **kw):
    return DATASETS.get("mnist")(DatasetSpec(name="mnist", source="mnist", path=path, **kw)).load()


def listing(d: Path, names) -> str:
    text = "".join(f"{hashlib.sha256((d / n).read_bytes()).hexdigest()}  {n}\n" for n in names)
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("gz", [True, False])
def test_reads_the_four_files_plain_or_gzipped(tmp_path, gz) -> None:
    arrays = write_set(tmp_path, gz=gz)
    ds = load(str(tmp_path))
    assert DATASETS.get("mnist") is MnistSource
    assert ds.n_features == 784 and ds.n_classes == 10 and ds.X_train.shape == (12, 784)
    np.testing.assert_allclose(ds.X_train * 255, arrays[FILES[0]].reshape(12, -1), atol=1e-3)
    np.testing.assert_array_equal(ds.y_test, arrays[FILES[3]])
    assert ds.X_test.dtype == np.float32 and ds.meta["test_fraction"] is None


def test_checksum_is_the_listing_of_the_files_as_stored(tmp_path) -> None:
    write_set(tmp_path)
    names = [f"{n}.gz" for n in FILES]
    ds = load(str(tmp_path), sha256=listing(tmp_path, names))
    assert ds.meta["sha256"] == listing(tmp_path, names)
    with pytest.raises(DataError, match="SHA-256 mismatch.*sha256sum train-images-idx3-ubyte.gz"):
        load(str(tmp_path), sha256="0" * 64)


def test_dotted_names_are_accepted(tmp_path) -> None:
    write_set(tmp_path, gz=False)
    for name in FILES:
        (tmp_path / name).rename(tmp_path / name.replace("-idx", ".idx"))
    assert load(str(tmp_path)).X_train.shape == (12, 784)


def test_downloads_from_a_directory_url_once(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    remote = tmp_path / "remote"
    write_set(remote)
    sha = listing(remote, [f"{n}.gz" for n in FILES])
    ds = load(url=remote.as_uri(), sha256=sha)
    assert ds.X_train.shape == (12, 784)
    assert (tmp_path / "data" / "downloads" / f"{sha[:16]}-mnist" / f"{FILES[0]}.gz").is_file()
    with pytest.raises(DataError, match="listing SHA-256"):
        load(url=remote.as_uri(), sha256="1" * 64)
    assert not list((tmp_path / "data" / "downloads").glob(".*tmp"))  # nothing half-written


def _one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_no_path_names_the_key_and_the_fix() -> None:
    with pytest.raises(ConfigError, match="datasets.mnist.path: required for source mnist") as e:
        load()
    assert "fashion-mnist" in _one_line(e)


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        ("missing", r"no t10k-labels-idx1-ubyte"),
        ("magic", "not an IDX file"),
        ("type", "type 0x0d with 3 dimensions"),
        ("truncated", "truncated or damaged"),
        ("gzip", "damaged gzip file"),
        ("label", "label 12 of image 0 is outside 0..9"),
        ("count", "4 labels for the 5 images"),
        ("both", "both"),
        ("file", "a file, not a directory"),
    ],
)
def test_bad_files_are_one_clear_line(tmp_path, damage, match) -> None:
    write_set(tmp_path, gz=False)
    test_images, test_labels = tmp_path / FILES[2], tmp_path / FILES[3]
    path = tmp_path
    if damage == "missing":
        test_labels.unlink()
    elif damage == "magic":
        test_images.write_bytes(b"\x01" + test_images.read_bytes()[1:])
    elif damage == "type":
        data = bytearray(test_images.read_bytes())
        data[2] = 0x0D
        test_images.write_bytes(bytes(data))
    elif damage == "truncated":
        test_images.write_bytes(test_images.read_bytes()[:-7])
    elif damage == "gzip":
        test_images.unlink()
        (tmp_path / f"{FILES[2]}.gz").write_bytes(gzip.compress(b"x" * 999)[:20])
    elif damage == "label":
        test_labels.write_bytes(idx(np.array([12, 1, 2, 3, 4])))
    elif damage == "count":
        test_labels.write_bytes(idx(np.array([1, 1, 2, 3])))
    elif damage == "both":
        (tmp_path / f"{FILES[0]}.gz").write_bytes(gzip.compress((tmp_path / FILES[0]).read_bytes()))
    elif damage == "file":
        path = test_images
    with pytest.raises(DataError, match=match) as e:
        load(str(path))
    _one_line(e)


def test_parse_idx_round_trip() -> None:
    arr = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    np.testing.assert_array_equal(parse_idx(idx(arr), "x", 3), arr)
    with pytest.raises(DataError, match="empty IDX"):
        parse_idx(idx(np.zeros((0, 3, 4), np.uint8)), "x", 3)
