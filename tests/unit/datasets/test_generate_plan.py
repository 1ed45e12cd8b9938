"""Evidence plan of `datasets generate`: stratified over documents and sections, seeded, typed."""

from __future__ import annotations

import pytest

from ragbench.datasets.evalgen.plan import has_date, passages, plan, stratified_order, type_quota
from ragbench.errors import ConfigError
from ragbench.ingest.hierarchical import HierarchicalChunker
from ragbench.types import Document, Level

FILLER = "with enough plain words in it to count as real evidence for a question"


def corpus(n_docs: int = 3, n_sections: int = 3, n_paras: int = 2, dated: bool = True) -> list[Document]:
    docs = []
    for d in range(n_docs):
        parts = [f"# Doc {d}"]
        for s in range(n_sections):
            parts.append(f"## Part {s}")
            for p in range(n_paras):
                date = f" in {1990 + d * 10 + s}" if dated and p == 0 and s == 1 else ""
                parts.append(f"Paragraph {p} of part {s} of doc {d} about topic{d}x{s}{date} {FILLER}.")
        docs.append(Document(doc_id=f"d{d}.md", title=f"Doc {d}", text="\n\n".join(parts)))
    return docs


def tree_of(docs):
    return HierarchicalChunker().chunk(docs)


def test_first_slots_cover_every_document_and_section():
    tree = tree_of(corpus())
    order = stratified_order(tree, __import__("random").Random(1), min_words=8)
    assert len(order) == 18
    first_docs = {tree[c].doc_id for c in order[:3]}
    assert first_docs == {"d0.md", "d1.md", "d2.md"}
    first_sections = {tree[c].parent_id for c in order[:9]}
    assert len(first_sections) == 9  # every section of every document before any repeats


def test_plan_is_seeded():
    tree = tree_of(corpus())
    weights = {"factual": 2, "multi_hop": 1, "temporal": 1, "unanswerable": 1}
    assert plan(tree, n=10, weights=weights, seed=3) == plan(tree, n=10, weights=weights, seed=3)
    assert plan(tree, n=10, weights=weights, seed=3) != plan(tree, n=10, weights=weights, seed=4)


def test_types_follow_the_weights():
    assert type_quota({"factual": 4, "multi_hop": 2, "comparison": 1, "temporal": 1, "unanswerable": 2}, 10) == {
        "factual": 4, "multi_hop": 2, "comparison": 1, "temporal": 1, "unanswerable": 2}
    assert sum(type_quota({"factual": 1, "unanswerable": 2}, 7).values()) == 7


@pytest.mark.parametrize("weights", [{"trivia": 1}, {"factual": -1}, {"factual": 0}], ids=["unknown", "neg", "zero"])
def test_bad_weights_are_a_named_error(weights):
    with pytest.raises(ConfigError, match="(?s)types=.*fix: .*factual"):
        type_quota(weights, 5)


def test_temporal_slots_use_dated_paragraphs_and_two_passage_slots_span_sections():
    tree = tree_of(corpus())
    slots = plan(tree, n=20, weights={"temporal": 1, "multi_hop": 1, "comparison": 1}, seed=0)
    for s in slots:
        if s.question_type == "temporal":
            assert len(s.chunk_ids) == 1 and has_date(tree[s.chunk_ids[0]].text)
        else:
            a, b = (tree[c] for c in s.chunk_ids)
            assert a.parent_id != b.parent_id and a.level == b.level == Level.PARAGRAPH
            assert a.doc_id == b.doc_id  # another section of the same document comes first


def test_without_dates_or_second_section_the_slot_becomes_factual():
    undated = tree_of(corpus(dated=False))
    assert {s.question_type for s in plan(undated, n=4, weights={"temporal": 1}, seed=0)} == {"factual"}
    one_section = tree_of([Document(doc_id="a.txt", title="A", text=f"One paragraph only {FILLER}.")])
    assert {s.question_type for s in plan(one_section, n=3, weights={"multi_hop": 1}, seed=0)} == {"factual"}


def test_short_paragraphs_are_never_evidence():
    tree = tree_of([Document(doc_id="a.txt", title="A", text="Hi there.\n\nThanks!")])
    assert plan(tree, n=5, weights={"factual": 1}, seed=0) == []


def test_passages_carry_the_heading_path():
    tree = tree_of(corpus(n_docs=1))
    slot = plan(tree, n=1, weights={"factual": 1}, seed=0)[0]
    (p,) = passages(tree, slot.chunk_ids)
    assert p.title.startswith("Doc 0 > Part") and p.text == tree[slot.chunk_ids[0]].text
