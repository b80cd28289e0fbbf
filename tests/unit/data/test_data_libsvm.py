from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from psml_core.config import DatasetSpec
from psml_core.data import DATASETS, LibsvmSource, parse_libsvm
from psml_core.data.libsvm import _line_problem, map_labels, read_rows
from psml_core.errors import ConfigError, DataError

GOOD = "+1 1:0.5 3:1.25\n-1 2:2 # a comment\n\n# only a comment\n+1 4:-1e-3\n-1 1:1 2:1\n"


def _write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, str):
        text = text.encode()
    path.write_bytes(text)
    return path


def _spec(path: Path, **kw) -> DatasetSpec:
    return DatasetSpec(name="svm", source="libsvm", path=str(path), **kw)


def _load(path: Path, **kw):
    return DATASETS.get("libsvm")(_spec(path, **kw)).load()


def test_registered() -> None:
    assert DATASETS.get("libsvm") is LibsvmSource


def test_parses_comments_blank_lines_and_labels(tmp_path) -> None:
    X, labels = parse_libsvm(_write(tmp_path / "a.txt", GOOD))
    assert X.dtype == np.float32 and X.shape == (4, 4)
    np.testing.assert_array_equal(labels, [1, -1, 1, -1])
    expected = np.array(
        [[0.5, 0, 1.25, 0], [0, 2, 0, 0], [0, 0, 0, -1e-3], [1, 1, 0, 0]], dtype=np.float32
    )
    np.testing.assert_array_equal(X.toarray(), expected)
    rows = read_rows(tmp_path / "a.txt")
    np.testing.assert_array_equal(rows.lines, [1, 2, 5, 6])


def test_zeros_and_empty_rows(tmp_path) -> None:
    X, _ = parse_libsvm(_write(tmp_path / "a.txt", "1 2:3 3:0 5:1\n0\n1 1:2\n"), n_features=6)
    assert X.shape == (3, 6) and X.has_canonical_format and X.nnz == 3
    np.testing.assert_array_equal(X.toarray()[0], [0, 3, 0, 0, 1, 0])
    assert X[1].nnz == 0


def test_indices_out_of_order_are_an_error_naming_the_line(tmp_path) -> None:
    """`4:1 2:1` was sorted silently; libsvm and scikit-learn refuse it, and so do we."""
    msg = _error(tmp_path, "1 1:1 3:1\n-1 4:1 2:1\n")
    assert "line 2" in msg and "index 2 follows 4" in msg and "ascending" in msg
    with pytest.raises(ValueError, match="sorted"):  # the reference reader agrees
        load_svmlight_file(str(tmp_path / "rcv1.txt"), zero_based=False)


def test_crlf_line_endings(tmp_path) -> None:
    X, labels = parse_libsvm(_write(tmp_path / "a.txt", "1 1:2\r\n-1 2:3\r\n"))
    np.testing.assert_array_equal(X.toarray(), [[2, 0], [0, 3]])
    np.testing.assert_array_equal(labels, [1, -1])


