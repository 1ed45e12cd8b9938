"""Fetching official dataset files into the cache: verified, atomic, retried, with a manual fallback."""

from __future__ import annotations

import fnmatch
import hashlib
import http.client
import json
import logging
import lzma
import os
import shutil
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import IO

from ragbench.cache.root import DOWNLOADS, ENV_VAR, download_root
from ragbench.datasets.sources import SOURCES, DatasetSource, RemoteFile, Unpack
from ragbench.errors import DatasetError, DownloadError

log = logging.getLogger(__name__)

CACHE_ENV = ENV_VAR
MANIFEST = ".ragbench-download.json"
TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
CHUNK = 1 << 16
# an archive whose checksum is not pinned unpacks at most this much: the official ones (Qasper, SyllabusQA)
# unpack their kept members to some tens of MB, and a zip bomb must not fill the disk
UNVERIFIED_MAX_BYTES = 1_000_000_000


def cache_root() -> Path:
    """``$RAGBENCH_CACHE`` (the root of every cache), else the platform's user cache folder for ragbench."""
    return download_root()


def dataset_dir(name: str) -> Path:
    """Where the official files of ``name`` are kept, in their official layout."""
    return cache_root() / DOWNLOADS / name


class _Transient(Exception):
    """A failure worth retrying (connection cut, timeout, 5xx, 429)."""


class _Permanent(Exception):
    """A failure retrying the same URL will not fix (404, checksum mismatch)."""


