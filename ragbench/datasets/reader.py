"""Reading a dataset's files below its root: every byte hashed (for the fingerprint), every error naming
the dataset, the file and the fix; size limits applied before a document is read; record fields checked."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragbench.datasets import filetext
from ragbench.datasets.limits import Limits, TooLarge, too_large
from ragbench.datasets.sources import SOURCES
from ragbench.datasets.strictjson import BadJSON, strict_json
from ragbench.errors import DatasetError


def download_hint(name: str) -> str:
    """", or run `python -m ragbench.datasets download <name>`" for datasets that can be downloaded."""
    return f", or run `python -m ragbench.datasets download {name}`" if name in SOURCES else ""


@dataclass
class FileReader:
    """Reads dataset files below ``root``, hashing every byte read and naming the file in every error."""

    dataset: str
    root: Path
    limits: Limits = field(default_factory=Limits)
    own: bool = False  # the user's own files (dataset=custom): fixes say how to correct them, not re-download
    _digests: list[tuple[str, str]] = field(default_factory=list)

    def _fix(self, official: str, own: str) -> str:
        return own if self.own else official

    def referenced(self, rel: str, *, file: str, record: str, field: str) -> str:
        """``rel`` built from a data row (a syllabus name, a filing name), refused unless it stays below
        ``root``: no absolute path, no ``..`` out of the dataset folder (checked on the text, so folders the
        user symlinked into the dataset still work)."""
        norm = posixpath.normpath(rel.replace("\\", "/"))
        if "\0" in rel or norm.startswith("/") or norm == ".." or norm.startswith("../") or Path(rel).is_absolute():
            raise DatasetError(
                f"the record names a file outside dataset.path: {rel!r}", dataset=self.dataset, file=file,
                record=record, field=field,
                fix=f"a data row may only name files below {self.root}; correct the '{field}' value",
            )
        return norm

    def path(self, rel: str) -> Path:
        """Absolute path of ``rel``; a missing file is a DatasetError that says where it should be."""
        p = self.root / rel
        if not p.exists():
            raise DatasetError(
                "file not found",
                dataset=self.dataset,
                file=str(p),
                fix=f"place the file at {p} (below dataset.path={self.root})" + download_hint(self.dataset),
            )
        return p

    def read_bytes(self, rel: str) -> bytes:
        p = self.path(rel)
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise DatasetError(
                f"cannot read file ({exc.strerror})", dataset=self.dataset, file=str(p),
                fix="check the file's permissions",
            ) from exc
        self._digests.append((rel, hashlib.sha256(data).hexdigest()))
        return data

    def read_document(self, rel: str) -> bytes:
        """Bytes of a document file, refused before reading when over ``max_document_mb`` (text files) or
        ``max_decompressed_mb`` (.docx/.pdf: the file is read whole before it is unpacked)."""
        p = self.path(rel)
        size = p.stat().st_size
        try:
            if p.suffix.lower() in (".docx", ".pdf", ".zip"):
                self.limits.check_expansion(f"the {p.suffix.lower()} file", size)
            else:
                self.limits.check_document("the document file", size)
        except TooLarge as exc:
            raise too_large(exc, dataset=self.dataset, file=str(p)) from None
        return self.read_bytes(rel)

    def docx_text(self, rel: str) -> str:
        """Text of a .docx within the limits (UnreadableDocument for a damaged file, for the adapter to count)."""
        data = self.read_document(rel)
        try:
            return filetext.docx_text(data, self.limits)
        except TooLarge as exc:
            raise too_large(exc, dataset=self.dataset, file=str(self.root / rel)) from None

    def pdf_pages(self, rel: str) -> list[str]:
        """Page texts of a .pdf within the limits (UnreadableDocument for a damaged file)."""
        data = self.read_document(rel)
        try:
            return filetext.pdf_pages(data, self.limits)
        except TooLarge as exc:
            raise too_large(exc, dataset=self.dataset, file=str(self.root / rel)) from None

    def read_text(self, rel: str) -> str:
        data = self.read_bytes(rel)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            raise DatasetError(
                f"invalid UTF-8 at byte {exc.start} (line {line})", dataset=self.dataset,
                file=str(self.root / rel), fix=self._fix("re-download the file or re-save it as UTF-8",
                                                         "re-save the file as UTF-8"),
            ) from exc

    def read_json(self, rel: str, *, top: type) -> Any:
        """Parses JSON and checks the top-level type (``list`` or ``dict``)."""
        text = self.read_text(rel)
        try:
            obj = strict_json(text)
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", dataset=self.dataset,
                file=str(self.root / rel), fix=self._fix("re-download the file; it may be truncated or edited",
                                                         "correct the JSON at that line and column"),
            ) from exc
        except BadJSON as exc:
            raise DatasetError(
                f"invalid JSON: {exc}", dataset=self.dataset, file=str(self.root / rel),
                fix=self._fix("re-download the file, or correct that value (a number, a quoted string or null)",
                              "correct that value (a number, a quoted string or null)"),
            ) from None
        if not isinstance(obj, top):
            raise DatasetError(
                f"top level is a JSON {type(obj).__name__}, expected a JSON "
                f"{'array' if top is list else 'object'}",
                dataset=self.dataset, file=str(self.root / rel),
                fix=self._fix("point dataset.path at the official file of this dataset",
                              f"write the file as a JSON {'array' if top is list else 'object'}"),
            )
        return obj

    def read_jsonl(self, rel: str) -> list[dict[str, Any]]:
        """One JSON object per non-empty line."""
        rows: list[dict[str, Any]] = []
        for n, line in enumerate(self.read_text(rel).splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = strict_json(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(
                    f"invalid JSON on line {n}: {exc.msg}", dataset=self.dataset,
                    file=str(self.root / rel), record=f"line {n}",
                    fix=self._fix("re-download the file", f"correct line {n}: one JSON object per line"),
                ) from exc
            except BadJSON as exc:
                raise DatasetError(
                    f"invalid JSON on line {n}: {exc}", dataset=self.dataset, file=str(self.root / rel),
                    record=f"line {n}", fix="correct that value (a number, a quoted string or null)",
                ) from None
            if not isinstance(obj, dict):
                raise DatasetError(
                    f"line {n} is a JSON {type(obj).__name__}, expected an object", dataset=self.dataset,
                    file=str(self.root / rel), record=f"line {n}",
                    fix=self._fix("re-download the file", "write one JSON object ({...}) per line"),
                )
            rows.append(obj)
        return rows

    def read_csv(self, rel: str) -> list[dict[str, str]]:
        """The rows of a CSV file with a header; strict: a truncated file (open quote at the end) or stray
        quotes are errors, not data."""
        text = self.read_text(rel)
        try:
            return list(csv.DictReader(io.StringIO(text, newline=""), strict=True))
        except csv.Error as exc:
            raise DatasetError(
                f"invalid CSV: {exc}", dataset=self.dataset, file=str(self.root / rel),
                fix="re-download the file; it may be truncated or edited",
            ) from exc

    def digests(self) -> list[tuple[str, str]]:
        """(relative path, sha256) of every file read, in read order."""
        return list(self._digests)


def require(
    record: Mapping[str, Any], key: str, *, dataset: str, file: str, where: str, types: tuple[type, ...],
    own: bool = False,
) -> Any:
    """``record[key]`` checked for presence and type; otherwise a DatasetError naming all of it (``own``: the
    user's own file, so the fix is to correct the record, not to re-fetch an official file)."""
    official = "point dataset.path at the official, unmodified file"
    names = " or ".join(t.__name__ for t in types)
    if not isinstance(record, Mapping):
        raise DatasetError(
            f"expected a JSON object, found {type(record).__name__}", dataset=dataset, file=file,
            record=where, fix="write that record as a JSON object {...}" if own else official,
        )
    if key not in record:
        raise DatasetError(
            "required field is missing", dataset=dataset, file=file, record=where, field=key,
            fix=f"add \"{key}\" ({names}) to that record" if own else official,
        )
    value = record[key]
    if not isinstance(value, types):
        raise DatasetError(
            f"expected {names}, found {type(value).__name__}", dataset=dataset, file=file, record=where,
            field=key, fix=f"write \"{key}\" as a {names}" if own else official,
        )
    return value

