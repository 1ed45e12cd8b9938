"""Where the official dataset files live: pinned URLs, sizes and SHA-256 where they are known.

A ``sha256`` of ``None`` means the checksum of the *full* official file is not known to ragbench (the
bundled samples are subsets, so their checksums do not apply). Such files are downloaded, their
SHA-256 is logged and recorded in the cache manifest, and the value should be pasted here once it
has been checked against the origin; from then on a changed or corrupted file is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote


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

    def outputs(self) -> tuple[str, ...]:
        """Paths below the dataset root that show this file is already in place."""
        return self.expect or (self.dest,)


@dataclass(frozen=True)
class DatasetSource:
    """All official files of one dataset, and the page that documents them."""

    name: str
    homepage: str
    files: tuple[RemoteFile, ...]


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
            sha256=None,  # unknown: only a 2-conversation subset was available when this was written
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
            # time, so this archive cannot be pinned; the adapter's fingerprint still hashes every
            # split file and syllabus it reads.
            sha256=None,
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
            sha256=None,  # unknown for the full 150-question files (the bundled sample is a 30-question subset)
        ) for name in ("financebench_open_source.jsonl", "financebench_document_information.jsonl")),
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
    """The filing ``pdfs/<doc_name>.pdf`` of the FinanceBench repository (checksums not published)."""
    base = f"https://raw.githubusercontent.com/patronus-ai/financebench/{_FINANCEBENCH_COMMIT}"
    return RemoteFile(dest=f"pdfs/{doc_name}.pdf", urls=(f"{base}/pdfs/{quote(doc_name)}.pdf",), sha256=None)