def _fetch_once(url: str, tmp: Path, *, timeout: float) -> tuple[str, int]:
    """Streams ``url`` into ``tmp``; (sha256, size). A body shorter than Content-Length is transient."""
    request = urllib.request.Request(url, headers={"User-Agent": "ragbench-datasets"})
    h = hashlib.sha256()
    size = 0
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp, tmp.open("wb") as out:
            expected = resp.headers.get("Content-Length")
            while block := resp.read(CHUNK):
                out.write(block)
                h.update(block)
                size += len(block)
            out.flush()
            os.fsync(out.fileno())
    except urllib.error.HTTPError as exc:
        kind = _Transient if exc.code in TRANSIENT_STATUS else _Permanent
        raise kind(f"HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError) as exc:
        raise _Transient(f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}") from exc
    if expected is not None and size != int(expected):
        raise _Transient(f"connection closed after {size} of {expected} bytes")
    return h.hexdigest(), size


def _manual_fix(source: DatasetSource, file: RemoteFile, root: Path) -> str:
    where = f"save it as {root / file.dest}"
    if file.unpack:
        where = f"unpack {', '.join(file.unpack.include)} from it into {root} (official layout)"
    return (f"download {file.urls[0]} by hand and {where}; or set dataset.path to a folder that holds the "
            f"official {source.name} files (see {source.homepage})")


def fetch(source: DatasetSource, file: RemoteFile, root: Path, *, retries: int = 3, backoff: float = 1.0,
          timeout: float = 60.0) -> dict[str, object]:
    """Downloads one file (mirrors in order, ``retries`` attempts each for transient errors), verifies
    size and SHA-256, moves it into place atomically. Returns its manifest entry."""
    dest = root / file.dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    for url in file.urls:
        for attempt in range(1, retries + 1):
            fd, name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
            os.close(fd)
            tmp = Path(name)
            try:
                digest, size = _fetch_once(url, tmp, timeout=timeout)
                if file.size is not None and size != file.size:
                    raise _Permanent(f"size {size} bytes, expected {file.size}")
                if file.sha256 is not None and digest != file.sha256:
                    raise _Permanent(f"SHA-256 {digest}, expected {file.sha256}")
                if file.md5 is not None and (got := file_md5(tmp)) != file.md5:
                    raise _Permanent(f"MD5 {got}, expected the published {file.md5}")
                os.replace(tmp, dest)
            except _Transient as exc:
                failures.append(f"{url}: {exc} (attempt {attempt}/{retries})")
                log.warning("download of %s failed: %s (attempt %d/%d)", url, exc, attempt, retries)
                if attempt < retries:
                    time.sleep(backoff * 2 ** (attempt - 1))
                continue
            except _Permanent as exc:
                failures.append(f"{url}: {exc}")
                log.warning("download of %s failed: %s", url, exc)
                break
            finally:
                tmp.unlink(missing_ok=True)
            if not file.pinned:
                log.warning("%s: no pinned SHA-256 for %s; downloaded file has SHA-256 %s (recorded in %s; pin "
                            "it in ragbench/datasets/sources.py once checked)", source.name, file.dest, digest,
                            root / MANIFEST)
            return {"url": url, "sha256": digest, "size": size, "verified": file.pinned}
    raise DownloadError(
        f"dataset '{source.name}': could not download {file.dest}:\n  " + "\n  ".join(failures)
        + f"\n  fix: {_manual_fix(source, file, root)}"
    )


def _file_hash(path: Path, algorithm: str) -> str:
    """The hex digest of a file by ``algorithm`` (a hashlib name), streamed."""
    h = hashlib.new(algorithm, usedforsecurity=False)
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def file_md5(path: Path) -> str:
    """MD5 of a file, streamed (the checksum BEIR publishes for its zips)."""
    return _file_hash(path, "md5")


def _unpack_or_refuse(source: DatasetSource, file: RemoteFile, archive: Path, origin: str,
                      root: Path) -> list[str]:
    """``unpack`` of a dataset's archive (``origin``: its URL or the --zip path), bounded when its checksum
    is not pinned; an ArchiveError is the DownloadError naming the dataset, the archive and the fix."""
    assert file.unpack is not None  # the callers unpack archives only
    try:
        return unpack(archive, file.unpack, root, expect=file.expect, max_bytes=unpack_bound(file),
                      members=dict(file.members))
    except ArchiveError as exc:
        raise DownloadError(f"dataset '{source.name}': {origin} {exc}; nothing was installed\n"
                            f"  fix: {_manual_fix(source, file, root)}") from None


def install_archive(source: DatasetSource, archive: Path, root: Path) -> Path:
    """A copy of the official archive the user fetched by hand (``download NAME --zip FILE``): checked
    against the published checksum, then unpacked into ``root`` as a download would be."""
    file = next((f for f in source.files if f.unpack), None)
    if file is None:
        raise DownloadError(f"dataset '{source.name}' has no archive to install\n  fix: run the download without --zip")
    if not archive.is_file():
        raise DownloadError(f"dataset '{source.name}': no file at {archive}\n  fix: give --zip the path of {file.urls[0]}")
    digest = _file_hash(archive, "sha256")
    if file.sha256 is not None and digest != file.sha256:
        raise DownloadError(f"dataset '{source.name}': {archive} has SHA-256 {digest}, expected {file.sha256}\n"
                            f"  fix: download {file.urls[0]} again (the copy is damaged or another release)")
    if file.md5 is not None and (got := file_md5(archive)) != file.md5:
        raise DownloadError(f"dataset '{source.name}': {archive} has MD5 {got}, expected the published {file.md5}\n"
                            f"  fix: download {file.urls[0]} again (the copy is damaged or another release)")
    root.mkdir(parents=True, exist_ok=True)
    written = _unpack_or_refuse(source, file, archive, str(archive), root)
    manifest = root / MANIFEST
    entries = json.loads(manifest.read_text()) if manifest.is_file() else {}
    entries[file.dest] = {"url": str(archive), "sha256": digest, "size": archive.stat().st_size,
                          "verified": file.pinned, "unpacked": written}
    _write_atomic(manifest, json.dumps(entries, indent=2, sort_keys=True).encode())
    return root


def _destination(name: str, spec: Unpack) -> str | None:
    """Where an archive member goes below the root, or None when it is not kept (not wanted, a folder,
    or a path that climbs out: absolute or with ``..``)."""
    parts = PurePosixPath(name).parts[spec.strip:]
    if not parts or name.endswith("/") or ".." in parts or PurePosixPath(name).is_absolute():
        return None
    rel = "/".join(parts)
    if any(fnmatch.fnmatch(rel, pattern) for pattern in spec.include):
        return parts[-1] if spec.flatten else rel
    return None


def _write_atomic(dest: Path, data: bytes) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(name, dest)
    finally:
        Path(name).unlink(missing_ok=True)


class ArchiveError(Exception):
    """An archive that cannot be installed as asked: unreadable, over its size bound, or without a member
    that must be in it. Nothing of it is left below the root; the caller names the dataset and the fix."""


# What reading a damaged .zip/.tar(.gz) raises: a bad header or directory, a cut or corrupt deflate/gzip/
# bzip2/xz stream (gzip.BadGzipFile and bz2's "Invalid data stream" are OSErrors), an encrypted member.
_UNREADABLE = (zipfile.BadZipFile, tarfile.TarError, zlib.error, lzma.LZMAError, EOFError, OSError,
               RuntimeError, NotImplementedError, ValueError)


class _WriteFailed(Exception):
    """Writing below the root failed (a full disk): re-raised as the OSError it carries, never blamed on
    the archive."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


def _unreadable(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc) or 'truncated'}"


class _Budget:
    """Bytes an archive may still unpack (``limit`` None: no bound)."""

    def __init__(self, limit: int | None) -> None:
        self.limit, self.used = limit, 0

    def take(self, size: int, what: str) -> None:
        self.check(size, what)
        self.used += size

    def check(self, size: int, what: str) -> None:
        """ArchiveError when ``size`` more bytes would pass the bound."""
        if self.limit is not None and self.used + size > self.limit:
            raise ArchiveError(f"unpacks to more than {self.limit / 1e6:,.0f} MB ({what}), the bound for an "
                               "archive whose checksum is not pinned")


def _copy(src: IO[bytes], dest: Path, budget: _Budget, member: str) -> None:
    """Streams one member into ``dest`` block by block, counting its bytes against ``budget``."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        out = dest.open("wb")
    except OSError as exc:
        raise _WriteFailed(exc) from exc
    with out:
        while True:
            try:
                block = src.read(CHUNK)
            except _UNREADABLE as exc:
                raise ArchiveError(f"member {member} cannot be read ({_unreadable(exc)})") from None
            if not block:
                return
            budget.take(len(block), f"at member {member}")
            try:
                out.write(block)
            except OSError as exc:
                raise _WriteFailed(exc) from exc


def _extract(archive: Path, spec: Unpack, stage: Path, budget: _Budget) -> list[str]:
    """The wanted members streamed into ``stage``; their paths below it, in archive order."""
    written: dict[str, None] = {}
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                wanted = [(info, rel) for info in zf.infolist() if (rel := _destination(info.filename, spec))]
                # zipfile never returns more than a member declares (it fails the CRC), so the declared sizes
                # bound the real ones: an archive over the bound is refused before anything is written
                budget.check(sum(info.file_size for info, _ in wanted), "the sizes its members declare")
                for info, rel in wanted:
                    with zf.open(info) as src:
                        _copy(src, stage / rel, budget, info.filename)
                    written[rel] = None
        else:
            with tarfile.open(archive, "r|*") as tf:  # a stream: members are read in order, none is held
                for member in tf:
                    rel = _destination(member.name, spec) if member.isfile() else None
                    handle = tf.extractfile(member) if rel is not None else None
                    if rel is not None and handle is not None:
                        budget.check(member.size, f"at member {member.name}")  # by its header, before writing
                        _copy(handle, stage / rel, budget, member.name)
                        written[rel] = None
    except _UNREADABLE as exc:
        raise ArchiveError(f"is not a readable .zip or .tar(.gz) archive ({_unreadable(exc)})") from None
    return list(written)


def unpack(archive: Path, spec: Unpack, root: Path, *, expect: tuple[str, ...] = (),
           max_bytes: int | None = None, members: Mapping[str, str] | None = None) -> list[str]:
    """Extracts the wanted members of a .zip or .tar(.gz) into ``root``: streamed block by block into a
    staging folder below it, at most ``max_bytes`` in all (None: no bound), then moved into place once
    every member was read, every ``expect`` path is among them and, when ``members`` pins them (path ->
    SHA-256), the members are exactly the pinned ones, each with its digest. On any failure
    (``ArchiveError``, a full disk) the staging folder is removed: nothing half-written is left and no
    earlier file is touched."""
    root.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=root, prefix=".unpack-"))
    try:
        written = _extract(archive, spec, stage, _Budget(max_bytes))
        missing = [rel for rel in expect if rel not in written]
        if missing:
            raise ArchiveError(f"holds no {', '.join(missing)}")
        if members:
            _check_members(stage, written, members)
        for rel in written:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage / rel, root / rel)
        return written
    except _WriteFailed as exc:
        raise exc.error from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _check_members(stage: Path, written: list[str], members: Mapping[str, str]) -> None:
    """ArchiveError unless the unpacked members are exactly the pinned ones, each with its SHA-256."""
    absent = sorted(set(members) - set(written))
    if absent:
        raise ArchiveError(f"lacks {len(absent)} pinned member(s), e.g. {absent[0]} (another release?)")
    extra = sorted(set(written) - set(members))
    if extra:
        raise ArchiveError(f"holds {len(extra)} member(s) that are not pinned, e.g. {extra[0]} (another release?)")
    for rel in written:
        digest = _file_hash(stage / rel, "sha256")
        if digest != members[rel]:
            raise ArchiveError(f"member {rel} has SHA-256 {digest}, expected the pinned {members[rel]}")


