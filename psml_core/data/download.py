"""Fetch a data set's file from ``datasets.<name>.url`` once, checked by its SHA-256.

A data set entry names its file by ``path`` (your copy), by ``url`` (downloaded on first use),
or both (downloaded to ``path`` when that file does not exist yet). A download needs the
expected ``sha256``: a file that does not match is deleted, never used. Without ``path`` the file
goes to ``data/downloads/<first 16 hex digits of sha256>-<file name>``, relative to the working
directory (the workflow's), so that every tier and data set entry shares one copy.

The transfer streams to a temporary file beside ``dest`` (:func:`psml_core.atomic.atomic_path`)
that is renamed into place only after its checksum matched, so an interrupted or bad download
leaves nothing behind. Tests use ``file://`` URLs;
nothing in the test suite reaches the network.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path, PurePosixPath

from psml_core.atomic import atomic_path
from psml_core.errors import DataError
from psml_core.heartbeat import interval_from_env, quiet_from_env

__all__ = ["DOWNLOAD_DIR", "fetch", "fetch_files", "listing_sha256", "local_file"]

DOWNLOAD_DIR = Path("data") / "downloads"
"""Where files named only by their URL are kept (relative to the working directory)."""

_CHUNK = 1 << 20
_TIMEOUT_S = 60.0


def _file_name(url: str) -> str:
    """The last path segment of ``url`` (``download`` when it has none)."""
    name = PurePosixPath(urllib.parse.unquote(urllib.parse.urlsplit(url).path)).name
    return name or "download"


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


class _Meter:
    """Progress lines of one download on stderr.

    Its size first, then each tenth (or, the size unknown, every ``PSML_PROGRESS_INTERVAL``
    seconds), then the total and the rate.
    """

    def __init__(self, url: str, dest: Path, length: str | None) -> None:
        self.total = int(length) if length and length.isdigit() else None
        self.got, self.t0, self.quiet = 0, time.monotonic(), quiet_from_env()
        self.interval, self.last, self.tenths = interval_from_env(), self.t0, 0
        size = _mb(self.total) if self.total is not None else "size unknown"
        self._say(f"downloading {url} -> {dest} ({size})")

    def _say(self, text: str) -> None:
        if not self.quiet:
            print(f"psml: {text}", file=sys.stderr, flush=True)

    def add(self, n: int) -> None:
        self.got += n
        now = time.monotonic()
        if self.total:
            tenths = min(10, self.got * 10 // self.total)
            if tenths > self.tenths and tenths < 10:
                self.tenths = tenths
                self._say(f"  {10 * tenths}% ({_mb(self.got)} of {_mb(self.total)})")
        elif self.interval > 0 and now - self.last >= self.interval:
            self.last = now
            self._say(f"  {_mb(self.got)} so far ({now - self.t0:.0f} s)")

    def done(self) -> None:
        s = max(time.monotonic() - self.t0, 1e-9)
        self._say(f"  downloaded {_mb(self.got)} in {s:.1f} s ({_mb(self.got / s)}/s)")


def fetch(url: str, dest: Path, sha256: str, where: str, prefix: str = "") -> None:
    """Download ``url`` to ``dest``, atomically, keeping it only if its SHA-256 matches.

    Args:
        url: An http(s), ftp or file URL.
        dest: The file to create (its directory is created).
        sha256: The expected lowercase hex digest.
        where: The data set's config key (``datasets.<name>``), for messages.
        prefix: ``""`` for the main file (``url``, ``sha256``, ``path``), ``"test_"`` for
            the test file.

    Raises:
        DataError: The transfer failed, or the file's SHA-256 differs; nothing is left at
            ``dest``.
    """
    url_key, sha_key, path_key = (f"{where}.{prefix}{f}" for f in ("url", "sha256", "path"))
    made = [d for d in (dest.parent, *dest.parent.parents) if not d.exists()]
    digest = hashlib.sha256()
    try:
        with atomic_path(dest) as tmp:
            try:
                with (
                    urllib.request.urlopen(url, timeout=_TIMEOUT_S) as resp,
                    open(tmp, "wb") as out,
                ):
                    meter = _Meter(url, dest, resp.headers.get("Content-Length"))
                    while chunk := resp.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        meter.add(len(chunk))
                    meter.done()
            except (urllib.error.URLError, OSError, ValueError) as exc:
                reason = getattr(exc, "reason", None) or exc
                raise DataError(
                    f"{url}: download failed ({reason}) (config key {url_key}); check the address "
                    f"and the network, or download the file yourself and give its path as "
                    f"{path_key}"
                ) from None
            actual = digest.hexdigest()
            if actual != sha256.lower():
                raise DataError(
                    f"{url}: the downloaded file's SHA-256 is {actual}, not {sha256.lower()} "
                    f"({sha_key}); it was deleted. The server has another version or the "
                    f"transfer was damaged: retry, or update {sha_key} if the new version is "
                    "intended"
                )
    except DataError:
        for d in made:  # the directories made for this download, innermost first
            try:
                d.rmdir()
            except OSError:
                break
        raise


def local_file(
    path: str | None, url: str | None, sha256: str | None, where: str, prefix: str = ""
) -> str | None:
    """The local file of a data set entry, downloading it first when only its URL is known.

    Args:
        path: ``path`` (or ``test_path``), or None.
        url: ``url`` (or ``test_url``), or None.
        sha256: The expected SHA-256 (required with a URL; the schema enforces it too).
        where: The data set's config key, ``datasets.<name>``, for messages.
        prefix: ``""`` for the main file, ``"test_"`` for the test file.

    Returns:
        ``path`` unchanged when there is no URL or the file already exists; else the path the
        file was downloaded to; None when neither is given.

    Raises:
        DataError: See :func:`fetch`.
    """
    if not url:
        return path
    if not sha256:
        raise DataError(
            f"{where}.{prefix}url needs {where}.{prefix}sha256: a download is kept only if its "
            "SHA-256 matches"
        )
    dest = Path(path) if path else DOWNLOAD_DIR / f"{sha256.lower()[:16]}-{_file_name(url)}"
    if not dest.exists():
        fetch(url, dest, sha256, where, prefix)
    return str(dest)


def listing_sha256(files: dict[str, str], names: tuple[str, ...]) -> str:
    """SHA-256 of the ``sha256sum`` listing of ``names`` (``<sha>  <name>`` lines, in order).

    What ``sha256sum NAME... | sha256sum`` prints for the files: one checksum for a set of
    files (a data set shipped as several files, e.g. MNIST's four).

    Args:
        files: File name -> its SHA-256, for every name in ``names``.
        names: The files in listing order.
    """
    listing = "".join(f"{files[name]}  {name}\n" for name in names)
    return hashlib.sha256(listing.encode("ascii")).hexdigest()


def _stream(url: str, dest: Path) -> str:
    """Copy ``url`` to the file ``dest``; return the SHA-256 of what was written."""
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as resp, open(dest, "wb") as out:
        while chunk := resp.read(_CHUNK):
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def fetch_files(base_url: str, names: tuple[str, ...], dest: Path, sha256: str, where: str) -> None:
    """Download the files ``names`` under ``base_url`` into the directory ``dest``, atomically.

    The files go to a temporary directory beside ``dest``, which is renamed into place only
    when the :func:`listing_sha256` of the files equals ``sha256``; otherwise nothing is left.

    Args:
        base_url: The URL of the directory that holds the files (a trailing ``/`` is added).
        names: The file names, in listing order.
        dest: The directory to create.
        sha256: The expected listing checksum (lowercase hex).
        where: The data set's config key (``datasets.<name>``), for messages.

    Raises:
        DataError: A transfer failed, or the listing checksum differs.
    """
    base = base_url if base_url.endswith("/") else base_url + "/"
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    try:
        shas = {}
        for name in names:
            url = urllib.parse.urljoin(base, name)
            print(f"psml: downloading {url} -> {dest / name}", file=sys.stderr)
            try:
                shas[name] = _stream(url, tmp / name)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                reason = getattr(exc, "reason", None) or exc
                raise DataError(
                    f"{url}: download failed ({reason}) (config key {where}.url); check the "
                    f"address and the network, or download the files yourself and give their "
                    f"directory as {where}.path"
                ) from None
        actual = listing_sha256(shas, names)
        if actual != sha256.lower():
            raise DataError(
                f"{base}: the downloaded files' listing SHA-256 is {actual}, not "
                f"{sha256.lower()} ({where}.sha256); they were deleted. The server has another "
                f"version or a transfer was damaged: retry, or update {where}.sha256 if the new "
                "version is intended"
            )
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
