from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from psml_core.data import Dataset, file_sha256, load_prepared, manifest_sha256, save_prepared
from psml_core.data.store import npz_bytes
from psml_core.errors import DataError


def _dense(seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    return Dataset(
        name="tiny",
        X_train=rng.random((20, 5), dtype=np.float32),
        y_train=rng.integers(0, 3, 20),
        X_test=rng.random((6, 5), dtype=np.float32),
        y_test=rng.integers(0, 3, 6),
        n_classes=3,
        meta={"source": "digits", "seed": np.int64(seed), "shape": (20, 5), "arr": np.arange(2)},
    )


def _sparse(seed: int = 0) -> Dataset:
    mk = lambda n, s: sp.random(n, 50, density=0.1, format="csr", random_state=s, dtype=np.float32)  # noqa: E731
    rng = np.random.default_rng(seed)
    return Dataset(
        name="sp",
        X_train=mk(30, seed),
        y_train=rng.integers(0, 2, 30),
        X_test=mk(10, seed + 1),
        y_test=rng.integers(0, 2, 10),
        n_classes=2,
        meta={"source": "zipf_sparse"},
    )


def _assert_same(a: Dataset, b: Dataset) -> None:
    assert (a.name, a.n_classes, a.sparse, a.n_features) == (
        b.name,
        b.n_classes,
        b.sparse,
        b.n_features,
    )
    for name in ("X_train", "X_test"):
        x, y = getattr(a, name), getattr(b, name)
        if sp.issparse(x):
            assert sp.issparse(y) and y.dtype == np.float32
            x, y = x.toarray(), y.toarray()
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(a.y_train, b.y_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert b.y_train.dtype == np.int64


def test_dense_round_trip(tmp_path) -> None:
    ds = _dense()
    manifest = save_prepared(ds, tmp_path / "d")
    assert manifest == tmp_path / "d" / "manifest.json"
    back = load_prepared(tmp_path / "d")
    _assert_same(ds, back)
    assert back.meta == {"source": "digits", "seed": 0, "shape": [20, 5], "arr": [0, 1]}


def test_sparse_round_trip(tmp_path) -> None:
    ds = _sparse()
    save_prepared(ds, tmp_path)
    back = load_prepared(tmp_path)
    _assert_same(ds, back)
    assert back.X_train.has_sorted_indices


def test_unsorted_input_is_left_alone(tmp_path) -> None:
    X = sp.csr_matrix((np.array([1.0, 2.0], dtype=np.float32), [3, 1], [0, 2]), shape=(1, 4))
    assert not X.has_sorted_indices
    ds = Dataset("u", X, np.array([0]), X, np.array([1]), 2, {})
    save_prepared(ds, tmp_path)
    assert list(X.indices) == [3, 1]
    np.testing.assert_array_equal(load_prepared(tmp_path).X_train.toarray(), X.toarray())


def test_manifest_contents(tmp_path) -> None:
    save_prepared(_sparse(), tmp_path)
    m = json.loads((tmp_path / "manifest.json").read_text())
    assert m["name"] == "sp" and m["source"] == "zipf_sparse" and m["sparse"] is True
    assert m["n_classes"] == 2 and m["n_features"] == 50
    assert m["rows"] == {"train": 30, "test": 10}
    data = (tmp_path / "data.npz").read_bytes()
    assert m["files"] == {
        "data.npz": {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.npz", "manifest.json"]


@pytest.mark.parametrize("make", [_dense, _sparse])
def test_npz_is_byte_identical_and_loadable(tmp_path, make) -> None:
    save_prepared(make(), tmp_path / "a")
    save_prepared(make(), tmp_path / "b")
    a, b = tmp_path / "a" / "data.npz", tmp_path / "b" / "data.npz"
    assert a.read_bytes() == b.read_bytes()
    with zipfile.ZipFile(a) as zf:
        assert all(i.date_time == (1980, 1, 1, 0, 0, 0) for i in zf.infolist())
    with np.load(a) as arrays:
        assert "y_train" in arrays.files


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    arrays=st.dictionaries(
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from([np.float32, np.int64, np.int32]).flatmap(
            lambda t: st.lists(st.integers(-1000, 1000), max_size=20).map(lambda v: np.array(v, t))
        ),
        min_size=1,
    )
)
def test_npz_bytes_round_trip(tmp_path, arrays: dict[str, np.ndarray]) -> None:
    blob = npz_bytes(arrays)
    assert blob == npz_bytes(dict(reversed(list(arrays.items()))))
    path = tmp_path / "x.npz"
    path.write_bytes(blob)
    with np.load(path) as back:
        assert sorted(back.files) == sorted(arrays)
        for k, v in arrays.items():
            np.testing.assert_array_equal(back[k], v)
            assert back[k].dtype == v.dtype


def _corrupt(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_corrupted_byte_is_detected(tmp_path) -> None:
    save_prepared(_sparse(), tmp_path)
    data = tmp_path / "data.npz"
    _corrupt(data, data.stat().st_size // 2)
    with pytest.raises(DataError) as err:
        load_prepared(tmp_path)
    msg = str(err.value)
    assert str(data) in msg and "SHA-256 mismatch" in msg and "delete" in msg
    assert file_sha256(data) in msg


def test_unreadable_npz_without_verification(tmp_path) -> None:
    save_prepared(_dense(), tmp_path)
    data = tmp_path / "data.npz"
    data.write_bytes(data.read_bytes()[:100])
    with pytest.raises(DataError, match=r"data\.npz: cannot be read"):
        load_prepared(tmp_path, verify=False)


def test_missing_manifest(tmp_path) -> None:
    with pytest.raises(DataError, match=r"manifest\.json: missing.*re-run"):
        load_prepared(tmp_path / "never")
    with pytest.raises(DataError, match=r"manifest\.json: missing"):
        manifest_sha256(tmp_path / "never")


def test_missing_data_file(tmp_path) -> None:
    save_prepared(_dense(), tmp_path)
    (tmp_path / "data.npz").unlink()
    with pytest.raises(DataError, match=r"data\.npz: missing"):
        load_prepared(tmp_path)


def test_invalid_manifest(tmp_path) -> None:
    save_prepared(_dense(), tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(DataError, match=r"manifest\.json: not a valid manifest"):
        load_prepared(tmp_path)


def test_file_sha256_streams(tmp_path) -> None:
    blob = np.random.default_rng(0).bytes(3 * (1 << 20) + 17)
    path = tmp_path / "big.bin"
    path.write_bytes(blob)
    assert file_sha256(path) == hashlib.sha256(blob).hexdigest()


def test_manifest_sha256(tmp_path) -> None:
    save_prepared(_dense(), tmp_path)
    shas = manifest_sha256(tmp_path)
    assert list(shas) == ["data.npz", "manifest.json"]
    assert shas["data.npz"] == file_sha256(tmp_path / "data.npz")
    assert shas["manifest.json"] == file_sha256(tmp_path / "manifest.json")
