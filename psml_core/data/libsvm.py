"""LIBSVM / svmlight text files: a strict parser with errors that name the file, line and fix.

Format, one row per line::

    <label> <idx>:<value> <idx>:<value> ... [# comment]

Indices are 1-based decimal integers in ascending order within a row (no index twice), as
libsvm and scikit-learn require; a row out of order is an error naming its line.
Blank lines and comment-only lines are skipped; a row may have no features. Data (outside
comments) must be ASCII. Explicit zero values are dropped. ``qid:`` tokens are not supported.
A file compressed with bzip2, gzip or xz (as the LIBSVM site ships them: ``rcv1_train.binary.bz2``)
is recognised by its first bytes and read as is; its checksum is that of the compressed file.

Parsing runs a fast path (per line, a few string operations; numbers converted a chunk of lines
at a time by numpy) and, the moment anything looks wrong, re-parses the offending line(s) with
a slow token-by-token checker that produces the error message; both apply the same rules.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import math
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import scipy.sparse as sp

from psml_core.data.base import DATASETS, Dataset, DatasetSource
from psml_core.data.download import local_file
from psml_core.data.prepare import holdout_split
from psml_core.data.store import file_sha256
from psml_core.errors import ConfigError, DataError

__all__ = ["LibsvmSource", "Rows", "map_labels", "parse_libsvm", "read_rows"]

_CHUNK_LINES = 20_000
_MAX_INDEX = 2**31 - 1  # CSR column ids are stored as int32 or int64; keep them sane
_F32_MAX = float(np.finfo(np.float32).max)
_FORMAT = "LIBSVM lines are `label idx:value ...` with 1-based integer idx"


def _check_file(path: Path, what: str) -> None:
    """Missing or empty file -> DataError naming the file and the config key."""
    if not path.is_file():
        raise DataError(
            f"{path}: file not found (config key {what}); fix the path or put the file there"
        )
    if path.stat().st_size == 0:
        raise DataError(
            f"{path}: empty file (0 bytes); re-download it or fix the path (config key {what})"
        )


@dataclass(frozen=True)
class Rows:
    """The rows of one LIBSVM file, as parsed, before labels are mapped.

    Attributes:
        path: The file, as given.
        labels: Raw labels, float64, one per row.
        lines: Line number of each row (1-based), int64.
        indptr: Row pointers into ``indices``/``values``, int64.
        indices: Feature indices as in the file (1-based), int64.
        values: Feature values, float64 (finite, within float32 range).
        unterminated_line: Line number of a last line without a newline, else None.
    """

    path: str
    labels: np.ndarray
    lines: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    unterminated_line: int | None

    @property
    def max_index(self) -> int:
        """Largest feature index (0 when the file has no features)."""
        return int(self.indices.max()) if self.indices.size else 0

    def error(self, lineno: int, msg: str) -> DataError:
        """A DataError for ``lineno``, with the truncation hint when it is an unterminated line."""
        return _line_error(self.path, lineno, msg, lineno == self.unterminated_line)

    def row_error(self, row: int, msg: str) -> DataError:
        """A DataError for the line holding row ``row``."""
        return self.error(int(self.lines[row]), msg)

    def to_csr(self, n_features: int, what: str = "n_features") -> sp.csr_matrix:
        """Build the float32 CSR matrix with ``n_features`` columns (0-based ids, sorted).

        Args:
            n_features: Number of columns d.
            what: Config key that set ``n_features``, for the error message.

        Raises:
            DataError: An index exceeds ``n_features``, or appears twice in one row.
        """
        n = self.labels.size
        row_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.indptr))
        over = np.flatnonzero(self.indices > n_features)
        if over.size:
            k = int(over[0])
            raise self.row_error(
                int(row_of[k]),
                f"feature index {int(self.indices[k])} > n_features={n_features} ({what}); "
                "raise n_features, or leave it unset to infer it from the data",
            )
        cols, vals = self.indices - 1, self.values
        starts = np.zeros(cols.size, dtype=bool)
        starts[self.indptr[:-1][np.diff(self.indptr) > 0]] = True
        bad = np.flatnonzero((cols[1:] <= cols[:-1]) & ~starts[1:]) if cols.size > 1 else []
        if len(bad):
            k = int(bad[0]) + 1
            if cols[k] == cols[k - 1]:
                msg = f"feature index {int(cols[k]) + 1} appears twice in the row"
            else:
                msg = (
                    f"feature index {int(cols[k]) + 1} follows {int(cols[k - 1]) + 1}: LIBSVM "
                    "rows list their indices in ascending order (as libsvm and scikit-learn "
                    "require); sort each row's idx:value pairs by idx"
                )
            raise self.row_error(int(row_of[k]), msg)
        keep = vals != 0.0
        indptr = np.concatenate([[0], np.cumsum(np.bincount(row_of[keep], minlength=n))])
        return sp.csr_matrix(
            (vals[keep].astype(np.float32), cols[keep], indptr), shape=(n, n_features)
        )


def _line_error(path: str, lineno: int, msg: str, unterminated: bool) -> DataError:
    hint = (
        "; the file does not end with a newline, so it was probably truncated "
        "(interrupted download?) — re-download it"
        if unterminated
        else ""
    )
    return DataError(f"{path} line {lineno}: {msg}{hint}")


def _check_token(tok: str) -> str | None:
    """The problem with one ``idx:value`` token, or None if it is valid."""
    idx, sep, val = tok.partition(":")
    if idx == "qid" and sep:
        return f"{tok!r}: qid tokens are not supported"
    if not sep or not idx or not val or ":" in val or not tok.isascii():
        return f"{tok!r} is not idx:value; {_FORMAT}"
    if not idx.isdigit():
        return f"{tok!r}: index {idx!r} is not a positive integer; {_FORMAT}"
    i = int(idx)
    if i < 1:
        return f"{tok!r}: feature index {i} < 1 (LIBSVM indices are 1-based)"
    if i > _MAX_INDEX:
        return f"{tok!r}: feature index {i} is larger than {_MAX_INDEX}"
    try:
        v = float(val)
    except ValueError:
        return f"{tok!r}: value {val!r} is not a number"
    if not math.isfinite(v) or abs(v) > _F32_MAX:
        return f"{tok!r}: value {val!r} is not finite (or overflows float32)"
    return None


def _line_problem(text: str) -> str | None:
    """The slow, token-by-token check of one data line; None if it is valid."""
    parts = text.split()
    label = parts[0]
    try:
        y = float(label)
    except ValueError:
        return f"label {label!r} is not a number; {_FORMAT}"
    if not math.isfinite(y) or not label.isascii():
        return f"label {label!r} is not a finite number"
    for tok in parts[1:]:
        problem = _check_token(tok)
        if problem:
            return problem
    return None


class _Reader:
    """Accumulates rows line by line; converts numbers one chunk of lines at a time."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.unterminated: int | None = None
        self.labels: list[np.ndarray] = []
        self.indices: list[np.ndarray] = []
        self.values: list[np.ndarray] = []
        self.counts: list[int] = []
        self.lines: list[int] = []
        self._reset()

    def _reset(self) -> None:
        self.c_texts: list[tuple[int, str]] = []
        self.c_labels: list[str] = []
        self.c_idx: list[str] = []
        self.c_val: list[str] = []

    def fail(self, lineno: int, text: str) -> None:
        """Raise the error of the first bad line up to this one.

        The pending chunk's numbers are converted only when it is flushed, so a bad number on
        an earlier line of the chunk is reported before this line's problem.
        """
        for earlier, pending in self.c_texts:
            if earlier < lineno and (problem := _line_problem(pending)):
                raise _line_error(self.path, earlier, problem, earlier == self.unterminated)
        problem = _line_problem(text) or "cannot be parsed"
        raise _line_error(self.path, lineno, problem, lineno == self.unterminated)

    def add(self, lineno: int, text: str) -> None:
        """Add one data line (comment already stripped, not blank)."""
        parts = text.split()
        toks = parts[1:]
        joined = " ".join(toks)
        nums = joined.replace(":", " ").split()
        idx = nums[0::2]
        if (
            joined.count(":") != len(toks)
            or len(nums) != 2 * len(toks)
            or not text.isascii()
            or not all(map(str.isdigit, idx))
        ):
            self.fail(lineno, text)
        self.c_texts.append((lineno, text))
        self.c_labels.append(parts[0])
        self.c_idx.extend(idx)
        self.c_val.extend(nums[1::2])
        self.counts.append(len(toks))
        self.lines.append(lineno)
        if len(self.c_texts) >= _CHUNK_LINES:
            self.flush()

    def flush(self) -> None:
        """Convert the pending chunk; on any bad number, report the first bad line."""
        if not self.c_texts:
            return
        try:
            labels = np.array(self.c_labels, dtype=np.float64)
            idx = np.array(self.c_idx, dtype=np.int64).reshape(-1)
            val = np.array(self.c_val, dtype=np.float64).reshape(-1)
            ok = (
                np.all(np.isfinite(labels))
                and np.all((idx >= 1) & (idx <= _MAX_INDEX))
                and np.all(np.abs(val) <= _F32_MAX)  # also False for NaN
            )
        except (ValueError, OverflowError):
            ok = False
        if not ok:
            for lineno, text in self.c_texts:
                if _line_problem(text):
                    self.fail(lineno, text)
            self.fail(*self.c_texts[0])
        self.labels.append(labels)
        self.indices.append(idx)
        self.values.append(val)
        self._reset()

    def rows(self) -> Rows:
        """The parsed rows."""
        self.flush()
        if not self.lines:
            raise DataError(
                f"{self.path}: no data lines (only blank lines or comments); "
                "re-download it or fix the path"
            )

        def cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
            return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)

        return Rows(
            path=self.path,
            labels=cat(self.labels, np.float64),
            lines=np.asarray(self.lines, dtype=np.int64),
            indptr=np.concatenate([[0], np.cumsum(self.counts, dtype=np.int64)]),
            indices=cat(self.indices, np.int64),
            values=cat(self.values, np.float64),
            unterminated_line=self.unterminated,
        )


