"""Incremental indexing (issue 44 items 8, 9): per-document index pieces, their keys and assembly, a job on a
corpus whose one document changed, and ``python -m ragbench.cache docs|forget|reset``."""

from __future__ import annotations

import dataclasses
import io
import logging

import numpy as np
import pytest

from ragbench.cache import cli
from ragbench.cache import documents as pieces
from ragbench.cache.doc_inventory import doc_pieces, forget
from ragbench.cache.inventory import prune
from ragbench.cache.store import StageCache
from ragbench.errors import CacheError
from ragbench.ingest.hierarchical import HierarchicalChunker
from ragbench.pipeline import Pipeline
from ragbench.types import Paragraph
from tests.fixtures.toy import HashEmbedder, ToyAdapter, toy_components

DAY = 86400.0
NEW = "The conference moved to Porto in June, after a vote."


class EditedToy(ToyAdapter):
    """The toy corpus with one paragraph of document ``b`` rewritten (document ``a`` unchanged)."""

    def load(self):
        evalset = super().load()
        a, b = evalset.documents
        section = dataclasses.replace(b.sections[0], paragraphs=(Paragraph(NEW, ref="B1"),))
        return dataclasses.replace(evalset, documents=(a, dataclasses.replace(b, sections=(section,))))


@pytest.fixture(autouse=True)
def _small_documents(monkeypatch):
    """The toy documents have 1 to 3 searchable chunks: pieces for them too (the default skips passages)."""
    monkeypatch.setattr(pieces, "MIN_CHUNKS", 1)


def _corpus(adapter):
    docs = adapter.load().documents
    tree = HierarchicalChunker().chunk(docs)
    chunks = tree.searchable()
    return docs, tree, [c.chunk_id for c in chunks], [c.text for c in chunks]


def _assemble(cache, adapter, embedder, manifest=None):
    docs, tree, ids, texts = _corpus(adapter)
    return pieces.assemble(cache, tree=tree, ids=ids, texts=texts, documents=docs,
                           chunker=HierarchicalChunker().params(), vectors=embedder.identity, dataset="toy",
                           encode=embedder.embed_documents, index_manifest=manifest), texts, tree, ids


def test_document_hash_changes_only_for_the_edited_document():
    before, after = ToyAdapter().load().documents, EditedToy().load().documents
    assert pieces.document_sha256(before[0]) == pieces.document_sha256(after[0])
    assert pieces.document_sha256(before[1]) != pieces.document_sha256(after[1])
    key = pieces.piece_key(pieces.document_sha256(before[0]), {"x": 1}, "emb")
    assert key == pieces.piece_key(pieces.document_sha256(after[0]), {"x": 1}, "emb")
    assert key != pieces.piece_key(pieces.document_sha256(after[0]), {"x": 2}, "emb")  # other chunking
    assert key != pieces.piece_key(pieces.document_sha256(after[0]), {"x": 1}, "other")  # other embedder


def test_pieces_cover_every_row_once_grouped_by_document():
    _, tree, ids, texts = _corpus(ToyAdapter())
    groups = pieces.pieces_of(tree, ids, texts)
    assert [g.doc_id for g in groups] == ["a", "b"]
    assert sorted(r for g in groups for r in g.rows) == list(range(len(ids)))
    assert all(tree[i].doc_id == g.doc_id for g in groups for i in g.ids)


def test_assembly_encodes_only_the_changed_document_and_equals_a_full_encode(tmp_path):
    cache, emb = StageCache(dir=str(tmp_path)), HashEmbedder()
    first, texts, _, _ = _assemble(cache, ToyAdapter(), emb)
    assert sum(emb.calls) == len(texts)
    np.testing.assert_array_equal(first, HashEmbedder().embed_documents(texts))
    emb.calls.clear()
    manifest: dict = {}
    edited, texts, tree, ids = _assemble(cache, EditedToy(), emb, manifest)
    b_texts = [t for i, t in zip(ids, texts, strict=True) if tree[i].doc_id == "b"]
    assert sum(emb.calls) == len(b_texts) < len(texts)  # document a's piece came from the cache
    np.testing.assert_array_equal(edited, HashEmbedder().embed_documents(texts))
    docs = EditedToy().load().documents
    assert manifest[pieces.DOCUMENTS] == {d.doc_id: pieces.document_sha256(d) for d in docs}


def test_a_passage_corpus_is_one_entry_without_pieces(tmp_path, monkeypatch):
    monkeypatch.setattr(pieces, "MIN_CHUNKS", 8)  # the default: documents of 2 chunks on average are passages
    cache, emb = StageCache(dir=str(tmp_path)), HashEmbedder()
    _, texts, _, _ = _assemble(cache, ToyAdapter(), emb)
    assert emb.calls == [len(texts)] and not (tmp_path / pieces.STAGE).exists()


def _scores(metrics):
    return {k: v for k, v in metrics.items() if not k.startswith(("cache/", "latency/", "ingest/", "llm/cache"))}