def test_round_trip_through_sklearn_dump(tmp_path) -> None:
    rng = np.random.default_rng(0)
    X = sp.random(300, 40, density=0.1, format="csr", random_state=1, dtype=np.float64)
    y = rng.choice([-1, 1], size=300)
    path = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False, comment="made by a test")
    ds = _load(path, n_features=40, test_fraction=0.25, seed=3)
    assert ds.n_classes == 2 and ds.n_features == 40 and ds.sparse
    assert ds.X_train.shape[0] + ds.X_test.shape[0] == 300 and ds.X_test.shape[0] == 75
    merged = sp.vstack([ds.X_train, ds.X_test]).toarray()
    labels = np.concatenate([ds.y_train, ds.y_test])
    # The split keeps file order inside each part: undo it with the same permutation rule.
    perm = np.random.default_rng(3).permutation(300)
    order = np.concatenate([np.sort(perm[75:]), np.sort(perm[:75])])
    np.testing.assert_array_equal(merged, X.toarray()[order].astype(np.float32))
    np.testing.assert_array_equal(labels, (y[order] > 0).astype(np.int64))
    assert ds.meta["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert ds.meta["label_map"] == {"-1": 0, "1": 1}


def test_test_path_and_inferred_features(tmp_path) -> None:
    train = _write(tmp_path / "tr.txt", "3 1:1\n7 2:1\n")
    test = _write(tmp_path / "te.txt", "9 5:1\n3 1:2\n")
    ds = _load(train, test_path=str(test))
    assert ds.n_features == 5 and ds.n_classes == 3
    np.testing.assert_array_equal(ds.y_train, [0, 1])
    np.testing.assert_array_equal(ds.y_test, [2, 0])
    assert ds.X_test.shape == (2, 5) and ds.meta["n_features_inferred"]


@pytest.mark.parametrize(
    ("raw", "expected", "k"),
    [
        ([-1, 1, 1], [0, 1, 1], 2),
        ([0, 1, 0], [0, 1, 0], 2),
        ([3, 7, 9, 3], [0, 1, 2, 0], 3),
        ([-1, 0, 1], [0, 1, 2], 3),
    ],
)
def test_map_labels(raw: list[int], expected: list[int], k: int) -> None:
    y, n_classes, _ = map_labels(np.array(raw, dtype=np.float64))
    np.testing.assert_array_equal(y, expected)
    assert n_classes == k and y.dtype == np.int64


@pytest.mark.parametrize("raw", [[1, 1, 1], [-1, -1], [0, 0, 0], [5, 5], []])
def test_map_labels_refuses_one_class(raw: list[int]) -> None:
    # all-1 is a subset of {-1, +1} and of {0, 1}: the binary shortcut must not take it
    with pytest.raises(ValueError, match="at least two classes are needed"):
        map_labels(np.array(raw, dtype=np.float64))


def test_sha256_accepted_when_it_matches(tmp_path) -> None:
    path = _write(tmp_path / "a.txt", GOOD)
    ds = _load(path, sha256=hashlib.sha256(GOOD.encode()).hexdigest())
    assert ds.n_features == 4


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n=st.integers(1, 30),
    d=st.integers(1, 25),
    density=st.floats(0.0, 1.0),
    classes=st.sampled_from([[-1, 1], [0, 1], [2, 5, 11]]),
    seed=st.integers(0, 2**16),
)
def test_matches_sklearn_loader(tmp_path, n, d, density, classes, seed) -> None:
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=seed)
    X.data = rng.normal(scale=rng.choice([1e-3, 1.0, 1e6]), size=X.nnz)
    y = rng.choice(classes, size=n)
    path = tmp_path / f"h{seed}.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    ours, labels = parse_libsvm(path, n_features=d)
    theirs, their_labels = load_svmlight_file(str(path), n_features=d, zero_based=False)
    np.testing.assert_array_equal(ours.toarray(), theirs.toarray().astype(np.float32))
    np.testing.assert_array_equal(labels, their_labels)


TOKENS = st.sampled_from(
    ["1:2", "3:0.5", "0:1", "2:nan", "4:inf", "x:1", "1:", ":1", "1:2:3", "qid:1", "7:1e-5",
     "5:-3", "abc", "1.5:2", "2:1e40", "é:1", "12:1_0"]
)  # fmt: skip


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    label=st.sampled_from(["1", "-1", "+1", "0", "2.0", "nan", "abc", "1e3"]),
    tokens=st.lists(TOKENS, max_size=4),
)
def test_fast_and_slow_paths_agree(tmp_path, label: str, tokens: list[str]) -> None:
    line = " ".join([label, *tokens])
    path = _write(tmp_path / "fuzz.txt", line + "\n")
    problem = _line_problem(line)
    if problem is None:
        read_rows(path)
    else:
        with pytest.raises(DataError) as err:
            read_rows(path)
        assert str(err.value) == f"{path} line 1: {problem}"


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=60))
def test_any_text_is_parsed_or_a_data_error(tmp_path, text: str) -> None:
    path = _write(tmp_path / "any.txt", text.encode("utf-8", "surrogatepass"))
    try:
        read_rows(path)
    except DataError as err:
        assert str(path) in str(err)