_COMPRESSED = (
    (b"BZh", "bzip2", bz2.open),
    (b"\x1f\x8b", "gzip", gzip.open),
    (b"\xfd7zXZ\x00", "xz", lzma.open),
)


def _open(path: Path) -> tuple[IO[bytes], str | None]:
    """The file's bytes, decompressed if its first bytes are a bzip2, gzip or xz header."""
    with open(path, "rb") as fh:
        head = fh.read(6)
    for magic, kind, opener in _COMPRESSED:
        if head.startswith(magic):
            return opener(path, "rb"), kind
    return open(path, "rb"), None


_DAMAGED = (OSError, EOFError, lzma.LZMAError, zlib.error)


def read_rows(path: str | os.PathLike[str], what: str = "path") -> Rows:
    """Parse a LIBSVM file into raw rows (labels not yet mapped, indices still 1-based).

    Args:
        path: The file, plain or compressed (bzip2, gzip, xz).
        what: The config key that named the file, for error messages.

    Returns:
        The rows.

    Raises:
        DataError: Missing, empty, damaged (compressed stream) or malformed file; the message
            names the file and line.
    """
    p = Path(path)
    _check_file(p, what)
    reader = _Reader(str(path))
    fh, kind = _open(p)
    lineno = 0
    try:
        with fh:
            try:
                for lineno, raw in enumerate(fh, 1):
                    _read_line(reader, lineno, raw)
            except DataError:
                # A decompressor hands out a block's bytes before it checks the block's CRC,
                # so garbage from a damaged file reaches the parser first: read on to the
                # check, and blame the file rather than a line when it fails.
                if kind is not None:
                    _drain(fh)
                raise
    except _DAMAGED as exc:
        if kind is None:
            raise
        raise DataError(
            f"{path}: damaged {kind} file after line {lineno} ({exc}); it is truncated or "
            f"corrupt: delete it and re-download it (config key {what})"
        ) from None
    return reader.rows()


