"""CIFAR-10 from the user's copy of the "CIFAR-10 python version".

``datasets.<name>.path`` points at either

- the archive ``cifar-10-python.tar.gz`` (read in place, nothing is extracted to disk), or
- the extracted directory ``cifar-10-batches-py`` (or a directory that contains it),

which hold six pickled batches: ``data_batch_1`` ... ``data_batch_5`` (the 50,000 training
images) and ``test_batch`` (the 10,000 test images, used as the test set, so ``test_fraction``
is not used). Each batch is a dict with ``b"data"``, a uint8 array of shape (N, 3072) whose
rows are 1024 red, 1024 green and 1024 blue values (each 32x32 image row by row, channels
first), and ``b"labels"``, N integers in 0..9. The files come from
https://www.cs.toronto.edu/~kriz/cifar.html (Krizhevsky, 2009).

Features are the pixels scaled to [0, 1] (``pixel / 255``, float32), in the file's channels-first
order, which is the layout the ``resnet18`` model reshapes to (N, 3, 32, 32). No per-channel
mean/std standardisation is applied: the prepared file stays a plain function of the pixels,
and the model's first GroupNorm, right after the stem convolution, normalises its activations.

With ``datasets.<name>.url`` and ``sha256`` (the archive's), the archive is downloaded once
instead (:mod:`psml_core.data.download`); nothing in the tests or CI downloads it.

Checksum (``datasets.<name>.sha256``, optional without ``url``): for the archive, the SHA-256
of the file; for the extracted directory, the SHA-256 of the ``sha256sum`` listing of the six
batches, i.e. what ``cd cifar-10-batches-py && sha256sum data_batch_1 data_batch_2 data_batch_3
data_batch_4 data_batch_5 test_batch | sha256sum`` prints.

Security: the batches are pickles, and unpickling can run arbitrary code named by the file.
They are read with a restricted unpickler that resolves only the few numpy globals an array
needs (the array reconstructor ``_reconstruct`` / ``_frombuffer``, ``ndarray`` and ``dtype``)
and refuses every other global (``os.system``, ``builtins.eval``, ...) with a DataError, so a
tampered or foreign file cannot execute anything.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import tarfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

import numpy as np

from psml_core.data.base import DATASETS, Dataset, DatasetSource
from psml_core.data.download import local_file
from psml_core.data.store import file_sha256
from psml_core.errors import ConfigError, DataError

__all__ = [
    "BATCH_FILES",
    "LABEL_NAMES",
    "Cifar10Source",
    "RestrictedUnpickler",
    "directory_sha256",
    "load_batch",
]

TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILE = "test_batch"
BATCH_FILES = (*TRAIN_FILES, TEST_FILE)
"""The six batch files of the CIFAR-10 python version, in reading order."""

LABEL_NAMES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)
"""Class names of labels 0..9 (``batches.meta`` of the CIFAR-10 python version)."""

N_CLASSES = 10
N_FEATURES = 3 * 32 * 32
DIR_NAME = "cifar-10-batches-py"
URL = "https://www.cs.toronto.edu/~kriz/cifar.html"
_GET = f'download "CIFAR-10 python version" (cifar-10-python.tar.gz) from {URL}'
_REFETCH = "re-download cifar-10-python.tar.gz (and re-extract it if you use the directory)"

# The reconstructors numpy itself names when it pickles an array (in-band, protocol < 5 and
# >= 5); taken from numpy rather than imported by name, so numpy 1.x and 2.x pickles (which
# say numpy.core / numpy._core) both resolve without touching a deprecated module.
_RECONSTRUCT = np.empty(0).__reduce__()[0]
_FROMBUFFER = np.empty(0).__reduce_ex__(5)[0]
_ALLOWED: dict[tuple[str, str], Any] = {
    **{(f"{m}.multiarray", "_reconstruct"): _RECONSTRUCT for m in ("numpy.core", "numpy._core")},
    **{(f"{m}.numeric", "_frombuffer"): _FROMBUFFER for m in ("numpy.core", "numpy._core")},
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
}


class _Refused(pickle.UnpicklingError):
    """A pickle named a global outside the allowlist."""


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that builds only plain containers and numpy arrays.

    ``find_class`` resolves the numpy array reconstructors, ``numpy.ndarray`` and
    ``numpy.dtype`` and refuses every other global, so no function named in the file can be
    called. Strings pickled by Python 2 (as the CIFAR-10 batches were) load as ``bytes``.

    Args:
        file: A binary file object holding one pickle.
    """

    def __init__(self, file: BinaryIO) -> None:
        super().__init__(file, encoding="bytes")

    def find_class(self, module: str, name: str) -> Any:
        """The allowed global ``module.name``; anything else raises."""
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise _Refused(
                f"refused to load global {module}.{name} (only numpy arrays are allowed)"
            ) from None


def _batch_error(where: str, msg: str) -> DataError:
    return DataError(f"{where}: {msg}")