def unpack_bound(file: RemoteFile) -> int | None:
    """What an archive may unpack to: no bound when its checksum is pinned (the official bytes), else
    ``UNVERIFIED_MAX_BYTES``."""
    return None if file.sha256 is not None or file.md5 is not None else UNVERIFIED_MAX_BYTES


def is_present(source: DatasetSource, root: Path) -> bool:
    """True when every official file (or its unpacked members) is already below ``root``."""
    return all((root / rel).is_file() for f in source.files for rel in f.outputs())


def download(source: DatasetSource, root: Path, *, force: bool = False, retries: int = 3, backoff: float = 1.0,
             timeout: float = 60.0, files: tuple[RemoteFile, ...] | None = None) -> Path:
    """Fetches the missing files of ``source`` (all with ``force``) into ``root`` under a file lock."""
    from filelock import FileLock

    root.mkdir(parents=True, exist_ok=True)
    wanted = source.files if files is None else files
    with FileLock(str(root / ".download.lock")):
        manifest_path = root / MANIFEST
        manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
        for file in wanted:
            if not force and all((root / rel).is_file() for rel in file.outputs()):
                continue
            entry = fetch(source, file, root, retries=retries, backoff=backoff, timeout=timeout)
            if file.unpack:
                archive = root / file.dest
                try:
                    entry["unpacked"] = _unpack_or_refuse(source, file, archive, str(entry["url"]), root)
                finally:
                    archive.unlink(missing_ok=True)
            manifest[file.dest] = entry
            _write_atomic(manifest_path, json.dumps(manifest, indent=2, sort_keys=True).encode())
    return root


def ensure_downloaded(name: str) -> Path:
    """Folder of the official files of ``name``, downloading what is missing (variant ``full``)."""
    source = SOURCES.get(name)
    if source is None:
        raise DatasetError(
            "this dataset has no official download", dataset=name,
            fix=f"set dataset.path to the folder holding its files (downloadable: {sorted(SOURCES)})",
        )
    root = dataset_dir(name)
    if is_present(source, root):
        return root
    log.info("downloading %s into %s", name, root)
    return download(source, root)
