from __future__ import annotations

import gzip
import hashlib
import io
import os
import pickle
import struct
import tarfile
import warnings
from pathlib import Path

import numpy as np
import pytest

from psml_core.config import DatasetSpec
from psml_core.data import DATASETS, Cifar10Source, load_prepared, prepare_dataset
from psml_core.data.cifar import (
    BATCH_FILES,
    RestrictedUnpickler,
    directory_sha256,
    load_batch,
)
from psml_core.errors import ConfigError, DataError

N = 20  # images per fake batch (the real batches hold 10,000)


def _pixels(seed: int, n: int = N) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, 3072), dtype=np.uint8)


def _labels(seed: int, n: int = N) -> list[int]:
    return np.random.default_rng(100 + seed).integers(0, 10, n).tolist()


def _batch(seed: int, override: dict[bytes, object] | None = None) -> bytes:
    """A batch as a dict with bytes keys, pickled by Python 3 (protocol 4)."""
    d = {
        b"batch_label": f"batch {seed}".encode(),
        b"labels": _labels(seed),
        b"data": _pixels(seed),
        b"filenames": [f"img{i}.png".encode() for i in range(N)],
    }
    d.update(override or {})
    return pickle.dumps(d, protocol=4)


def _sbs(b: bytes) -> bytes:  # SHORT_BINSTRING: a Python 2 str, loaded as bytes
    return b"U" + bytes([len(b)]) + b


def _py2_batch(pixels: np.ndarray, labels: list[int]) -> bytes:
    """A batch byte for byte as Python 2's cPickle (protocol 2) wrote the real files."""
    n, raw = pixels.shape[0], pixels.tobytes()
    out = b"\x80\x02}(" + _sbs(b"data")
    out += b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85" + _sbs(b"b")
    out += b"\x87R(K\x01M" + struct.pack("<H", n) + b"M" + struct.pack("<H", 3072) + b"\x86"
    out += b"cnumpy\ndtype\n" + _sbs(b"u1") + b"K\x00K\x01\x87R"
    out += b"(K\x03" + _sbs(b"|") + b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb"
    out += b"\x89T" + struct.pack("<I", len(raw)) + raw + b"tb"
    out += _sbs(b"labels") + b"](" + b"".join(b"K" + bytes([v]) for v in labels) + b"e"
    return out + b"u."


def _blobs(**replace: bytes) -> dict[str, bytes]:
    blobs = {name: _batch(i) for i, name in enumerate(BATCH_FILES)}
    blobs.update(replace)
    return blobs


def _write_dir(root: Path, blobs: dict[str, bytes]) -> Path:
    d = root / "cifar-10-batches-py"
    d.mkdir(parents=True)
    for name, blob in blobs.items():
        (d / name).write_bytes(blob)
    return d


