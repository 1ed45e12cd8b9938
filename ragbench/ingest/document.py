"""Document chunker: each document is one searched unit (BEIR's and MTEB's protocol)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragbench.types import Chunk, ChunkTree, Document, Level

UNIT = "#d"  # the unit's id is ``<doc>#d``; its parent, the document node, is ``<doc>``


def document_of(chunk_id: str) -> str:
    """The document id of a unit id (``<doc>#d`` -> ``<doc>``); other ids unchanged."""
    return chunk_id.removesuffix(UNIT)


def unit_text(doc: Document) -> str:
    """The whole text of a document: its raw text, or its paragraphs in order with each section title that
    is not the document's own (a BEIR document's one paragraph is ``title + " " + text``)."""
    if not doc.sections:
        return (doc.text or "").strip()
    lines: list[str] = []
    for sec in doc.sections:
        if sec.title and sec.title != doc.title and sec.paragraphs:
            lines.append(sec.title)
        lines.extend(p.text for p in sec.paragraphs if p.text.strip())
    return "\n".join(lines)


class DocumentChunker:
    """One unit per document, searched whole: a ``<doc>`` node and its single child ``<doc>#d`` at paragraph
    level holding the document's text (``unit_text``) and every dataset id its paragraphs carry, so id and
    text evidence map onto it as onto hierarchical chunks. Nothing is cut here: a dense encoder truncates
    the unit at its max sequence length (all-MiniLM-L6-v2: 256 word pieces), as MTEB's evaluation does;
    BM25 indexes the whole text. A document without text has no unit (nothing to retrieve)."""

    def params(self) -> Mapping[str, Any]:
        """What changes the tree: part of the chunk key."""
        return {"chunker": type(self).__qualname__}

    def chunk(self, docs: Sequence[Document]) -> ChunkTree:
        """The tree of all documents: document node -> one searched unit."""
        chunks: dict[str, Chunk] = {}
        for doc in docs:
            text = unit_text(doc)
            refs = tuple(dict.fromkeys(r for s in doc.sections for r in (s.ref, *(p.ref for p in s.paragraphs)) if r))
            children: tuple[str, ...] = ()
            if text:
                uid = f"{doc.doc_id}{UNIT}"
                chunks[uid] = Chunk(chunk_id=uid, doc_id=doc.doc_id, level=Level.PARAGRAPH, text=text,
                                    parent_id=doc.doc_id, refs=refs, heading=(doc.title,))
                children = (uid,)
            chunks[doc.doc_id] = Chunk(chunk_id=doc.doc_id, doc_id=doc.doc_id, level=Level.DOCUMENT, text=text,
                                       parent_id=None, children=children, refs=refs, heading=(doc.title,),
                                       meta=dict(doc.meta))
        return ChunkTree(chunks=chunks, search_level=Level.PARAGRAPH)
