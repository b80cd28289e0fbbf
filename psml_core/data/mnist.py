"""MNIST or Fashion-MNIST from the user's copy of the four IDX files.

``datasets.<name>.path`` is the directory that holds the four files as they are distributed
(MNIST: LeCun, Cortes and Burges, http://yann.lecun.com/exdb/mnist/ and its mirrors;
Fashion-MNIST: Xiao, Rasul and Vollgraf 2017, https://github.com/zalandoresearch/fashion-mnist,
same names and format)::

    train-images-idx3-ubyte   train-labels-idx1-ubyte   (60,000 training images)
    t10k-images-idx3-ubyte    t10k-labels-idx1-ubyte    (10,000 test images, the test set)

each plain or gzipped (``.gz``), with ``-idx`` or ``.idx`` before the type (both spellings
circulate). ``test_fraction`` is not used: the files' test set is.

IDX format (LeCun et al.): two zero bytes, a type byte (``0x08``: unsigned byte), the number of
dimensions, then each dimension as a big-endian uint32, then the values row-major. Images are
(N, rows, cols) of uint8, labels (N,) of uint8 in 0..9. Features are the pixels / 255 as
float32, row by row (784 for 28x28).

Checksum (``sha256``; optional with ``path`` alone): the SHA-256 of the ``sha256sum`` listing of
the four files as stored, in the order above, i.e. what
``sha256sum train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz
t10k-labels-idx1-ubyte.gz | sha256sum`` prints inside the directory (with your files' names).

With ``url`` (the address of a directory holding the four ``.gz`` files) and ``sha256`` the
files are downloaded once instead (:func:`psml_core.data.download.fetch_files`), to ``path`` or
to ``data/downloads/<first 16 hex digits of sha256>-mnist/``; nothing in the tests downloads.
"""

from __future__ import annotations

import gzip
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from psml_core.data.base import DATASETS, Dataset, DatasetSource
from psml_core.data.download import DOWNLOAD_DIR, fetch_files, listing_sha256
from psml_core.data.store import file_sha256
from psml_core.errors import ConfigError, DataError

__all__ = ["FILES", "MnistSource", "find_files", "parse_idx"]

FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)
"""The four files, in listing order, by their canonical names (without ``.gz``)."""

N_CLASSES = 10
_UBYTE = 0x08
_GET = (
    "download the four IDX files of MNIST (http://yann.lecun.com/exdb/mnist/ or a mirror) or "
    "Fashion-MNIST (https://github.com/zalandoresearch/fashion-mnist) into one directory"
)
_REFETCH = "re-download the file (and un-gzip it only if you keep it plain)"


def _variants(name: str) -> list[str]:
    """The spellings of one file: ``-idx`` or ``.idx``, plain or ``.gz``."""
    dotted = name.replace("-idx", ".idx")
    return [name, f"{name}.gz", dotted, f"{dotted}.gz"]


def find_files(directory: Path, key: str) -> dict[str, Path]:
    """The four files in ``directory``: canonical name -> the file found.

    Raises:
        DataError: A file is missing, or present in two spellings.
    """
    found: dict[str, Path] = {}
    for name in FILES:
        hits = [directory / v for v in _variants(name) if (directory / v).is_file()]
        if not hits:
            raise DataError(
                f"{directory}: no {name} (or {name}.gz) ({key} must hold the four IDX files "
                f"{', '.join(FILES)}, plain or .gz); {_GET}"
            )
        if len(hits) > 1:
            raise DataError(
                f"{directory}: both {hits[0].name} and {hits[1].name}; keep one of them "
                f"(config key {key})"
            )
        found[name] = hits[0]
    return found


def _read(path: Path) -> bytes:
    """The file's bytes, un-gzipped when it is gzipped (by its magic, not its name)."""
    raw = path.read_bytes()
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(
            f"{path}: a damaged gzip file ({type(exc).__name__}: {exc}); it is truncated "
            f"(interrupted download?) — {_REFETCH}"
        ) from None


def parse_idx(data: bytes, where: str, ndim: int) -> np.ndarray:
    """Parse an IDX file of unsigned bytes with ``ndim`` dimensions.

    Args:
        data: The file's (un-gzipped) bytes.
        where: The file, for messages.
        ndim: Dimensions expected (3 for images, 1 for labels).

    Returns:
        A uint8 array of the file's shape.

    Raises:
        DataError: Wrong magic, type, dimensions, or a length that does not match the header.
    """
    if len(data) < 4 or data[:2] != b"\x00\x00":
        raise DataError(
            f"{where}: not an IDX file (it does not start with two zero bytes); it is another "
            f"format or damaged — {_REFETCH}"
        )
    kind, dims = data[2], data[3]
    if kind != _UBYTE or dims != ndim:
        raise DataError(
            f"{where}: an IDX file of type 0x{kind:02x} with {dims} dimensions, but an "
            f"{'image' if ndim == 3 else 'label'} file of MNIST holds unsigned bytes (0x08) "
            f"in {ndim} dimensions; is it the right file? — {_REFETCH}"
        )
    head = 4 + 4 * ndim
    if len(data) < head:
        raise DataError(f"{where}: the IDX header is cut short — {_REFETCH}")
    shape = struct.unpack(f">{ndim}I", data[4:head])
    size = int(np.prod(shape, dtype=np.int64))
    if len(data) - head != size:
        raise DataError(
            f"{where}: the header says {'x'.join(map(str, shape))} = {size} values but the "
            f"file holds {len(data) - head}; it is truncated or damaged — {_REFETCH}"
        )
    if size == 0:
        raise DataError(f"{where}: an empty IDX file (shape {shape}) — {_REFETCH}")
    return np.frombuffer(data, dtype=np.uint8, offset=head).reshape(shape)


