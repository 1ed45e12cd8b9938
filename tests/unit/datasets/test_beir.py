"""dataset=beir: the BEIR folder layout as distributed, its named errors, and `download beir/<name>`."""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from ragbench.datasets import sources
from ragbench.datasets.__main__ import main
from ragbench.datasets.beir import BEIRAdapter, document_text
from ragbench.errors import DatasetError
from tests.fixtures.beir import QUERIES, write_beir


def _load(path: Path, **kw):
    return BEIRAdapter(name="beir", path=str(path), **kw).load()


def test_reads_the_layout_as_distributed(tmp_path: Path) -> None:
    es = _load(write_beir(tmp_path / "b"))
    assert len(es.documents) == 36
    doc = next(d for d in es.documents if d.doc_id == "coral-1")
    para = doc.sections[0].paragraphs[0]
    assert para.text == "Coral study 1 on reef reef bleaching ocean warming sample coral note 1"  # title + " " + text
    assert para.ref == "coral-1"
    assert [q.qid for q in es.queries] == list(QUERIES)  # judged queries only, in qrels order
    q1 = es.queries[0]
    assert {(e.doc_id, e.relevance) for e in q1.evidence} == {("coral-0", 2), ("coral-1", 1), ("coral-3", 1),
                                                              ("vaccine-0", 0)}
    assert q1.answers == () and es.stats["qa_dropped_no_gold"] == 0  # no gold answers: kept
    assert es.stats["queries_in_file"] == 9 and es.stats["qrels"] == 21
    assert BEIRAdapter.evidence_level == "document"


def test_document_text_is_title_space_text() -> None:
    assert document_text("T", "body") == "T body"
    assert document_text("", " body ") == "body"


def test_split_selects_the_qrels_file(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "b", split="dev")
    assert len(_load(root, split="dev").queries) == 8
    with pytest.raises(DatasetError, match=r"(?s)no qrels for split 'test'.*dataset.split to one of \['dev'\]"):
        _load(root)


@pytest.mark.parametrize(("line", "match"), [
    ("q1\tcoral-0", "2 tab-separated columns, expected 3"),
    ("q1\tcoral-0\thigh", "score 'high' on line 2 is not an integer"),
])
def test_bad_qrels_lines_are_named(tmp_path: Path, line: str, match: str) -> None:
    root = write_beir(tmp_path / "b")
    (root / "qrels" / "test.tsv").write_text(f"query-id\tcorpus-id\tscore\n{line}\n")
    with pytest.raises(DatasetError, match=match):
        _load(root)


def test_no_path_names_the_fix() -> None:
    with pytest.raises(DatasetError, match="(?s)dataset.path is required.*download beir/scifact"):
        BEIRAdapter(name="beir").load()


def test_every_published_beir_zip_has_its_checksum() -> None:
    src = sources.SOURCES["beir/scifact"]
    (file,) = src.files
    assert file.urls == ("https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip",)
    assert file.md5 == "5f7d1de60b170fc8027bb7898e2efca1"


def test_download_offline_fails_in_one_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    rc = main(["download", "beir/scifact", "--dest", str(tmp_path / "d"), "--retries", "1"])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.startswith("error: [RB-DATA-002] dataset 'beir/scifact': could not download")
    assert "Traceback" not in err and "fix: download https://public.ukp" in err


def _zip_of(folder: Path, out: Path) -> Path:
    with zipfile.ZipFile(out, "w") as zf:  # as BEIR zips it: everything under <name>/
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                zf.write(p, f"scifact/{p.relative_to(folder)}")
    return out


def test_a_local_zip_with_the_published_checksum_is_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    archive = _zip_of(write_beir(tmp_path / "src"), tmp_path / "scifact.zip")
    md5 = hashlib.md5(archive.read_bytes(), usedforsecurity=False).hexdigest()
    monkeypatch.setitem(sources.SOURCES, "beir/scifact", sources.beir_source("scifact", md5))
    dest = tmp_path / "dest"
    assert main(["download", "beir/scifact", "--zip", str(archive), "--dest", str(dest)]) == 0
    assert f"dataset=beir dataset.path={dest}" in capsys.readouterr().out
    assert len(_load(dest).queries) == 8


def test_a_local_zip_with_another_checksum_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive = _zip_of(write_beir(tmp_path / "src"), tmp_path / "scifact.zip")
    assert main(["download", "beir/scifact", "--zip", str(archive), "--dest", str(tmp_path / "dest")]) == 1
    err = capsys.readouterr().err
    assert "expected the published 5f7d1de60b170fc8027bb7898e2efca1" in err and "Traceback" not in err
    assert not (tmp_path / "dest" / "corpus.jsonl").exists()


def test_a_repeated_query_id_is_refused_with_its_lines(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "b")
    queries = root / "queries.jsonl"
    lines = queries.read_text(encoding="utf-8").splitlines()  # q1 on line 1, q2 on line 2
    lines += ['{"_id": "q1", "text": "another question"}', '{"_id": "q2", "text": "x"}',
              '{"_id": 2, "text": "y"}', '{"_id": "2", "text": "z"}']
    queries.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        _load(root)
    first, fix = str(info.value).split("\n")
    assert first == (f"dataset 'beir', file '{queries}', field '_id': 3 query ids occur more than once: "
                     "'q1' on lines 1, 10; 'q2' on lines 2, 11; '2' on lines 12, 13 (they would be merged "
                     "into one question)")
    assert fix == ("  fix: give every line of queries.jsonl its own _id (the official files repeat none: "
                   "re-download it)")