def _error(tmp_path: Path, text: str | bytes, **kw) -> str:
    path = _write(tmp_path / "rcv1.txt", text)
    with pytest.raises(DataError) as err:
        _load(path, **kw)
    msg = str(err.value)
    assert str(path) in msg
    return msg


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("1 1:1\n1 2:1\n-1 abc\n", ["line 3", "'abc' is not idx:value"]),
        ("1 1:1\n-1 0:5\n", ["line 2", "index 0 < 1", "1-based"]),
        ("1 1:1\n-1 2:nan\n", ["line 2", "not finite"]),
        ("1 1:1\n-1 2:inf\n", ["line 2", "not finite"]),
        ("1 1:1\n-1 2:1e39\n", ["line 2", "float32"]),
        ("1 1:1\n-1 2:x\n", ["line 2", "value 'x' is not a number"]),
        ("1 1:1\n-1 2:\n", ["line 2", "is not idx:value"]),
        ("1 1:1\n-1 x:1\n", ["line 2", "not a positive integer"]),
        ("1 1:1\n-1 -3:1\n", ["line 2", "not a positive integer"]),
        ("1 1:1\n-1 qid:3 1:1\n", ["line 2", "qid"]),
        ("1 1:1\nabc 1:1\n", ["line 2", "label 'abc'"]),
        ("1 1:1\nnan 1:1\n", ["line 2", "label 'nan'"]),
        ("1 1:1\n1.5 1:1\n", ["line 2", "label 1.5 is not an integer"]),
        ("1 2:1 2:3\n", ["line 1", "appears twice"]),
        ("1 1:1\n-1 2:1 3:", ["line 2", "truncated", "re-download"]),
        ("# header only\n\n", ["no data lines"]),
        ("1 1:1\n-1 1:\xff\n".encode("latin-1"), ["line 2", "UTF-8"]),
        ("5 1:1\n5 2:1\n", ["at least two classes"]),
        ("1 1:1\n1 2:1\n", ["every row has label 1", "at least two classes"]),
        # a bad number pending conversion is named before a later line's structural problem
        ("1 1:1\n0 2:abc\n1 3\n0 4:x\n", ["line 2", "value 'abc' is not a number"]),
    ],
)
def test_errors_name_file_and_line(tmp_path, text, needles: list[str]) -> None:
    msg = _error(tmp_path, text)
    for needle in needles:
        assert needle in msg


def test_truncation_hint_only_on_unterminated_last_line(tmp_path) -> None:
    assert "truncated" not in _error(tmp_path, "1 1:1\n-1 2:1 3:\n")
    assert "truncated" not in _error(tmp_path, "1 1:1\n-1 x\n1 2:1")


def test_index_above_n_features(tmp_path) -> None:
    msg = _error(tmp_path, "1 1:1\n-1 9:1\n", n_features=5)
    assert "line 2" in msg and "9 > n_features=5" in msg and "datasets.svm.n_features" in msg


def test_error_in_test_file_names_it(tmp_path) -> None:
    train = _write(tmp_path / "tr.txt", "1 1:1\n-1 2:1\n")
    test = _write(tmp_path / "te.txt", "1 1:1\n\n-1 zz\n")
    with pytest.raises(DataError, match=r"te\.txt line 3: 'zz' is not idx:value"):
        _load(train, test_path=str(test))


def test_missing_and_empty_files(tmp_path) -> None:
    with pytest.raises(DataError, match=r"nope\.txt: file not found \(config key datasets\.svm"):
        _load(tmp_path / "nope.txt")
    empty = _write(tmp_path / "empty.txt", b"")
    with pytest.raises(DataError, match=r"empty\.txt: empty file"):
        _load(empty)
    train = _write(tmp_path / "tr.txt", GOOD)
    with pytest.raises(DataError, match=r"gone\.txt: file not found.*test_path"):
        _load(train, test_path=str(tmp_path / "gone.txt"))


def test_checksum_mismatch_shows_both(tmp_path) -> None:
    actual = hashlib.sha256(GOOD.encode()).hexdigest()
    msg = _error(tmp_path, GOOD, sha256="0" * 64)
    assert "SHA-256 mismatch" in msg and "0" * 64 in msg and actual in msg


def test_missing_path_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="path"):
        DATASETS.get("libsvm")(DatasetSpec(name="svm", source="libsvm")).load()


# --------------------------------------------------------------------------- psml prepare