def load_batch(data: bytes, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Unpickle one CIFAR-10 batch safely and check it.

    Args:
        data: The batch file's bytes.
        where: The file (or archive member) as the user would find it, for error messages.

    Returns:
        ``(pixels, labels)``: uint8 (N, 3072) and int64 (N,) with values in 0..9.

    Raises:
        DataError: A refused global, a truncated or corrupt pickle, a missing key, wrong
            shapes or dtypes, or a label outside 0..9; the message names ``where`` and the fix.
    """
    try:
        obj = RestrictedUnpickler(io.BytesIO(data)).load()
    except _Refused as exc:
        raise _batch_error(
            where,
            f"{exc}; a CIFAR-10 batch holds only numpy arrays and lists, so this file is not "
            f"one (or was tampered with) and was not loaded — {_REFETCH}",
        ) from None
    except Exception as exc:  # any failure to unpickle these bytes is a corrupt input file
        raise _batch_error(
            where,
            f"not a readable pickle ({type(exc).__name__}: {exc}); the file is truncated or "
            f"corrupt — {_REFETCH}",
        ) from None
    if not isinstance(obj, dict):
        raise _batch_error(
            where,
            f"holds a {type(obj).__name__}, not the dict of a CIFAR-10 batch — {_REFETCH}",
        )
    batch = {k.encode() if isinstance(k, str) else k: v for k, v in obj.items()}
    missing = [k.decode() for k in (b"data", b"labels") if k not in batch]
    if missing:
        hint = " (fine_labels: this is CIFAR-100, not CIFAR-10)" if b"fine_labels" in batch else ""
        raise _batch_error(
            where, f"not a CIFAR-10 batch (no {' or '.join(missing)} key{hint}) — {_REFETCH}"
        )
    pixels = batch[b"data"]
    if not (
        isinstance(pixels, np.ndarray)
        and pixels.dtype == np.uint8
        and pixels.ndim == 2
        and pixels.shape[1] == N_FEATURES
        and pixels.shape[0] >= 1
    ):
        got = (
            f"{pixels.dtype} array of shape {pixels.shape}"
            if isinstance(pixels, np.ndarray)
            else type(pixels).__name__
        )
        raise _batch_error(
            where,
            f"data is a {got}, but a CIFAR-10 batch holds uint8 images of shape (N, 3072) "
            f"(3x32x32, channels first) — {_REFETCH}",
        )
    try:
        labels = np.asarray(batch[b"labels"])
    except (TypeError, ValueError):  # ragged nested lists, unconvertible objects
        labels = np.asarray(None)
    if labels.dtype.kind not in "iu" or labels.ndim != 1:
        raise _batch_error(where, f"labels are not a list of integers — {_REFETCH}")
    labels = labels.astype(np.int64)
    if labels.size != pixels.shape[0]:
        raise _batch_error(
            where,
            f"{labels.size} labels for {pixels.shape[0]} images (corrupt batch) — {_REFETCH}",
        )
    bad = np.flatnonzero((labels < 0) | (labels >= N_CLASSES))
    if bad.size:
        i = int(bad[0])
        raise _batch_error(
            where,
            f"label {int(labels[i])} of image {i} is outside 0..9 ({bad.size} such labels); "
            f"CIFAR-10 has 10 classes — {_REFETCH}",
        )
    return pixels, labels


def directory_sha256(files: dict[str, str]) -> str:
    """The directory checksum: SHA-256 of the ``sha256sum`` listing of the batches.

    Args:
        files: Batch file name -> its SHA-256, for every name in :data:`BATCH_FILES`.

    Returns:
        The hex digest of the lines ``<sha>  <name>`` (two spaces, newline-terminated) in
        :data:`BATCH_FILES` order.
    """
    listing = "".join(f"{files[name]}  {name}\n" for name in BATCH_FILES)
    return hashlib.sha256(listing.encode("ascii")).hexdigest()


def _read_directory(path: Path, key: str) -> tuple[Path, dict[str, bytes], dict[str, str]]:
    """The batch directory (``path`` or its ``cifar-10-batches-py``), batches and SHA-256s."""
    if not (path / BATCH_FILES[0]).exists() and (path / DIR_NAME).is_dir():
        path = path / DIR_NAME
    blobs: dict[str, bytes] = {}
    for name in BATCH_FILES:
        f = path / name
        if not f.is_file():
            raise DataError(
                f"{f}: missing ({key} must hold data_batch_1..5 and test_batch, the "
                f"extracted {DIR_NAME}); re-extract cifar-10-python.tar.gz, or point {key} "
                "at the archive itself"
            )
        blobs[name] = f.read_bytes()
    shas = {name: hashlib.sha256(blob).hexdigest() for name, blob in blobs.items()}
    return path, blobs, shas


def _read_archive(path: Path) -> dict[str, bytes]:
    """The six batches of the tar(.gz) archive, read in one pass without extracting."""
    blobs: dict[str, bytes] = {}
    try:
        with tarfile.open(path, mode="r:*") as tar:
            for member in tar:
                name = PurePosixPath(member.name).name
                if name not in BATCH_FILES or not member.isfile():
                    continue
                if name in blobs:
                    raise DataError(
                        f"{path}: two members named {name}; expected one "
                        f"{DIR_NAME}/ directory — {_REFETCH}"
                    )
                fh = tar.extractfile(member)
                if fh is None:  # pragma: no cover - isfile() members always have data
                    continue
                blobs[name] = fh.read()
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise DataError(
            f"{path}: not a readable tar.gz archive ({type(exc).__name__}: {exc}); it is "
            f"truncated (interrupted download?) or not cifar-10-python.tar.gz — {_REFETCH}"
        ) from None
    missing = [name for name in BATCH_FILES if name not in blobs]
    if missing:
        raise DataError(
            f"{path}: archive has no {', '.join(missing)} (expected {DIR_NAME}/data_batch_1..5 "
            f"and test_batch); it is not the CIFAR-10 python version, or truncated — "
            f"{_REFETCH}"
        )
    return blobs


@DATASETS.register("cifar10")
class Cifar10Source(DatasetSource):
    """CIFAR-10 (60,000 32x32 colour images, 10 classes) from a local archive or directory.

    Train: ``data_batch_1..5`` in order; test: ``test_batch``. Features: pixels / 255 as
    float32, channels first (3,072 per image). See the module docstring for the layout, the
    checksum and the restricted unpickler.
    """

    def load(self) -> Dataset:
        """Verify, unpickle (restricted) and check the six batches; build the data set.

        Raises:
            ConfigError: ``path`` is not set.
            DataError: The path does not exist, a batch is missing, truncated, corrupt or
                malformed, a label is outside 0..9, or the SHA-256 does not match.
        """
        spec = self.spec
        where = f"datasets.{spec.name}"
        key = f"{where}.path"
        local = local_file(spec.path, spec.url, spec.sha256, where)
        if not local:
            example = json.dumps({spec.name: {"path": "/data/cifar-10-python.tar.gz"}})
            raise ConfigError(
                f"{key}: required for source cifar10 and not set; {_GET}, then give its path "
                f"(the .tar.gz or the extracted {DIR_NAME} directory), e.g. "
                f"--config 'datasets={example}'; or give {where}.url and {where}.sha256 (the "
                f"archive's) to have it downloaded once"
            )
        path = Path(local)
        if not path.exists():
            raise DataError(
                f"{path}: not found (config key {key}); fix the path, or {_GET} and put it there"
            )
        files: dict[str, str] | None = None
        if path.is_dir():
            kind = "directory"
            path, blobs, files = _read_directory(path, key)
            sha = directory_sha256(files)
        else:
            kind = "archive"
            if path.stat().st_size == 0:
                raise DataError(f"{path}: empty file (0 bytes) (config key {key}); {_REFETCH}")
            sha = file_sha256(path)
        self._check_sha(path, sha, where, kind)
        if kind == "archive":
            blobs = _read_archive(path)
        parts = {
            name: load_batch(blob, self._where(path, kind, name)) for name, blob in blobs.items()
        }
        del blobs
        X_train = np.concatenate([parts[n][0] for n in TRAIN_FILES])
        y_train = np.concatenate([parts[n][1] for n in TRAIN_FILES])
        X_test, y_test = parts[TEST_FILE]
        meta: dict[str, Any] = {
            "source": self.name,
            "origin": f"CIFAR-10 python version (Krizhevsky 2009), {URL}",
            "path": str(local),
            "url": spec.url,
            "kind": kind,
            "sha256": sha,
            "sha256_of": "archive file" if kind == "archive" else "sha256sum listing of batches",
            "file_sha256": files,
            "train_files": list(TRAIN_FILES),
            "test_file": TEST_FILE,
            "layout": "3x32x32, channels first (1024 R, 1024 G, 1024 B, row-major)",
            "scaling": "pixel / 255 (no per-channel standardisation)",
            "label_names": list(LABEL_NAMES),
            "test_fraction": None,
        }
        return Dataset(
            name=spec.name,
            X_train=self._scale(X_train),
            y_train=y_train,
            X_test=self._scale(X_test),
            y_test=y_test,
            n_classes=N_CLASSES,
            meta=meta,
        )

    @staticmethod
    def _scale(pixels: np.ndarray) -> np.ndarray:
        """uint8 pixels -> float32 in [0, 1]."""
        return pixels.astype(np.float32) / np.float32(255.0)

    @staticmethod
    def _where(path: Path, kind: str, name: str) -> str:
        """A batch as the user finds it: the file, or the archive and its member."""
        return f"{path} (member {name})" if kind == "archive" else str(path / name)

    def _check_sha(self, path: Path, actual: str, where: str, kind: str) -> None:
        expected = self.spec.sha256
        if not expected or actual == expected.lower():
            return
        how = (
            "sha256sum of the archive"
            if kind == "archive"
            else f"`sha256sum {' '.join(BATCH_FILES)} | sha256sum` inside the directory"
        )
        raise DataError(
            f"{path}: SHA-256 mismatch (expected {expected.lower()}, actual {actual}; {how}); "
            f"the {kind} is corrupt or another version — {_REFETCH}, or update "
            f"{where}.sha256 if the new version is intended"
        )
