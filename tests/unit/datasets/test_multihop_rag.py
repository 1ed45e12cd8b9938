"""MultiHop-RAG adapter on the synthetic fixture (documented schema): counts, evidence, bad input."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from ragbench.datasets.base import bundled_sample
from ragbench.datasets.multihop_rag import MultiHopRAGAdapter, article_id
from ragbench.errors import DatasetError

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "multihop_rag"


def load(root: Path | None = FIXTURE, **kw):
    return MultiHopRAGAdapter(name="multihop_rag", path=str(root) if root else None, **kw).load()


def test_fixture_is_labelled_synthetic_and_bundled_byte_identical():
    assert "SYNTHETIC" in (FIXTURE / "README.md").read_text(encoding="utf-8")
    assert "SYNTHETIC" in (bundled_sample("multihop_rag") / "NOTICE").read_text(encoding="utf-8")
    for name in ("corpus.json", "MultiHopRAG.json"):
        assert (FIXTURE / name).read_bytes() == (bundled_sample("multihop_rag") / name).read_bytes()


def test_counts_by_type_match_raw_file():
    raw = json.loads((FIXTURE / "MultiHopRAG.json").read_text(encoding="utf-8"))
    es = load()
    assert Counter(q.question_type for q in es.queries) == Counter(r["question_type"] for r in raw)
    assert len(es.documents) == len(json.loads((FIXTURE / "corpus.json").read_text(encoding="utf-8"))) == 8


def test_null_query_is_unanswerable_without_documents():
    nulls = [q for q in load().queries if q.question_type == "null_query"]
    assert len(nulls) == 2
    assert all(not q.answerable and q.doc_ids == () and q.answers == ("Insufficient information.",) for q in nulls)


def test_facts_are_text_evidence_on_the_right_article():
    raw = json.loads((FIXTURE / "MultiHopRAG.json").read_text(encoding="utf-8"))
    corpus = {a["url"]: a for a in json.loads((FIXTURE / "corpus.json").read_text(encoding="utf-8"))}
    es = load()
    docs = {d.doc_id: d for d in es.documents}
    for row, q in zip(raw, es.queries, strict=True):
        assert [e.text for e in q.evidence] == [e["fact"] for e in row["evidence_list"]]
        for ev, item in zip(q.evidence, row["evidence_list"], strict=True):
            assert ev.doc_id == article_id(item["url"], item["title"])
            body = " ".join(p.text for p in docs[ev.doc_id].sections[0].paragraphs)
            assert ev.text in body and docs[ev.doc_id].title == corpus[item["url"]]["title"]
        assert set(q.doc_ids) == {article_id(e["url"], e["title"]) for e in row["evidence_list"]}


def test_bundled_sample_is_tagged_synthetic():
    es = load(None)
    assert es.tags == {"sample": "synthetic"} and len(es.queries) == 11


def test_github_layout_under_dataset_folder(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "dataset")
    es = load(tmp_path)
    assert es.files == ("dataset/corpus.json", "dataset/MultiHopRAG.json") and es.tags == {}


def test_evidence_matched_by_title_when_url_differs(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "d")
    p = tmp_path / "d" / "MultiHopRAG.json"
    raw = json.loads(p.read_text(encoding="utf-8"))
    raw[0]["evidence_list"][0]["url"] = "https://elsewhere.example.com/x"
    p.write_text(json.dumps(raw), encoding="utf-8")
    es = load(tmp_path / "d")
    assert es.stats["evidence_matched_by_title"] == 1 and len(es.queries) == 11


def _error(root: Path) -> DatasetError:
    with pytest.raises(DatasetError) as info:
        load(root)
    assert "dataset 'multihop_rag'" in str(info.value) and "fix:" in str(info.value)
    return info.value


@pytest.fixture
def copy(tmp_path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "d")
    return tmp_path / "d"


def test_missing_queries_file(copy):
    (copy / "MultiHopRAG.json").unlink()
    assert _error(copy).file.endswith("MultiHopRAG.json")


def test_invalid_json(copy):
    (copy / "corpus.json").write_text("[{", encoding="utf-8")
    assert "invalid JSON" in str(_error(copy))


def test_wrong_top_level(copy):
    (copy / "corpus.json").write_text('{"articles": []}', encoding="utf-8")
    assert "expected a JSON array" in str(_error(copy))


def test_invalid_utf8(copy):
    p = copy / "corpus.json"
    p.write_bytes(p.read_bytes().replace(b"Harborview", b"Harb\xffrview", 1))
    assert "invalid UTF-8" in str(_error(copy))


def test_missing_field(copy):
    p = copy / "MultiHopRAG.json"
    raw = json.loads(p.read_text(encoding="utf-8"))
    del raw[4]["evidence_list"][1]["fact"]
    p.write_text(json.dumps(raw), encoding="utf-8")
    err = _error(copy)
    assert err.field == "fact" and err.record == "#4 evidence_list[1]"


def test_evidence_naming_an_article_not_in_the_corpus(copy):
    p = copy / "corpus.json"
    arts = json.loads(p.read_text(encoding="utf-8"))
    p.write_text(json.dumps([a for a in arts if "recall" not in a["url"]]), encoding="utf-8")
    err = _error(copy)
    assert "not in corpus.json" in str(err) and err.record == "#3 evidence_list[1]"


def test_empty_corpus(copy):
    (copy / "corpus.json").write_text("[]", encoding="utf-8")
    (copy / "MultiHopRAG.json").write_text("[]", encoding="utf-8")
    assert "corpus is empty" in str(_error(copy))


def test_each_article_text_starts_with_title_source_date_url():
    raw = json.loads((FIXTURE / "corpus.json").read_text(encoding="utf-8"))
    by_id = {article_id(a.get("url") or "", a["title"]): a for a in raw}
    for doc in load().documents:
        art = by_id[doc.doc_id]
        header = doc.sections[0].paragraphs[0].text.splitlines()
        assert header[0] == f"Title: {art['title']}"
        assert f"Source: {art['source']}" in header and f"Published at: {art['published_at']}" in header
        assert header[-1] == f"URL: {art['url']}"
        assert doc.sections[0].paragraphs[1].text in art["body"]  # the body follows the header


def test_a_body_hit_carries_the_articles_source_and_date_to_the_generator():
    """The header paragraph is a separate paragraph: a hit in the body reaches the generator with the
    article's source and date only through its heading (the section title), at every expansion level."""
    from ragbench.expand import ParentExpander
    from ragbench.generate.prompts import load_answer_prompt
    from ragbench.ingest.hierarchical import HierarchicalChunker
    from ragbench.types import Hit, Level

    es = load()
    tree = HierarchicalChunker().chunk(es.documents)
    doc = next(d for d in es.documents if d.title == "Harborview Robotics unveils warehouse picker arm")
    assert doc.sections[0].title == "Source: The Example Ledger | Published at: 2023-10-02T09:15:00+00:00"
    body = next(c for c in tree.chunks.values() if c.doc_id == doc.doc_id and c.level == Level.SENTENCE
                and c.text.startswith("Chief executive Mira Osei"))
    query = es.queries[0]
    for depth in (0, 1):  # the sentence itself, and the default: its paragraph
        (ctx,) = ParentExpander(parent_depth=depth).expand([Hit(body.chunk_id, 1.0, 1)], tree)
        assert "The Example Ledger" not in ctx.text and "2023-10-02" not in ctx.text  # not in the body
        assert ctx.title == f"{doc.title} > {doc.sections[0].title}"
        user = load_answer_prompt("default").messages(query, [ctx], dataset="multihop_rag")[1]["content"]
        assert "Source: The Example Ledger | Published at: 2023-10-02T09:15:00+00:00" in user
