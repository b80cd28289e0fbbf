"""Prepared-data storage: a byte-deterministic ``data.npz`` plus a ``manifest.json`` of checksums.

Layout of a prepared directory::

    <out_dir>/data.npz        arrays, one ``.npy`` member each (uncompressed zip)
    <out_dir>/manifest.json   name, source, shapes, meta, and files: {name: {sha256, bytes}}

Dense features are stored as ``X_train`` / ``X_test``; CSR features as ``X_train_data``,
``X_train_indices``, ``X_train_indptr``, ``X_train_shape`` (and the same for ``X_test``).
``np.savez`` stamps each member with the current time, so identical data would give different
bytes; :func:`save_prepared` writes the zip itself with a fixed timestamp, so the SHA-256 of
``data.npz`` is a function of the data alone (given the numpy version's ``.npy`` header).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from psml_core.atomic import write_bytes, write_json
from psml_core.data.base import Dataset, Matrix
from psml_core.errors import DataError

__all__ = [
    "DATA_FILE",
    "FORMAT_VERSION",
    "MANIFEST_FILE",
    "file_sha256",
    "load_prepared",
    "manifest_sha256",
    "npz_bytes",
    "save_prepared",
]

DATA_FILE = "data.npz"
MANIFEST_FILE = "manifest.json"
FORMAT_VERSION = 1
_CHUNK = 1 << 20
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # earliest date a zip header can hold


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file, read in 1 MiB chunks.

    Args:
        path: The file.

    Returns:
        The lowercase hex digest.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _le(arr: np.ndarray) -> np.ndarray:
    """C-contiguous, little-endian copy (or view) so the bytes do not depend on the host."""
    arr = np.asarray(arr)
    return np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("<"), copy=False))


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """Serialise arrays as an ``np.load``-readable, byte-deterministic ``.npz``.

    Members are written in sorted name order, uncompressed, with a fixed timestamp and
    permissions.

    Args:
        arrays: Name -> array; object arrays are not allowed.

    Returns:
        The zip file's bytes.
    """
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(member, _le(arrays[name]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_STORED
            info.create_system = 3  # unix; the default depends on the host OS
            info.external_attr = 0o644 << 16
            zf.writestr(info, member.getvalue())
    return buf.getvalue()


def _matrix_arrays(prefix: str, X: Matrix) -> dict[str, np.ndarray]:
    """The arrays that store one feature matrix."""
    if not sp.issparse(X):
        return {prefix: np.asarray(X, dtype=np.float32)}
    X = sp.csr_matrix(X)
    if not X.has_sorted_indices:
        X = X.sorted_indices()  # a copy: never reorder the caller's matrix
    big = max(X.nnz, *X.shape) >= np.iinfo(np.int32).max
    idx = np.int64 if big else np.int32
    return {
        f"{prefix}_data": X.data.astype(np.float32, copy=False),
        f"{prefix}_indices": X.indices.astype(idx, copy=False),
        f"{prefix}_indptr": X.indptr.astype(idx, copy=False),
        f"{prefix}_shape": np.asarray(X.shape, dtype=np.int64),
    }


def _jsonable(obj: Any) -> Any:
    """Turn numpy scalars/arrays and tuples inside ``obj`` into plain JSON values."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def save_prepared(ds: Dataset, out_dir: str | os.PathLike[str]) -> Path:
    """Write ``ds`` as ``out_dir/data.npz`` and ``out_dir/manifest.json``, both atomically.

    The manifest is written last, so its presence marks a complete directory.

    Args:
        ds: The data set.
        out_dir: Target directory (created if missing).

    Returns:
        The manifest's path.
    """
    out = Path(out_dir)
    arrays = {
        **_matrix_arrays("X_train", ds.X_train),
        **_matrix_arrays("X_test", ds.X_test),
        "y_train": np.asarray(ds.y_train, dtype=np.int64),
        "y_test": np.asarray(ds.y_test, dtype=np.int64),
    }
    if ds.groups_train is not None and ds.groups_test is not None:  # only where planted
        arrays["groups_train"] = np.asarray(ds.groups_train, dtype=np.int64)
        arrays["groups_test"] = np.asarray(ds.groups_test, dtype=np.int64)
    blob = npz_bytes(arrays)
    write_bytes(out / DATA_FILE, blob)
    manifest = {
        "format": FORMAT_VERSION,
        "name": ds.name,
        "source": ds.meta.get("source"),
        "n_classes": int(ds.n_classes),
        "n_features": ds.n_features,
        "sparse": ds.sparse,
        "rows": {"train": int(ds.X_train.shape[0]), "test": int(ds.X_test.shape[0])},
        "meta": _jsonable(ds.meta),
        "files": {DATA_FILE: {"sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob)}},
    }
    write_json(out / MANIFEST_FILE, manifest)
    return out / MANIFEST_FILE


def _fix(out: Path) -> str:
    return f"delete {out} and re-run `snakemake` (or `psml prepare`)"


def _read_manifest(out: Path) -> dict[str, Any]:
    """Read and minimally check ``manifest.json``."""
    path = out / MANIFEST_FILE
    if not path.is_file():
        raise DataError(
            f"{path}: missing; the data set was never prepared or its preparation was "
            f"interrupted — {_fix(out)}"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        files = manifest["files"]
        if not isinstance(files, dict):
            raise TypeError("files is not a mapping")
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{path}: not a valid manifest ({exc}); {_fix(out)}") from None
    return manifest


def _verify(out: Path, files: dict[str, Any]) -> None:
    """Check that every manifest file exists and has its recorded SHA-256."""
    for name, entry in sorted(files.items()):
        path = out / name
        if not path.is_file():
            raise DataError(f"{path}: missing (listed in {MANIFEST_FILE}); {_fix(out)}")
        expected = entry.get("sha256") if isinstance(entry, dict) else None
        actual = file_sha256(path)
        if actual != expected:
            raise DataError(
                f"{path}: SHA-256 mismatch (manifest {expected}, file {actual}); "
                f"the file is corrupt — {_fix(out)}"
            )


def _matrix(arrays: Any, prefix: str) -> Matrix:
    """Rebuild one feature matrix from the npz members."""
    if prefix in arrays.files:
        return np.asarray(arrays[prefix], dtype=np.float32)
    shape = tuple(int(v) for v in arrays[f"{prefix}_shape"])
    return sp.csr_matrix(
        (arrays[f"{prefix}_data"], arrays[f"{prefix}_indices"], arrays[f"{prefix}_indptr"]),
        shape=shape,
    )


def load_prepared(out_dir: str | os.PathLike[str], verify: bool = True) -> Dataset:
    """Read a prepared directory back into a :class:`Dataset`.

    Args:
        out_dir: Directory written by :func:`save_prepared`.
        verify: Check the SHA-256 of every file listed in the manifest first.

    Returns:
        The data set.

    Raises:
        DataError: Missing or invalid manifest, missing file, checksum mismatch or unreadable
            ``data.npz``; the message names the file and the fix.
    """
    out = Path(out_dir)
    manifest = _read_manifest(out)
    if verify:
        _verify(out, manifest["files"])
    path = out / DATA_FILE
    try:
        with np.load(path, allow_pickle=False) as arrays:
            X_train = _matrix(arrays, "X_train")
            X_test = _matrix(arrays, "X_test")
            y_train = np.asarray(arrays["y_train"], dtype=np.int64)
            y_test = np.asarray(arrays["y_test"], dtype=np.int64)
            groups = {
                key: np.asarray(arrays[key], dtype=np.int64)
                for key in ("groups_train", "groups_test")
                if key in arrays.files
            }
        name, n_classes = str(manifest["name"]), int(manifest["n_classes"])
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as exc:
        raise DataError(f"{path}: cannot be read ({exc}); {_fix(out)}") from None
    return Dataset(
        name=name,
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
        n_classes=n_classes,
        meta=manifest.get("meta", {}),
        **groups,
    )


def manifest_sha256(out_dir: str | os.PathLike[str]) -> dict[str, str]:
    """File name -> SHA-256 of a prepared directory, for provenance records.

    Lists every file of the manifest (as recorded there) plus ``manifest.json`` itself (as it
    is on disk), so one entry pins the whole directory.

    Args:
        out_dir: Directory written by :func:`save_prepared`.

    Returns:
        Mapping of file name to hex digest, sorted by name.

    Raises:
        DataError: Missing or invalid manifest.
    """
    out = Path(out_dir)
    manifest = _read_manifest(out)
    shas = {name: str(entry["sha256"]) for name, entry in manifest["files"].items()}
    shas[MANIFEST_FILE] = file_sha256(out / MANIFEST_FILE)
    return dict(sorted(shas.items()))
