"""Shared plumbing of dataset adapters: the common constructor and ``load()`` (read, check, sample,
fingerprint), the bundled samples. Reading files with named errors is ``ragbench.datasets.reader``."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from ragbench.datasets.checks import check_documents, unique_ids, usable_queries
from ragbench.datasets.download import ensure_downloaded
from ragbench.datasets.limits import DEFAULT_MAX_DECOMPRESSED_MB, DEFAULT_MAX_DOCUMENT_MB, Limits
from ragbench.datasets.openviking_sampling import check_preset
from ragbench.datasets.reader import FileReader, download_hint, require
from ragbench.datasets.sampling import check_max_queries, check_spec, sample
from ragbench.datasets.sources import SOURCES
from ragbench.errors import ConfigError, DatasetError
from ragbench.protocols import AnswerPostprocessor
from ragbench.reuse import LAST, file_signature
from ragbench.types import Document, EvalSet, Query

# FileReader, require and download_hint moved to ragbench.datasets.reader; adapters import them from here
__all__ = ["VARIANTS", "BaseAdapter", "FileReader", "bundled_sample", "download_hint", "fingerprint", "require"]

log = logging.getLogger(__name__)

VARIANTS = ("sample", "full")


def bundled_sample(name: str) -> Path:
    """Folder of the small sample of ``name`` shipped inside the package (official layout)."""
    return Path(str(resources.files("ragbench.datasets").joinpath("samples", name)))


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
    # the dataset's protocol, declared here and nowhere else (no table of dataset names):
    # evidence_level: "document" when relevance is judged per document (retrieval/doc/* metrics);
    # default_scope: retrieval.scope unless the run sets one (ragbench.retrieval.scope): "document" when the
    # official evaluation searches each question's own documents, else "corpus"; a retriever config never
    # changes it; doc_recall: the evidence names its source documents, so retrieval/doc_recall_at_k is defined
    evidence_level = "passage"
    default_scope = "corpus"
    doc_recall = False
    has_answers = True  # False: retrieval judgements only (BEIR); questions are kept without a gold answer
    own_files = False  # True: the user's own files (custom): error fixes say how to correct them, not re-download
    answers_optional = False  # True: a question may come without a gold answer (custom: scored on retrieval only)

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
        sampling: str | None = None,
        max_document_mb: float = DEFAULT_MAX_DOCUMENT_MB,
        max_decompressed_mb: float = DEFAULT_MAX_DECOMPRESSED_MB,
        postprocess: AnswerPostprocessor | None = None,
    ) -> None:
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
        check_preset(sampling, dataset=name, num_docs=num_docs, sample_size=sample_size)
        self.sampling = sampling  # a preset (sampling=openviking: ragbench.datasets.openviking_sampling) or None
        self.limits = Limits(max_document_mb=max_document_mb, max_decompressed_mb=max_decompressed_mb)
        self.id_files: dict[str, str] = {}  # "document"/"question" -> the file its ids come from (set by _read)
        # the answer post-processing hook the pipeline applies before scoring (dataset.postprocess: a _target_)
        if postprocess is not None and not isinstance(postprocess, AnswerPostprocessor):
            raise ConfigError(f"dataset.postprocess is {type(postprocess).__name__}, not an answer post-processor; "
                              "fix: give a _target_ such as ragbench.datasets.postprocess.NumberNormalizer")
        self.postprocess = postprocess

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
            **({"sampling": self.sampling} if self.sampling is not None else {}),
        }

    def extra_tags(self) -> dict[str, str]:
        """Run tags an adapter wants logged (e.g. a corpus built without the original PDFs)."""
        return {}

    def load(self) -> EvalSet:
        """Reads, samples and fingerprints the dataset; in a sweep, a later job with the same dataset
        configuration reuses the set the previous job read when no file it read has changed
        (``ragbench.reuse``)."""
        state = sorted((k, repr(v)) for k, v in vars(self).items() if k not in ("id_files", "evidence_level"))
        evalset, id_files = LAST.get(
            "dataset", (type(self).__module__, type(self).__qualname__, repr(state)), (),
            lambda: (self._load(), dict(self.id_files)), signature=lambda v: file_signature(v[0].root, v[0].files))
        self.id_files = dict(id_files)
        return evalset

    def _load(self) -> EvalSet:
        reader = FileReader(dataset=self.name, root=self.root(), limits=self.limits, own=self.own_files)
        docs, queries, stats = self._read(reader)
        where = ", ".join(dict.fromkeys(str(reader.root / rel) for rel, _ in reader.digests())) or str(reader.root)
        files = {"document": where, "question": where, **self.id_files}
        fix = ("give every record its own id" if self.own_files else
               "give every record its own id (official files have none repeated: re-download the file)")
        unique_ids("document", [d.doc_id for d in docs], dataset=self.name, file=files["document"],
                   field=self.doc_id_field, fix=fix)
        unique_ids("question", [q.qid for q in queries], dataset=self.name, file=files["question"],
                   field=self.qid_field, fix=fix)
        check_documents(docs, self.limits, dataset=self.name, file=where)
        queries = usable_queries(queries, stats, dataset=self.name, require_gold=self.has_answers and not self.answers_optional)
        if not docs:
            raise DatasetError(
                "the corpus is empty (no documents were read)", dataset=self.name, file=str(reader.root),
                fix="put your documents below dataset.path" if self.own_files else
                "check dataset.path points at the official files",
            )
        if not queries:
            raise DatasetError(
                "no questions were read", dataset=self.name, file=str(reader.root),
                fix="write questions into dataset.qa_file" if self.own_files else
                "check dataset.path and the split/category options",
            )
        docs, queries = sample(docs, queries, **self.sampling_spec(), dataset=self.name, root=reader.root)
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