def test_a_job_after_one_document_changed_encodes_only_its_chunks_with_cold_metrics(tmp_path):
    cache = StageCache(dir=str(tmp_path / "c"))
    first = Pipeline(toy_components(), cache=cache)
    first.run()
    assert first.embedded_texts > 0
    again = Pipeline(toy_components(dataset=EditedToy()), cache=StageCache(dir=str(tmp_path / "c")))
    result = again.run()
    _, tree, ids, _ = _corpus(EditedToy())
    assert again.embedded_texts == sum(1 for i in ids if tree[i].doc_id == "b")
    cold = Pipeline(toy_components(dataset=EditedToy()), cache=StageCache(dir=str(tmp_path / "cold")))
    cold_result = cold.run()
    assert cold.embedded_texts == len(ids)
    assert _scores(result.metrics) == _scores(cold_result.metrics)
    assert result.fingerprints == cold_result.fingerprints  # identical inputs, identical fingerprints


def test_identical_inputs_keep_identical_fingerprints_and_metrics(tmp_path):
    a = Pipeline(toy_components(), cache=StageCache(dir=str(tmp_path / "a"))).run()
    b = Pipeline(toy_components(), cache=StageCache(dir=str(tmp_path / "b"))).run()
    warm = Pipeline(toy_components(), cache=StageCache(dir=str(tmp_path / "a"))).run()
    assert a.fingerprints == b.fingerprints == warm.fingerprints
    assert _scores(a.metrics) == _scores(b.metrics) == _scores(warm.metrics)


@pytest.fixture()
def indexed(tmp_path):
    """A cache holding the toy corpus's pieces, then the edited corpus's (document b twice)."""
    root = tmp_path / "cache"
    Pipeline(toy_components(), cache=StageCache(dir=str(root))).run()
    Pipeline(toy_components(dataset=EditedToy()), cache=StageCache(dir=str(root))).run()
    return root


def test_docs_lists_each_document_piece_with_chunks_and_hash(indexed, capsys):
    rows = doc_pieces(indexed)
    assert [(r.dataset, r.doc_id) for r in rows] == [("toy", "a"), ("toy", "b"), ("toy", "b")]
    assert all(r.chunks > 0 and len(r.sha256) == 64 for r in rows)
    assert cli.main(["--dir", str(indexed), "docs", "--dataset", "toy"]) == 0
    out = capsys.readouterr().out
    assert "chunks" in out and rows[0].sha256[:16] in out


def test_forget_drops_the_document_and_the_indexes_built_with_it(indexed, caplog):
    caplog.set_level(logging.INFO, logger="ragbench.cache")
    sha = next(r.sha256 for r in doc_pieces(indexed) if r.doc_id == "a")
    assert cli.main(["--dir", str(indexed), "forget", sha[:10]]) == 0
    assert "removed 1 document pieces and 2 index entries" in caplog.text
    assert [r.doc_id for r in doc_pieces(indexed)] == ["b", "b"]
    prune(indexed, older_than_s=-DAY, stage="retrieval")  # the stored hits, else the job needs no vectors
    again = Pipeline(toy_components(dataset=EditedToy()), cache=StageCache(dir=str(indexed)))
    again.run()
    _, tree, ids, _ = _corpus(EditedToy())
    assert again.embedded_texts == sum(1 for i in ids if tree[i].doc_id == "a")


@pytest.mark.parametrize(("argv", "says"), [
    (["forget", "nope"], "no indexed document 'nope'"),
    (["forget", "a", "--dataset", "toy"], None),
    (["forget", "a", "--dataset", "qasper"], "--dataset 'qasper' has no indexed documents"),
    (["docs", "--dataset", "qasper"], "its datasets are: toy"),
    (["reset"], "pass --yes"),  # stdin is not a terminal
])
def test_bad_input_is_one_line_naming_the_fix(indexed, argv, says, caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="ragbench.cache")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    status = cli.main(["--dir", str(indexed), *argv])
    if says is None:
        assert status == 0
        return
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert status == 2 and len(errors) == 1 and says in errors[0].getMessage()
    assert "\n" not in errors[0].getMessage() and "Traceback" not in caplog.text
    if says.startswith("no indexed document"):
        assert "python -m ragbench.cache docs" in errors[0].getMessage()


def test_forget_of_an_empty_cache_names_how_to_index(tmp_path):
    with pytest.raises(CacheError, match="no indexed document"):
        forget(tmp_path / "none", "a")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("reply", "status", "left"), [("n\n", 1, True), ("y\n", 0, False)])
def test_reset_asks_first(indexed, monkeypatch, reply, status, left):
    monkeypatch.setattr("sys.stdin", _Tty(reply))
    assert cli.main(["--dir", str(indexed), "reset"]) == status
    assert bool(doc_pieces(indexed)) is left


def test_reset_yes_clears_every_stage(indexed, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert cli.main(["--dir", str(indexed), "reset", "--yes"]) == 0
    assert doc_pieces(indexed) == []
    assert all(r.entries == 0 for r in cli.info(indexed))
