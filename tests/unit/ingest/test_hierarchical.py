"""The chunk tree of both bundled samples against counts taken straight from the raw files."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from ragbench.datasets.locomo import LocomoAdapter
from ragbench.datasets.qasper import QasperAdapter
from ragbench.errors import ConfigError
from ragbench.ingest.hierarchical import HierarchicalChunker
from ragbench.types import Document, Level, Paragraph, Section

SAMPLES = Path(str(resources.files("ragbench.datasets").joinpath("samples")))


def check_tree(tree):
    for c in tree.chunks.values():
        if c.level == Level.DOCUMENT:
            assert c.parent_id is None
        else:
            parent = tree[c.parent_id]
            assert parent.level == c.level + 1 and c.chunk_id in parent.children
            assert c.chunk_id.startswith(parent.chunk_id)
        for child in c.children:
            assert tree[child].parent_id == c.chunk_id


def test_locomo_tree_matches_the_raw_file():
    raw = json.loads((SAMPLES / "locomo/data/locomo10.json").read_text())
    docs = LocomoAdapter(name="locomo").load().documents
    tree = HierarchicalChunker().chunk(docs)
    check_tree(tree)
    sessions = [(conv["sample_id"], k) for conv in raw for k, v in conv["conversation"].items()
                if k.startswith("session_") and isinstance(v, list)]
    turns = [t for conv in raw for k, v in conv["conversation"].items()
             if k.startswith("session_") and isinstance(v, list) for t in v]
    assert len(tree.at_level(Level.DOCUMENT)) == len(raw) == 2
    assert len(tree.at_level(Level.SECTION)) == len(sessions) == 38
    paragraphs = tree.at_level(Level.PARAGRAPH)
    assert len(paragraphs) == len(turns) == 788
    assert [p.refs[0] for p in paragraphs] == [t["dia_id"] for t in turns]
    # each session carries its date in its title, each turn its speaker
    first = tree["conv-26#s0"]
    assert "DATE: 1:56 pm on 8 May, 2023" in first.text.splitlines()[0]
    assert tree["conv-26#s0.p0"].text.startswith("Caroline: ")
    # sentences partition their paragraph's text
    for p in paragraphs[:100]:
        assert " ".join(tree[s].text for s in p.children).split() == p.text.split()


def test_qasper_tree_matches_the_raw_file():
    raw = json.loads((SAMPLES / "qasper/qasper-train-v0.3.json").read_text())
    docs = QasperAdapter(name="qasper").load().documents
    tree = HierarchicalChunker().chunk(docs)
    check_tree(tree)
    n_paragraphs = sum(
        1 + sum(1 for s in paper["full_text"] for p in s["paragraphs"] if p.strip())
        + len(paper["figures_and_tables"])
        for paper in raw.values()
    )
    assert len(tree.at_level(Level.DOCUMENT)) == 3
    assert len(tree.at_level(Level.PARAGRAPH)) == n_paragraphs
    captions = [p for p in tree.at_level(Level.PARAGRAPH) if "Figures and tables" in p.heading]
    assert len(captions) == sum(len(p["figures_and_tables"]) for p in raw.values())


def test_ids_are_deterministic():
    docs = QasperAdapter(name="qasper").load().documents
    a = HierarchicalChunker().chunk(docs)
    b = HierarchicalChunker().chunk(docs)
    assert list(a.chunks) == list(b.chunks)
    assert [c.text for c in a.chunks.values()] == [c.text for c in b.chunks.values()]


def test_long_paragraphs_split_cleanly_and_raw_text_gets_sections():
    long_para = " ".join(f"Sentence number {i} is here." for i in range(40))
    doc = Document(doc_id="d", title="T", sections=(Section(title="S", paragraphs=(Paragraph(long_para),)),))
    tree = HierarchicalChunker(max_paragraph_chars=200, max_sentence_chars=100).chunk([doc])
    paras = tree.at_level(Level.PARAGRAPH)
    assert len(paras) > 1 and all(len(p.text) <= 200 for p in paras)
    assert " ".join(p.text for p in paras) == long_para
    raw = Document(doc_id="r", title="Raw", text="# A\none. two.\n\n## B\nthree.")
    tree = HierarchicalChunker(search_level="paragraph").chunk([raw])
    assert [s.heading[-1] for s in tree.at_level(Level.SECTION)] == ["A", "A > B"]
    assert tree.search_level == Level.PARAGRAPH and len(tree.searchable()) == 2


def test_invalid_options_name_the_key():
    with pytest.raises(ConfigError, match="chunker.search_level"):
        HierarchicalChunker(search_level="word")