def _write_tar(path: Path, blobs: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, blob in blobs.items():
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return path


def _spec(path: Path | str | None, **kw) -> DatasetSpec:
    return DatasetSpec(name="cifar10", source="cifar10", path=str(path) if path else None, **kw)


def _load(path: Path | str | None, **kw):
    return DATASETS.get("cifar10")(_spec(path, **kw)).load()


def _expected():
    X = np.concatenate([_pixels(i) for i in range(5)]).astype(np.float32) / 255
    y = np.concatenate([_labels(i) for i in range(5)])
    return X, y, _pixels(5).astype(np.float32) / 255, np.asarray(_labels(5))


def test_registered() -> None:
    assert DATASETS.get("cifar10") is Cifar10Source


@pytest.mark.parametrize("kind", ["dir", "parent", "tar"])
def test_loads_directory_and_archive(tmp_path: Path, kind: str) -> None:
    if kind == "tar":
        path = _write_tar(tmp_path / "cifar-10-python.tar.gz", _blobs())
    else:
        d = _write_dir(tmp_path, _blobs())
        path = d if kind == "dir" else tmp_path
    ds = _load(path)
    X, y, Xt, yt = _expected()
    assert ds.X_train.dtype == np.float32 and ds.X_train.shape == (5 * N, 3072)
    assert ds.y_train.dtype == np.int64 and ds.n_classes == 10 and not ds.sparse
    np.testing.assert_array_equal(ds.X_train, X)
    np.testing.assert_array_equal(ds.y_train, y)
    np.testing.assert_array_equal(ds.X_test, Xt)
    np.testing.assert_array_equal(ds.y_test, yt)
    assert ds.X_train.min() >= 0.0 and ds.X_train.max() <= 1.0
    assert ds.meta["source"] == "cifar10" and ds.meta["kind"] == (
        "archive" if kind == "tar" else "directory"
    )


def test_prepare_round_trip(tmp_path: Path) -> None:
    path = _write_tar(tmp_path / "c.tar.gz", _blobs())
    prepare_dataset(_spec(path), tmp_path / "out")
    ds = load_prepared(tmp_path / "out")
    np.testing.assert_array_equal(ds.X_test, _expected()[2])
    assert ds.meta["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_python2_pickles_as_in_the_real_files(tmp_path: Path) -> None:
    px = _pixels(7, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecated numpy.core import either
        pixels, labels = load_batch(_py2_batch(px, [3, 1, 9]), "b")
    np.testing.assert_array_equal(pixels, px)
    np.testing.assert_array_equal(labels, [3, 1, 9])
    blobs = {name: _py2_batch(_pixels(i), _labels(i)) for i, name in enumerate(BATCH_FILES)}
    ds = _load(_write_tar(tmp_path / "c.tar.gz", blobs))
    np.testing.assert_array_equal(ds.X_train, _expected()[0])


def test_sha256_of_archive_and_directory(tmp_path: Path) -> None:
    tar = _write_tar(tmp_path / "c.tar.gz", _blobs())
    good = hashlib.sha256(tar.read_bytes()).hexdigest()
    assert _load(tar, sha256=good.upper()).meta["sha256"] == good
    with pytest.raises(DataError, match=r"c\.tar\.gz: SHA-256 mismatch.*datasets\.cifar10\.sha256"):
        _load(tar, sha256="0" * 64)
    d = _write_dir(tmp_path / "x", _blobs())
    listing = "".join(
        f"{hashlib.sha256((d / n).read_bytes()).hexdigest()}  {n}\n" for n in BATCH_FILES
    )
    digest = hashlib.sha256(listing.encode()).hexdigest()
    shas = {n: hashlib.sha256((d / n).read_bytes()).hexdigest() for n in BATCH_FILES}
    assert directory_sha256(shas) == digest
    assert _load(d, sha256=digest).meta["sha256"] == digest
    with pytest.raises(DataError, match=r"SHA-256 mismatch.*sha256sum data_batch_1"):
        _load(d, sha256="f" * 64)


def test_path_not_set_names_the_key_and_where_to_get_it() -> None:
    with pytest.raises(ConfigError) as info:
        _load(None)
    msg = str(info.value)
    assert msg.startswith("datasets.cifar10.path: required")
    assert "cifar-10-python.tar.gz" in msg and "cs.toronto.edu" in msg and "--config" in msg


def test_path_missing(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"nope: not found \(config key datasets\.cifar10\.path\)"):
        _load(tmp_path / "nope")


def test_missing_batch_file(tmp_path: Path) -> None:
    blobs = _blobs()
    del blobs["data_batch_3"]
    d = _write_dir(tmp_path / "d", blobs)
    with pytest.raises(DataError, match=r"data_batch_3: missing .*re-extract"):
        _load(d)
    with pytest.raises(DataError, match=r"archive has no data_batch_3"):
        _load(_write_tar(tmp_path / "c.tar.gz", blobs))


def test_truncated_archive(tmp_path: Path) -> None:
    tar = _write_tar(tmp_path / "c.tar.gz", _blobs())
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(tar.read_bytes()[: tar.stat().st_size // 2])
    with pytest.raises(DataError, match=r"cut\.tar\.gz: not a readable tar\.gz archive.*truncated"):
        _load(cut)
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(gzip.compress(b"not a tar"))
    with pytest.raises(DataError, match="not a readable tar.gz archive"):
        _load(junk)
    empty = tmp_path / "empty.tar.gz"
    empty.write_bytes(b"")
    with pytest.raises(DataError, match="empty file"):
        _load(empty)


def test_truncated_or_corrupt_pickle(tmp_path: Path) -> None:
    whole = _batch(1)
    d = _write_dir(tmp_path / "d", _blobs(data_batch_2=whole[: len(whole) // 2]))
    with pytest.raises(DataError, match=r"data_batch_2: not a readable pickle.*truncated"):
        _load(d)
    with pytest.raises(DataError, match=r"\(member test_batch\): not a readable pickle"):
        _load(_write_tar(tmp_path / "c.tar.gz", _blobs(test_batch=b"\x00garbage")))


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ({b"data": _pixels(0)[:, :1024]}, r"data is a uint8 array of shape \(20, 1024\), but"),
        ({b"data": _pixels(0).astype(np.float32)}, r"data is a float32 array.*uint8 images"),
        ({b"data": [1, 2, 3]}, r"data is a list"),
        ({b"labels": _labels(0)[:-1]}, r"19 labels for 20 images"),
        ({b"labels": [0.5] * N}, r"labels are not a list of integers"),
        ({b"labels": [*_labels(0)[:-1], 12]}, r"label 12 of image 19 is outside 0\.\.9"),
        ({b"labels": [-1] * N}, r"label -1 of image 0 is outside 0\.\.9 \(20 such labels\)"),
    ],
)
def test_malformed_batch(tmp_path: Path, override: dict, fragment: str) -> None:
    d = _write_dir(tmp_path, _blobs(data_batch_4=_batch(3, override)))
    with pytest.raises(DataError, match=r"data_batch_4: " + fragment):
        _load(d)


def test_not_a_batch() -> None:
    with pytest.raises(DataError, match=r"x: holds a list, not the dict"):
        load_batch(pickle.dumps([1, 2]), "x")
    with pytest.raises(DataError, match=r"x: not a CIFAR-10 batch \(no labels key\)"):
        load_batch(pickle.dumps({b"data": _pixels(0)}), "x")
    cifar100 = pickle.dumps({b"data": _pixels(0), b"fine_labels": [0] * N})
    with pytest.raises(DataError, match=r"no labels key \(fine_labels: this is CIFAR-100"):
        load_batch(cifar100, "x")


class _Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_restricted_unpickler_refuses_other_globals(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = pickle.dumps({b"data": _Evil(marker), b"labels": [0]})
    with pytest.raises(DataError, match=r"refused to load global (posix|os|nt)\.system"):
        load_batch(evil, "evil")
    assert not marker.exists()
    d = _write_dir(tmp_path / "d", _blobs(test_batch=evil))
    with pytest.raises(DataError, match=r"test_batch: refused .*was not loaded"):
        _load(d)
    assert not marker.exists()
    for module, name in [("builtins", "eval"), ("numpy", "load"), ("pickle", "loads")]:
        with pytest.raises(pickle.UnpicklingError, match="refused"):
            RestrictedUnpickler(io.BytesIO(b"")).find_class(module, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
            assert callable(RestrictedUnpickler(io.BytesIO(b"")).find_class(module, "_reconstruct"))
