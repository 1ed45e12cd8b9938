"""Where the official dataset files live: pinned URLs, sizes and SHA-256 where they are known.

Every official source is pinned: a file by its SHA-256 (and size), an archive that its host builds on
request (GitHub's repository zips, whose bytes are not promised to stay the same) by the SHA-256 of each
member ragbench unpacks (``pins/<name>.sha256``, sha256sum format), and BEIR's zips by the MD5 their
README publishes. One exception: Qasper's two archives, which could not be fetched where this was
written; their SHA-256 is logged and recorded in the cache manifest on download (``sha256=None``), to be
pinned here once checked against the origin.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

PINS = Path(__file__).resolve().parent / "pins"


@dataclass(frozen=True)
class Unpack:
    """How to unpack a downloaded archive: keep members matching ``include`` (fnmatch on the member
    path after dropping ``strip`` leading folders); ``flatten`` keeps only the file name."""

    include: tuple[str, ...]
    strip: int = 0
    flatten: bool = False


@dataclass(frozen=True)
class RemoteFile:
    """One official file: mirrors tried in order, where it goes below the dataset root, its checksum."""

    dest: str
    urls: tuple[str, ...]
    sha256: str | None
    size: int | None = None
    md5: str | None = None  # where the origin publishes an MD5 only (BEIR's zips)
    unpack: Unpack | None = None
    # what must exist below the root once this file is in place (archives: some unpacked members)
    expect: tuple[str, ...] = ()
    # an archive whose own bytes cannot be pinned: the SHA-256 of every member it unpacks (path below the
    # root -> hex digest); a member missing, extra or different refuses the archive
    members: tuple[tuple[str, str], ...] = ()

    @property
    def pinned(self) -> bool:
        """True when the bytes installed are checked against published or pinned checksums."""
        return self.sha256 is not None or self.md5 is not None or bool(self.members)

    def outputs(self) -> tuple[str, ...]:
        """Paths below the dataset root that show this file is already in place."""
        return self.expect or (self.dest,)


@dataclass(frozen=True)
class DatasetSource:
    """All official files of one dataset, and the page that documents them."""

    name: str
    homepage: str
    files: tuple[RemoteFile, ...]


def member_pins(name: str) -> tuple[tuple[str, str], ...]:
    """``pins/<name>.sha256`` (sha256sum format, ``#`` comments): (path below the root, SHA-256) pairs."""
    pairs = []
    for line in (PINS / f"{name}.sha256").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            digest, path = line.split(maxsplit=1)
            pairs.append((path.strip(), digest))
    return tuple(pairs)


# the datasets `python -m ragbench.datasets download all` fetches (BEIR's are fetched one by one: beir/<name>)
ALL = ("locomo", "qasper", "syllabusqa", "financebench", "multihop_rag")

_LOCOMO_COMMIT = "3eb6f2c585f5e1699204e3c3bdf7adc5c28cb376"
_SYLLABUSQA_COMMIT = "72baa744eaa120539134a5b174cf1d51ba7cb064"
_FINANCEBENCH_COMMIT = "cc39aeb4afdf33909ee1412188bf89035950c2eb"
_MULTIHOP_COMMIT = "3dd4d4e79fc9843008b8f832da99086a82f1a805"
_QASPER_S3 = "https://qasper-dataset.s3.us-west-2.amazonaws.com"

SOURCES: dict[str, DatasetSource] = {
    "locomo": DatasetSource(
        name="locomo",
        homepage="https://github.com/snap-research/locomo",
        files=(RemoteFile(
            dest="data/locomo10.json",
            urls=(f"https://raw.githubusercontent.com/snap-research/locomo/{_LOCOMO_COMMIT}/data/locomo10.json",),
            # the file at the pinned commit (10 conversations, 1,986 questions)
            sha256="79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4", size=2_805_274,
        ),),
    ),
    "qasper": DatasetSource(
        name="qasper",
        homepage="https://allenai.org/data/qasper",
        files=(
            RemoteFile(
                dest=".downloads/qasper-train-dev-v0.3.tgz",
                urls=(f"{_QASPER_S3}/qasper-train-dev-v0.3.tgz",),
                sha256=None,  # unknown: the official archives could not be fetched when this was written
                unpack=Unpack(include=("*qasper-train-v0.3.json", "*qasper-dev-v0.3.json"), flatten=True),
                expect=("qasper-train-v0.3.json", "qasper-dev-v0.3.json"),
            ),
            RemoteFile(
                dest=".downloads/qasper-test-and-evaluator-v0.3.tgz",
                urls=(f"{_QASPER_S3}/qasper-test-and-evaluator-v0.3.tgz",),
                sha256=None,  # unknown, as above
                unpack=Unpack(include=("*qasper-test-v0.3.json",), flatten=True),
                expect=("qasper-test-v0.3.json",),
            ),
        ),
    ),
    "syllabusqa": DatasetSource(
        name="syllabusqa",
        homepage="https://github.com/umass-ml4ed/SyllabusQA",
        files=(RemoteFile(
            dest=".downloads/SyllabusQA.zip",
            urls=(f"https://codeload.github.com/umass-ml4ed/SyllabusQA/zip/{_SYLLABUSQA_COMMIT}",),
            # GitHub builds repository archives on request and does not promise identical bytes over
            # time, so the archive itself is not pinned: every member it unpacks is (pins/syllabusqa.sha256)
            sha256=None,
            members=member_pins("syllabusqa"),
            unpack=Unpack(include=("data/dataset_split/*", "syllabi/syllabi_meta_info.csv",
                                   "syllabi/syllabi_redacted/text/*", "syllabi/syllabi_redacted/word/*"), strip=1),
            expect=tuple(f"data/dataset_split/{s}.{f}" for s in ("train", "val", "test") for f in ("csv", "json")),
        ),),
    ),
    "financebench": DatasetSource(
        name="financebench",
        homepage="https://github.com/patronus-ai/financebench",
        files=tuple(RemoteFile(
            dest=f"data/{name}",
            urls=(f"https://raw.githubusercontent.com/patronus-ai/financebench/{_FINANCEBENCH_COMMIT}/data/{name}",),
            sha256=sha, size=size,  # the full files at the pinned commit (150 questions)
        ) for name, sha, size in (
            ("financebench_open_source.jsonl", "a5a2aa673e573e55675fc3c0f9aa38c1cf59d2abc91edb077534f71f10a71877",
             929_848),
            ("financebench_document_information.jsonl",
             "1c69127783879de8cdadb159d2181f39bc3123b8e0ebf74031c3969d69189575", 88_781),
        )),
    ),
    "multihop_rag": DatasetSource(
        name="multihop_rag",
        homepage="https://github.com/yixuantt/MultiHop-RAG",
        files=tuple(RemoteFile(
            dest=name,
            urls=(f"https://media.githubusercontent.com/media/yixuantt/MultiHop-RAG/{_MULTIHOP_COMMIT}/dataset/{name}",
                  f"https://huggingface.co/datasets/yixuantt/MultiHopRAG/resolve/main/{name}"),
            # from the Git LFS pointers at the pinned commit (oid sha256 + size)
            sha256=sha, size=size,
        ) for name, sha, size in (
            ("corpus.json", "20b61b5ab84de84a927420c5d265b7ec8d859ae49980699958a787ade9e4d28f", 6_785_567),
            ("MultiHopRAG.json", "03cfb4926461f868684903aadc8024447bdda5bb3f6804741424cce338515bff", 5_171_312),
        )),
    ),
}


# BEIR's public zips and the MD5 its README publishes for each (beir-cellar/beir, "Available Datasets").
BEIR_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/{name}.zip"
BEIR_MD5 = {
    "msmarco": "444067daf65d982533ea17ebd59501e4", "trec-covid": "ce62140cb23feb9becf6270d0d1fe6d1",
    "nfcorpus": "a89dba18a62ef92f7d323ec890a0d38d", "nq": "d4d3d2e48787a744b6f6e691ff534307",
    "hotpotqa": "f412724f78b0d91183a0e86805e16114", "fiqa": "17918ed23cd04fb15047f73e6c3bd9d9",
    "arguana": "8ad3e3c2a5867cdced806d6503f29b99", "webis-touche2020": "46f650ba5a527fc69e0a6521c5a23563",
    "cqadupstack": "4e41456d7df8ee7760a7f866133bda78", "quora": "18fb154900ba42a600f84b839c173167",
    "dbpedia-entity": "c2a39eb420a3164af735795df012ac2c", "scidocs": "38121350fc3a4d2f48850f6aff52e4a9",
    "fever": "5a818580227bfb4b35bb6fa46d9b6c03", "climate-fever": "8b66f0a9126c521bae2bde127b4dc99d",
    "scifact": "5f7d1de60b170fc8027bb7898e2efca1",
}


def beir_source(name: str, md5: str) -> DatasetSource:
    """``beir/<name>``: the official zip, checked against its published MD5, unpacked in its BEIR layout."""
    return DatasetSource(name=f"beir/{name}", homepage="https://github.com/beir-cellar/beir", files=(RemoteFile(
        dest=f".downloads/{name}.zip", urls=(BEIR_URL.format(name=name),), sha256=None, md5=md5,
        unpack=Unpack(include=("corpus.jsonl", "queries.jsonl", "qrels/*.tsv"), strip=1),
        expect=("corpus.jsonl", "queries.jsonl")),))


SOURCES.update({f"beir/{name}": beir_source(name, md5) for name, md5 in BEIR_MD5.items()})


def financebench_pdf(doc_name: str) -> RemoteFile:
    """The filing ``pdfs/<doc_name>.pdf`` of the FinanceBench repository, with its pinned SHA-256 where
    ``pins/financebench_pdfs.sha256`` lists it."""
    base = f"https://raw.githubusercontent.com/patronus-ai/financebench/{_FINANCEBENCH_COMMIT}"
    dest = f"pdfs/{doc_name}.pdf"
    return RemoteFile(dest=dest, urls=(f"{base}/pdfs/{quote(doc_name)}.pdf",), sha256=_pdf_pins().get(dest))


def _pdf_pins() -> dict[str, str]:
    return dict(member_pins("financebench_pdfs"))
