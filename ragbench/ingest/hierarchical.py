"""Hierarchical chunker: document > section > paragraph > sentence, deterministic ids and parent links."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragbench.errors import ConfigError
from ragbench.ingest.sections import split_sections
from ragbench.ingest.sentences import pack, split_long, split_sentences
from ragbench.types import Chunk, ChunkTree, Document, Level, Section

SEARCH_LEVELS = {"sentence": Level.SENTENCE, "paragraph": Level.PARAGRAPH}


class HierarchicalChunker:
    """Builds the chunk tree. Ids: ``<doc>``, ``<doc>#s3``, ``<doc>#s3.p2``, ``<doc>#s3.p2.t0``.

    ``max_paragraph_chars`` splits over-long paragraphs into several paragraph chunks at sentence
    boundaries; ``max_sentence_chars`` cuts over-long sentences at word boundaries.
    """

    def __init__(
        self,
        *,
        search_level: str = "sentence",
        max_paragraph_chars: int = 2000,
        max_sentence_chars: int = 600,
        min_sentence_chars: int = 1,
    ) -> None:
        if search_level not in SEARCH_LEVELS:
            raise ConfigError(
                f"chunker.search_level={search_level!r} is not valid; choose one of {list(SEARCH_LEVELS)}"
            )
        if max_sentence_chars < 20 or max_paragraph_chars < max_sentence_chars:
            raise ConfigError(
                "chunker.max_sentence_chars must be >= 20 and <= chunker.max_paragraph_chars "
                f"(got {max_sentence_chars} and {max_paragraph_chars})"
            )
        self.search_level = search_level
        self.max_paragraph_chars = max_paragraph_chars
        self.max_sentence_chars = max_sentence_chars
        self.min_sentence_chars = min_sentence_chars

    def params(self) -> Mapping[str, Any]:
        """What changes the tree: part of the chunk key."""
        return {
            "chunker": type(self).__qualname__,
            "search_level": self.search_level,
            "max_paragraph_chars": self.max_paragraph_chars,
            "max_sentence_chars": self.max_sentence_chars,
            "min_sentence_chars": self.min_sentence_chars,
        }

    def _sentences(self, text: str) -> list[str]:
        out: list[str] = []
        for s in split_sentences(text):
            out.extend(split_long(s, self.max_sentence_chars))
        merged: list[list[str]] = []  # joined once at the end: gluing string by string is quadratic
        for s in out:  # glue fragments shorter than min_sentence_chars onto the previous sentence
            if merged and len(s) < self.min_sentence_chars:
                merged[-1].append(s)
            else:
                merged.append([s])
        return [" ".join(parts) for parts in merged]

    def chunk(self, docs: Sequence[Document]) -> ChunkTree:
        """The tree of all documents; every chunk knows its level, parent and children."""
        chunks: dict[str, Chunk] = {}
        for doc in docs:
            sections = list(doc.sections) or split_sections(doc.text or "", default_title=doc.title)
            section_ids = [self._section(doc, si, sec, chunks) for si, sec in enumerate(sections)]
            texts = [chunks[s].text for s in section_ids]
            chunks[doc.doc_id] = Chunk(
                chunk_id=doc.doc_id, doc_id=doc.doc_id, level=Level.DOCUMENT,
                text="\n\n".join([doc.title, *texts]), parent_id=None, children=tuple(section_ids),
                heading=(doc.title,), meta=dict(doc.meta),
            )
        return ChunkTree(chunks=chunks, search_level=SEARCH_LEVELS[self.search_level])

    def _section(self, doc: Document, si: int, sec: Section, chunks: dict[str, Chunk]) -> str:
        sid = f"{doc.doc_id}#s{si}"
        heading = (doc.title, sec.title)
        para_ids: list[str] = []
        refs: list[str] = [sec.ref] if sec.ref else []
        n = 0
        for para in sec.paragraphs:
            sentences = self._sentences(para.text)
            if not sentences:
                continue
            for group in pack(sentences, self.max_paragraph_chars):
                pid = f"{sid}.p{n}"
                n += 1
                sent_ids = []
                for ti, sentence in enumerate(group):
                    tid = f"{pid}.t{ti}"
                    chunks[tid] = Chunk(
                        chunk_id=tid, doc_id=doc.doc_id, level=Level.SENTENCE, text=sentence,
                        parent_id=pid, refs=(para.ref,) if para.ref else (), heading=heading,
                    )
                    sent_ids.append(tid)
                chunks[pid] = Chunk(
                    chunk_id=pid, doc_id=doc.doc_id, level=Level.PARAGRAPH, text=" ".join(group),
                    parent_id=sid, children=tuple(sent_ids), refs=(para.ref,) if para.ref else (),
                    heading=heading, meta=dict(para.meta),
                )
                para_ids.append(pid)
                if para.ref and para.ref not in refs:
                    refs.append(para.ref)
        body = "\n".join(chunks[p].text for p in para_ids)
        chunks[sid] = Chunk(
            chunk_id=sid, doc_id=doc.doc_id, level=Level.SECTION, text=f"{sec.title}\n{body}",
            parent_id=doc.doc_id, children=tuple(para_ids), refs=tuple(refs), heading=heading,
            meta=dict(sec.meta),
        )
        return sid