def _read_line(reader: _Reader, lineno: int, raw: bytes) -> None:
    """Hand one raw line to ``reader`` (comment stripped, blank lines skipped)."""
    if not raw.endswith(b"\n"):
        reader.unterminated = lineno
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _line_error(
            reader.path, lineno, "is not UTF-8 text", lineno == reader.unterminated
        ) from None
    text = text.partition("#")[0]
    if text.strip():
        reader.add(lineno, text)


def _drain(fh: IO[bytes]) -> None:
    """Read a compressed stream to its end, so its checksums are verified (raises if damaged)."""
    while fh.read(1 << 20):
        pass


def map_labels(labels: np.ndarray) -> tuple[np.ndarray, int, dict[str, int]]:
    """Map raw labels to ``0..K-1``.

    ``{-1, +1}`` and ``{0, 1}`` become ``{0, 1}``; other integer labels map to
    ``0..K-1`` in sorted order.

    Args:
        labels: Raw labels (float64).

    Returns:
        ``(y, n_classes, mapping)``: int64 labels, the class count, and raw label (as text)
        -> class id.

    Raises:
        ValueError: A label is not an integer (the message names it), or fewer than two
            distinct labels are present.
    """
    uniq = np.unique(labels)
    if uniq.size < 2:
        # Before the binary shortcut: all-``1`` labels are one class, not a {0, 1} subset.
        only = f"every row has label {uniq[0]:g}" if uniq.size else "no labels"
        raise ValueError(f"{only}; at least two classes are needed")
    if set(uniq.tolist()) <= {-1.0, 1.0} or set(uniq.tolist()) <= {0.0, 1.0}:
        y = (labels > 0).astype(np.int64)
        return y, 2, {f"{v:g}": int(v > 0) for v in uniq.tolist()}
    bad = uniq[uniq != np.round(uniq)]
    if bad.size:
        raise ValueError(f"label {bad[0]:g} is not an integer (classification labels only)")
    y = np.searchsorted(uniq, labels).astype(np.int64)
    return y, int(uniq.size), {f"{v:g}": i for i, v in enumerate(uniq.tolist())}