def _pair(images: Path, labels: Path) -> tuple[np.ndarray, np.ndarray]:
    """One split's float32 rows in [0, 1] and int64 labels, checked against each other."""
    pixels = parse_idx(_read(images), str(images), 3)
    y = parse_idx(_read(labels), str(labels), 1).astype(np.int64)
    if y.size != pixels.shape[0]:
        raise DataError(
            f"{labels}: {y.size} labels for the {pixels.shape[0]} images of {images.name}; "
            f"the files belong to different sets — {_REFETCH}"
        )
    bad = np.flatnonzero(y >= N_CLASSES)
    if bad.size:
        raise DataError(
            f"{labels}: label {int(y[bad[0]])} of image {int(bad[0])} is outside 0..9 "
            f"({bad.size} such labels); MNIST has 10 classes — {_REFETCH}"
        )
    n = pixels.shape[0]
    return pixels.reshape(n, -1).astype(np.float32) / np.float32(255.0), y


@DATASETS.register("mnist")
class MnistSource(DatasetSource):
    """MNIST or Fashion-MNIST (28x28 grey images, 10 classes) from the four IDX files.

    Train: the 60,000 ``train-*`` images; test: the 10,000 ``t10k-*`` images. See the module
    docstring for the file names, the format and the checksum.
    """

    def load(self) -> Dataset:
        """Find, verify and parse the four files; build the data set.

        Raises:
            ConfigError: Neither ``path`` nor ``url`` is set.
            DataError: The directory or a file is missing, damaged or malformed, the two files
                of a split disagree, a label is outside 0..9, or the SHA-256 does not match.
        """
        spec = self.spec
        where = f"datasets.{spec.name}"
        key = f"{where}.path"
        directory = self._directory(where, key)
        files = find_files(directory, key)
        stored = tuple(files[name].name for name in FILES)
        shas = {p.name: file_sha256(p) for p in files.values()}
        sha = listing_sha256(shas, stored)
        if spec.sha256 and sha != spec.sha256.lower():
            raise DataError(
                f"{directory}: SHA-256 mismatch (expected {spec.sha256.lower()}, actual {sha}: "
                f"`sha256sum {' '.join(stored)} | sha256sum` inside the directory); the files "
                f"are another version or damaged — re-download them, or update {where}.sha256 "
                "if the new version is intended"
            )
        X_train, y_train = _pair(files[FILES[0]], files[FILES[1]])
        X_test, y_test = _pair(files[FILES[2]], files[FILES[3]])
        if X_train.shape[1] != X_test.shape[1]:
            raise DataError(
                f"{directory}: training images have {X_train.shape[1]} pixels, test images "
                f"{X_test.shape[1]}; the files belong to different sets — {_REFETCH}"
            )
        meta: dict[str, Any] = {
            "source": self.name,
            "origin": (
                "MNIST (LeCun, Cortes, Burges) or Fashion-MNIST (Xiao et al. 2017) IDX files, "
                "the user's copy"
            ),
            "path": str(directory),
            "url": spec.url,
            "files": list(stored),
            "file_sha256": shas,
            "sha256": sha,
            "sha256_of": "sha256sum listing of the four files",
            "scaling": "pixel / 255",
            "test_fraction": None,
        }
        return Dataset(spec.name, X_train, y_train, X_test, y_test, N_CLASSES, meta)

    def _directory(self, where: str, key: str) -> Path:
        """The directory of the four files: ``path``, or where ``url`` was downloaded to."""
        spec = self.spec
        if spec.url:
            if not spec.sha256:
                raise DataError(f"{where}.url needs {where}.sha256 (see the mnist source)")
            dest = Path(spec.path or DOWNLOAD_DIR / f"{spec.sha256.lower()[:16]}-mnist")
            if not dest.exists():
                fetch_files(spec.url, tuple(f"{n}.gz" for n in FILES), dest, spec.sha256, where)
            return dest
        if not spec.path:
            example = json.dumps({spec.name: {"source": "mnist", "path": "/data/mnist"}})
            raise ConfigError(
                f"{key}: required for source mnist and not set; {_GET}, then give the "
                f"directory, e.g. --config 'datasets={example}'; or give {where}.url (the "
                f"directory's address) and {where}.sha256 to have them downloaded once"
            )
        directory = Path(spec.path)
        if not directory.is_dir():
            what = "a file, not a directory" if directory.exists() else "not found"
            raise DataError(
                f"{directory}: {what} (config key {key}); give the directory that holds the "
                f"four IDX files"
            )
        return directory
