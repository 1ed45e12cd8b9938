"""Shared plumbing of dataset adapters: locating files, reading them with named errors, fingerprinting."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ragbench.datasets import filetext
from ragbench.datasets.checks import check_documents, unique_ids, usable_queries
from ragbench.datasets.limits import (
    DEFAULT_MAX_DECOMPRESSED_MB,
    DEFAULT_MAX_DOCUMENT_MB,
    Limits,
    TooLarge,
    too_large,
)
from ragbench.datasets.sources import SOURCES
from ragbench.datasets.strictjson import BadJSON, strict_json
from ragbench.errors import DatasetError
from ragbench.types import Document, EvalSet, Query

log = logging.getLogger(__name__)

VARIANTS = ("sample", "full")


def download_hint(name: str) -> str:
    """", or run `python -m ragbench.datasets download <name>`" for datasets that can be downloaded."""
    return f", or run `python -m ragbench.datasets download {name}`" if name in SOURCES else ""


def bundled_sample(name: str) -> Path:
    """Folder of the small sample of ``name`` shipped inside the package (official layout)."""
    return Path(str(resources.files("ragbench.datasets").joinpath("samples", name)))


@dataclass
class FileReader:
    """Reads dataset files below ``root``, hashing every byte read and naming the file in every error."""

    dataset: str
    root: Path
    limits: Limits = field(default_factory=Limits)
    _digests: list[tuple[str, str]] = field(default_factory=list)

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
                file=str(self.root / rel), fix="re-download the file or re-save it as UTF-8",
            ) from exc

    def read_json(self, rel: str, *, top: type) -> Any:
        """Parses JSON and checks the top-level type (``list`` or ``dict``)."""
        text = self.read_text(rel)
        try:
            obj = strict_json(text)
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", dataset=self.dataset,
                file=str(self.root / rel), fix="re-download the file; it may be truncated or edited",
            ) from exc
        except BadJSON as exc:
            raise DatasetError(
                f"invalid JSON: {exc}", dataset=self.dataset, file=str(self.root / rel),
                fix="re-download the file, or correct that value (a number, a quoted string or null)",
            ) from None
        if not isinstance(obj, top):
            raise DatasetError(
                f"top level is a JSON {type(obj).__name__}, expected a JSON "
                f"{'array' if top is list else 'object'}",
                dataset=self.dataset, file=str(self.root / rel),
                fix="point dataset.path at the official file of this dataset",
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
                    file=str(self.root / rel), record=f"line {n}", fix="re-download the file",
                ) from exc
            except BadJSON as exc:
                raise DatasetError(
                    f"invalid JSON on line {n}: {exc}", dataset=self.dataset, file=str(self.root / rel),
                    record=f"line {n}", fix="correct that value (a number, a quoted string or null)",
                ) from None
            if not isinstance(obj, dict):
                raise DatasetError(
                    f"line {n} is a JSON {type(obj).__name__}, expected an object", dataset=self.dataset,
                    file=str(self.root / rel), record=f"line {n}", fix="re-download the file",
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
    record: Mapping[str, Any], key: str, *, dataset: str, file: str, where: str, types: tuple[type, ...]
) -> Any:
    """``record[key]`` checked for presence and type; otherwise a DatasetError naming all of it."""
    if not isinstance(record, Mapping):
        raise DatasetError(
            f"expected a JSON object, found {type(record).__name__}", dataset=dataset, file=file,
            record=where, fix="point dataset.path at the official, unmodified file",
        )
    if key not in record:
        raise DatasetError(
            "required field is missing", dataset=dataset, file=file, record=where, field=key,
            fix="point dataset.path at the official, unmodified file",
        )
    value = record[key]
    if not isinstance(value, types):
        names = " or ".join(t.__name__ for t in types)
        raise DatasetError(
            f"expected {names}, found {type(value).__name__}", dataset=dataset, file=file, record=where,
            field=key, fix="point dataset.path at the official, unmodified file",
        )
    return value


def fingerprint(digests: Sequence[tuple[str, str]], spec: Mapping[str, Any]) -> str:
    """SHA-256 over the files read (path + content hash) and the sampling/reading spec."""
    h = hashlib.sha256()
    for rel, digest in digests:
        h.update(f"{rel}\0{digest}\n".encode())
    h.update(json.dumps(dict(spec), sort_keys=True, default=str).encode())
    return h.hexdigest()


class BaseAdapter:
    """Common constructor and ``load()`` of every adapter; subclasses implement ``_read``.

    ``path=None`` reads the bundled sample (variant ``sample``); a path reads a local copy of the full
    dataset in its official layout (variant ``full``).

    ``doc_id_field`` / ``qid_field`` name where ids come from in the files, for the duplicate-id error.
    """

    doc_id_field = "document id"
    qid_field = "question id"

    def __init__(
        self,
        *,
        name: str,
        path: str | None = None,
        variant: str = "sample",
        num_docs: int | None = None,
        sample_size: int | None = None,
        max_queries: int | None = None,
        stratify: bool = False,
        seed: int = 42,
        max_document_mb: float = DEFAULT_MAX_DOCUMENT_MB,
        max_decompressed_mb: float = DEFAULT_MAX_DECOMPRESSED_MB,
    ) -> None:
        from ragbench.datasets.sampling import check_max_queries, check_spec
        from ragbench.errors import ConfigError

        if variant not in VARIANTS:
            raise ConfigError(f"dataset.variant={variant!r} is not valid; choose one of {list(VARIANTS)}")
        check_spec(num_docs=num_docs, sample_size=sample_size, stratify=stratify, seed=seed)
        check_max_queries(max_queries)
        self.name = name
        self.path = path
        self.variant = "full" if path else variant
        self.num_docs = num_docs
        self.sample_size = sample_size
        self.max_queries = max_queries
        self.stratify = stratify
        self.seed = seed
        self.limits = Limits(max_document_mb=max_document_mb, max_decompressed_mb=max_decompressed_mb)
        self.id_files: dict[str, str] = {}  # "document"/"question" -> the file its ids come from (set by _read)

    def root(self) -> Path:
        """Where the files are read from: dataset.path, the download cache, or the bundled sample."""
        if self.path:
            root = Path(self.path).expanduser()
            if not root.exists():
                raise DatasetError(
                    "dataset.path does not exist", dataset=self.name, file=str(root),
                    fix=(f"set dataset.path to the folder holding the official {self.name} files"
                         + download_hint(self.name)) if self.name in SOURCES else
                    "create that folder with your documents and QA file, or correct dataset.path",
                )
            return root
        if self.variant == "full":
            from ragbench.datasets.download import ensure_downloaded

            return ensure_downloaded(self.name)
        return bundled_sample(self.name)

    def read_spec(self) -> dict[str, Any]:
        """Reading options that change what is loaded (part of the fingerprint); subclasses extend."""
        return {}

    def _read(self, reader: FileReader) -> tuple[list[Document], list[Query], dict[str, int]]:
        raise NotImplementedError

    def sampling_spec(self) -> dict[str, Any]:
        return {
            "num_docs": self.num_docs, "sample_size": self.sample_size,
            "stratify": self.stratify, "seed": self.seed,
            **({"max_queries": self.max_queries} if self.max_queries is not None else {}),
        }

    def extra_tags(self) -> dict[str, str]:
        """Run tags an adapter wants logged (e.g. a corpus built without the original PDFs)."""
        return {}

    def load(self) -> EvalSet:
        """Reads, samples and fingerprints the dataset."""
        from ragbench.datasets.sampling import sample

        reader = FileReader(dataset=self.name, root=self.root(), limits=self.limits)
        docs, queries, stats = self._read(reader)
        where = ", ".join(dict.fromkeys(str(reader.root / rel) for rel, _ in reader.digests())) or str(reader.root)
        files = {"document": where, "question": where, **self.id_files}
        fix = "give every record its own id (official files have none repeated: re-download the file)"
        unique_ids("document", [d.doc_id for d in docs], dataset=self.name, file=files["document"],
                   field=self.doc_id_field, fix=fix)
        unique_ids("question", [q.qid for q in queries], dataset=self.name, file=files["question"],
                   field=self.qid_field, fix=fix)
        check_documents(docs, self.limits, dataset=self.name, file=where)
        queries = usable_queries(queries, stats, dataset=self.name)
        if not docs:
            raise DatasetError(
                "the corpus is empty (no documents were read)", dataset=self.name, file=str(reader.root),
                fix="check dataset.path points at the official files",
            )
        if not queries:
            raise DatasetError(
                "no questions were read", dataset=self.name, file=str(reader.root),
                fix="check dataset.path and the split/category options",
            )
        docs, queries = sample(docs, queries, **self.sampling_spec(), dataset=self.name)
        spec = {"dataset": self.name, "read": self.read_spec(), "sampling": self.sampling_spec()}
        return EvalSet(
            name=self.name,
            documents=tuple(docs),
            queries=tuple(queries),
            fingerprint=fingerprint(reader.digests(), spec),
            variant=self.variant,
            files=tuple(rel for rel, _ in reader.digests()),
            root=str(reader.root),
            stats=stats,
            tags=self.extra_tags(),
        )