def parse_libsvm(
    path: str | os.PathLike[str], n_features: int | None = None
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Read a LIBSVM file into a float32 CSR matrix and its raw labels.

    Args:
        path: The file.
        n_features: Number of columns; the largest index in the file when None.

    Returns:
        ``(X, labels)``: CSR with sorted 0-based column ids, and float64 labels as written.

    Raises:
        DataError: Missing, empty or malformed file, or an index above ``n_features``.
    """
    rows = read_rows(path)
    return rows.to_csr(n_features or max(rows.max_index, 1)), rows.labels


def _labels(parts: list[Rows]) -> tuple[list[np.ndarray], int, dict[str, int]]:
    """Map the labels of all files with one mapping; errors name the first offending line."""
    raw = np.concatenate([r.labels for r in parts])
    try:
        y, n_classes, mapping = map_labels(raw)
    except ValueError as exc:
        for r in parts:
            bad = np.flatnonzero(r.labels != np.round(r.labels))
            if bad.size:
                raise r.row_error(int(bad[0]), str(exc)) from None
        raise DataError(f"{parts[0].path}: {exc}") from None
    sizes = np.cumsum([r.labels.size for r in parts])[:-1]
    return np.split(y, sizes), n_classes, mapping


@DATASETS.register("libsvm")
class LibsvmSource(DatasetSource):
    """A classification set read from LIBSVM files (``path`` and optional ``test_path``)."""

    @staticmethod
    def _verify(path: Path, expected: str | None, where: str, prefix: str = "") -> str:
        """Check the file exists and matches ``expected`` when given; return its SHA-256."""
        _check_file(path, f"{where}.{prefix}path")
        actual = file_sha256(path)
        if expected and actual != expected.lower():
            raise DataError(
                f"{path}: SHA-256 mismatch (expected {expected.lower()}, actual {actual}); "
                f"the file is corrupt or another version — re-download it, or update "
                f"{where}.{prefix}sha256 if the new version is intended"
            )
        return actual

    def load(self) -> Dataset:
        """Download (``url``) if needed, verify, parse and split the file(s)."""
        spec = self.spec
        where = f"datasets.{spec.name}"
        path = local_file(spec.path, spec.url, spec.sha256, where)
        if not path:
            raise ConfigError(f"{where}.path: required for source libsvm (or url with sha256)")
        test_path = local_file(spec.test_path, spec.test_url, spec.test_sha256, where, "test_")
        sha = self._verify(Path(path), spec.sha256, where)
        parts = [read_rows(path, f"{where}.path")]
        test_sha = None
        if test_path:
            test_sha = self._verify(Path(test_path), spec.test_sha256, where, "test_")
            parts.append(read_rows(test_path, f"{where}.test_path"))
        key = f"{where}.n_features"
        n_features = spec.n_features or max(max(r.max_index for r in parts), 1)
        mats = [r.to_csr(n_features, key) for r in parts]
        ys, n_classes, mapping = _labels(parts)
        if test_path:
            X_train, X_test, (y_train, y_test) = mats[0], mats[1], ys
        else:
            train, test = holdout_split(mats[0].shape[0], spec.test_fraction, spec.seed)
            X_train, X_test = mats[0][train], mats[0][test]
            y_train, y_test = ys[0][train], ys[0][test]
        meta: dict[str, Any] = {
            "source": self.name,
            "path": str(path),
            "url": spec.url,
            "sha256": sha,
            "test_path": str(test_path) if test_path else None,
            "test_url": spec.test_url,
            "test_sha256": test_sha,
            "n_features_inferred": spec.n_features is None,
            "label_map": mapping,
            "seed": spec.seed,
            "test_fraction": None if test_path else spec.test_fraction,
        }
        return Dataset(
            name=spec.name,
            X_train=X_train,
            y_train=y_train,
            X_test=X_test,
            y_test=y_test,
            n_classes=n_classes,
            meta=meta,
        )