def _prepare(tmp_path: Path, capsys, **spec) -> tuple[int, str, str, Path]:
    """``psml prepare`` in-process on a libsvm spec; returns (exit code, stdout, stderr, out)."""
    from psml_core.cli import main

    out = tmp_path / "prepared" / "svm"
    capsys.readouterr()
    rc = main(
        ["prepare", "--spec", json.dumps({"name": "svm", "source": "libsvm", **spec})]
        + ["--out", str(out)]
    )
    stdout, stderr = capsys.readouterr()
    return rc, stdout, stderr, out


def _lines(n: int) -> bytes:
    return b"".join(b"%d 1:%d 3:0.5\n" % (1 if i % 2 else -1, i + 1) for i in range(n))


@pytest.mark.parametrize(
    ("content", "spec", "needles"),
    [
        # truncated download: the last line stops mid-token and has no newline
        (_lines(6) + b"-1 2:1 3:", {}, ["line 7", "truncated", "re-download"]),
        # a corrupted byte in the middle of the file
        (_lines(3) + b"1 1:\xff\n" + _lines(3), {}, ["line 4", "is not UTF-8 text"]),
        (_lines(3) + b"1 1:2 \x00:1\n" + _lines(3), {}, ["line 4", "not a positive integer"]),
        # a label out of range: not a finite number, or not a class
        (_lines(4) + b"1e400 2:1\n", {}, ["line 5", "label '1e400' is not a finite number"]),
        (_lines(4) + b"0.5 2:1\n", {}, ["line 5", "label 0.5 is not an integer"]),
        # an index beyond the declared feature count
        (_lines(2) + b"1 9:1\n", {"n_features": 4}, ["line 3", "9 > n_features=4"]),
        (b"", {}, ["empty file (0 bytes)"]),
        (_lines(4), {"sha256": "0" * 64}, ["SHA-256 mismatch", "expected " + "0" * 64]),
        # a cut that still parses ("0." is a number) is caught by the checksum
        (
            _lines(4)[:-3],
            {"sha256": hashlib.sha256(_lines(4)).hexdigest()},
            ["SHA-256 mismatch", "re-download it"],
        ),
    ],
)
def test_prepare_names_file_and_line_and_writes_nothing(
    tmp_path, capsys, content: bytes, spec: dict, needles: list[str]
) -> None:
    """`psml prepare` on a bad LIBSVM file: exit 3, one line naming file (and line), no output."""
    path = _write(tmp_path / "bad.svm", content)
    rc, out, err, prepared = _prepare(tmp_path, capsys, path=str(path), **spec)
    assert rc == 3, err
    assert out == ""
    assert err.count("\n") == 1 and err.startswith(f"psml prepare: error: {path}"), err
    for needle in needles:
        assert needle in err, (needle, err)
    assert not prepared.parent.exists()  # no directory, no partial data.npz


def test_prepare_bad_test_file_is_named(tmp_path, capsys) -> None:
    train = _write(tmp_path / "tr.svm", _lines(4))
    test = _write(tmp_path / "te.svm", _lines(2) + b"-1 1:1 1:2\n")
    rc, _out, err, prepared = _prepare(tmp_path, capsys, path=str(train), test_path=str(test))
    assert rc == 3 and f"{test} line 3: feature index 1 appears twice" in err
    assert not prepared.parent.exists()


def test_prepare_good_file_writes_data_and_manifest(tmp_path, capsys) -> None:
    """The control: the same command on a good file succeeds (so the failures above are real)."""
    path = _write(tmp_path / "good.svm", _lines(8))
    sha = hashlib.sha256(_lines(8)).hexdigest()
    rc, out, err, prepared = _prepare(tmp_path, capsys, path=str(path), sha256=sha)
    assert rc == 0 and err == "" and "prepared svm" in out
    assert sorted(p.name for p in prepared.iterdir()) == ["data.npz", "manifest.json"]


def test_prepare_bad_file_from_the_command_line_has_no_traceback(tmp_path) -> None:
    path = _write(tmp_path / "cut.svm", _lines(3) + b"1 2:")
    spec = json.dumps({"name": "svm", "source": "libsvm", "path": str(path)})
    proc = subprocess.run(
        [sys.executable, "-m", "psml_core", "prepare", "--spec", spec, "--out", "out"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"psml prepare: error: {path} line 4: '2:' is not idx:value")
    assert "truncated" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.svm"]
