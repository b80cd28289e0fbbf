"""Data set files named by URL (downloaded once, checked by SHA-256) and compressed LIBSVM files.

Every URL here is a file:// URL, or port 0 of the loopback address (a spec given to
`psml prepare` is https only): nothing reaches the network.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import lzma
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from psml_core.config import DatasetSpec
from psml_core.data import DATASETS
from psml_core.data.download import DOWNLOAD_DIR, fetch, local_file
from psml_core.data.libsvm import read_rows
from psml_core.errors import DataError

TRAIN = b"".join(b"%d 1:%d 3:0.5 7:-2\n" % (1 if i % 3 else -1, i + 1) for i in range(60))
TEST = b"1 2:1\n-1 1:4 7:1\n"
COMPRESS = {"bzip2": bz2.compress, "gzip": gzip.compress, "xz": lzma.compress}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _served(tmp_path: Path, name: str, data: bytes) -> str:
    """A file standing in for the remote copy, and its file:// URL."""
    src = tmp_path / "remote" / name
    src.parent.mkdir(exist_ok=True)
    src.write_bytes(data)
    return src.as_uri()


def _leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]  # atomic_path's temp files


# --------------------------------------------------------------------------- download


def test_downloads_once_into_the_shared_directory(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    url = _served(tmp_path, "rcv1_train.binary.bz2", b"payload")
    got = local_file(None, url, _sha(b"payload"), "datasets.rcv1")
    want = DOWNLOAD_DIR / f"{_sha(b'payload')[:16]}-rcv1_train.binary.bz2"
    assert got == str(want) and (tmp_path / want).read_bytes() == b"payload"
    (tmp_path / "remote" / "rcv1_train.binary.bz2").unlink()  # a second use needs no network
    assert local_file(None, url, _sha(b"payload"), "datasets.rcv1") == str(want)
    assert not _leftovers(tmp_path)


def test_path_and_url_download_to_path_and_plain_path_is_untouched(tmp_path) -> None:
    url = _served(tmp_path, "f.txt", b"abc")
    dest = tmp_path / "mine" / "f.txt"
    assert local_file(str(dest), url, _sha(b"abc"), "datasets.x") == str(dest)
    assert dest.read_bytes() == b"abc"
    assert local_file("some/where.txt", None, None, "datasets.x") == "some/where.txt"
    assert local_file(None, None, None, "datasets.x") is None


def test_checksum_mismatch_keeps_nothing_and_names_the_key(tmp_path) -> None:
    url = _served(tmp_path, "f.txt", b"another version")
    dest = tmp_path / "d" / "f.txt"
    with pytest.raises(DataError) as err:
        fetch(url, dest, _sha(b"expected"), "datasets.x", "test_")
    msg = str(err.value)
    assert url in msg and "datasets.x.test_sha256" in msg and _sha(b"another version") in msg
    assert not dest.exists() and not _leftovers(tmp_path)
    assert not dest.parent.exists()  # the directory it made for the download is gone too


@pytest.mark.parametrize("url", ["file:///nonexistent/psml/rcv1.bz2", "ftp://256.0.0.1:0/x"])
def test_failed_transfer_keeps_nothing_and_names_the_fix(tmp_path, url: str) -> None:
    dest = tmp_path / "d" / "f"
    with pytest.raises(DataError) as err:
        fetch(url, dest, "0" * 64, "datasets.x")
    msg = str(err.value)
    assert url in msg and "download failed" in msg and "datasets.x.url" in msg
    assert "datasets.x.path" in msg
    assert not dest.exists() and not _leftovers(tmp_path)


def test_url_without_sha256_is_refused(tmp_path) -> None:
    with pytest.raises(DataError, match=r"datasets.x.url needs datasets.x.sha256"):
        local_file(None, _served(tmp_path, "f", b"x"), None, "datasets.x")


# --------------------------------------------------------------------------- compressed files


@pytest.mark.parametrize("kind", sorted(COMPRESS))
def test_compressed_files_read_as_the_plain_file(tmp_path, kind: str) -> None:
    plain = tmp_path / "train.svm"
    plain.write_bytes(TRAIN)
    packed = tmp_path / f"train.svm.{kind}"
    packed.write_bytes(COMPRESS[kind](TRAIN))
    a, b = read_rows(plain), read_rows(packed)
    for field in ("labels", "lines", "indptr", "indices", "values"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(kind=st.sampled_from(sorted(COMPRESS)), cut=st.floats(0.05, 0.95))
def test_truncated_compressed_file_is_a_data_error(tmp_path, kind: str, cut: float) -> None:
    packed = COMPRESS[kind](TRAIN * 20)
    path = tmp_path / f"cut.{kind}"
    path.write_bytes(packed[: max(6, int(len(packed) * cut))])
    with pytest.raises(DataError) as err:
        read_rows(path, "datasets.x.path")
    msg = str(err.value)
    assert str(path) in msg and "datasets.x.path" in msg
    assert f"damaged {kind} file" in msg and "re-download" in msg


# First byte past each format's header whose damage its checksums catch (bzip2's block-size
# digit, byte 3, and gzip's mtime, flags and OS bytes, 4..9, may change and decode the same).
_CHECKED_FROM = {"bzip2": 4, "gzip": 10, "xz": 6}


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(kind=st.sampled_from(sorted(COMPRESS)), where=st.floats(0.0, 1.0), flip=st.integers(1, 255))
def test_a_damaged_compressed_file_is_blamed_not_a_line(
    tmp_path, kind: str, where: float, flip: int
) -> None:
    # A decompressor hands out garbage before its CRC check fails: the file is named damaged,
    # never reported as a bad LIBSVM line.
    packed = bytearray(COMPRESS[kind](TRAIN * 20))
    lo = _CHECKED_FROM[kind]
    packed[lo + int(where * (len(packed) - 1 - lo))] ^= flip
    path = tmp_path / f"flip.{kind}"
    path.write_bytes(bytes(packed))
    with pytest.raises(DataError) as err:
        read_rows(path, "datasets.x.path")
    msg = str(err.value)
    assert msg.startswith(f"{path}: damaged {kind} file after line ")
    assert "re-download" in msg and "\n" not in msg


def test_corrupt_byte_in_a_compressed_file_is_a_data_error(tmp_path) -> None:
    packed = bytearray(bz2.compress(TRAIN * 20))
    packed[len(packed) // 2] ^= 0xFF
    path = tmp_path / "bad.bz2"
    path.write_bytes(bytes(packed))
    with pytest.raises(DataError, match=r"bad.bz2: damaged bzip2 file after line \d+"):
        read_rows(path)


# --------------------------------------------------------------------------- sources


def test_libsvm_from_urls_equals_the_local_files(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.svm").write_bytes(TRAIN)
    (tmp_path / "test.svm").write_bytes(TEST)
    local = DatasetSpec(
        name="svm", source="libsvm", path="train.svm", test_path="test.svm", n_features=7
    )
    train_bz2, test_xz = bz2.compress(TRAIN), lzma.compress(TEST)
    remote = DatasetSpec(
        name="svm",
        source="libsvm",
        url=_served(tmp_path, "train.svm.bz2", train_bz2),
        sha256=_sha(train_bz2),
        test_url=_served(tmp_path, "test.svm.xz", test_xz),
        test_sha256=_sha(test_xz),
        n_features=7,
    )
    a, b = (DATASETS.get("libsvm")(s).load() for s in (local, remote))
    for part in ("X_train", "X_test"):
        np.testing.assert_array_equal(getattr(a, part).toarray(), getattr(b, part).toarray())
    np.testing.assert_array_equal(a.y_train, b.y_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert b.meta["url"] == remote.url and b.meta["test_url"] == remote.test_url
    assert b.meta["sha256"] == _sha(train_bz2) and b.meta["test_sha256"] == _sha(test_xz)
    assert b.meta["path"].startswith(str(DOWNLOAD_DIR))


def test_libsvm_test_sha256_mismatch_names_the_key(tmp_path) -> None:
    (tmp_path / "train.svm").write_bytes(TRAIN)
    (tmp_path / "test.svm").write_bytes(TEST)
    spec = DatasetSpec(
        name="svm",
        source="libsvm",
        path=str(tmp_path / "train.svm"),
        test_path=str(tmp_path / "test.svm"),
        test_sha256="0" * 64,
    )
    with pytest.raises(DataError, match=r"test.svm: SHA-256 mismatch.*datasets.svm.test_sha256"):
        DATASETS.get("libsvm")(spec).load()


def test_prepare_with_a_bad_url_exits_3_and_writes_nothing(tmp_path) -> None:
    spec = {
        "name": "svm",
        "source": "libsvm",
        # A spec's url is https only (file:// is refused as config); port 0 of the loopback
        # address refuses the connection at once, so nothing leaves the machine.
        "url": "https://127.0.0.1:0/missing.bz2",
        "sha256": "0" * 64,
    }
    out = tmp_path / "prepared"
    proc = subprocess.run(
        [sys.executable, "-m", "psml_core", "prepare", "--spec", json.dumps(spec)]
        + ["--out", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 3, proc.stderr
    assert "download failed" in proc.stderr and "datasets.svm.path" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists() and not (tmp_path / "data").exists()


def test_a_download_prints_its_size_progress_and_rate(tmp_path, capsys, monkeypatch) -> None:
    """A download printed one line, with no size or progress."""
    monkeypatch.delenv("PSML_PROGRESS", raising=False)
    data = bytes(range(256)) * 20_000  # 5.1 MB: five 1 MB chunks and a tail
    url = _served(tmp_path, "big.bin", data)
    fetch(url, tmp_path / "got" / "big.bin", _sha(data), "datasets.big")
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"psml: downloading {url} -> {tmp_path / 'got' / 'big.bin'} (5.1 MB)"
    assert "psml:   20% (1.0 MB of 5.1 MB)" in err and "psml:   80% (4.2 MB of 5.1 MB)" in err
    assert err[-1].startswith("psml:   downloaded 5.1 MB in ")
