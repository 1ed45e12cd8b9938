"""output.processed_docs: each document's chunk tree as Markdown, from the real hierarchical chunker."""

from __future__ import annotations

from pathlib import Path

from ragbench.ingest.hierarchical import HierarchicalChunker
from ragbench.processed_docs import FOLDER, file_names, write
from ragbench.types import Document, Paragraph, Section

DOCS = [
    Document(doc_id="paper/1", title="A paper", sections=(
        Section(title="Intro", paragraphs=(Paragraph(text="First sentence here. Second one follows.", ref="P1"),)),
        Section(title="Method", paragraphs=(Paragraph(text="We count words.", ref="P2"),)),
    )),
    Document(doc_id="paper:1", title="Same safe name", text="Only text. Two sentences."),
]


def test_tree_as_markdown(tmp_path: Path) -> None:
    tree = HierarchicalChunker().chunk(DOCS)
    out = write(tmp_path, tree)
    assert out == tmp_path / FOLDER
    names = file_names(["paper/1", "paper:1"])
    assert names["paper/1"] != names["paper:1"] and all(n.startswith("paper_1-") for n in names.values())
    assert sorted(p.name for p in out.iterdir()) == sorted([*names.values(), "index.md"])
    text = (out / names["paper/1"]).read_text()
    # every chunk of the document appears with its id, in the chunker's order, parents before children
    def preorder(cid: str) -> list[str]:
        return [cid, *(i for child in tree[cid].children for i in preorder(child))]

    ids = preorder("paper/1")
    assert text.startswith("# document `paper/1` — A paper\n") and len(ids) == 8
    positions = [text.index(f"`{cid}`") for cid in ids]
    assert positions == sorted(positions)
    for c in tree.chunks.values():
        if c.doc_id == "paper/1" and c.level.name == "SENTENCE":
            assert f"- `{c.chunk_id}` {c.text.strip()}" in text
        if c.doc_id == "paper/1" and c.level.name == "PARAGRAPH":
            assert f"paragraph `{c.chunk_id}`" in text and c.text.strip() in text
    assert "refs: `P1`" in text and "section `" in text
    index = (out / "index.md").read_text()
    assert f"[{names['paper/1']}]({names['paper/1']})" in index and "sentence" in index


def test_reserved_and_plain_names() -> None:
    names = file_names(["index", "doc-1.v2"])
    assert names["doc-1.v2"] == "doc-1.v2.md" and names["index"].startswith("index-")
