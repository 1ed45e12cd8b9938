"""A plain-Python RAG function to evaluate with ragbench (``system=python``): BM25 over the bundled Qasper
sample, then an extractive answer (the passage sentence sharing most words with the question). Standard
library + ragbench only, offline.

    python -m ragbench -m dataset=qasper system=python system.target=examples.my_rag:answer \
        system.params.top_k=1,4 system.params.unit=sentence,paragraph

Replace the body with your own pipeline: take the question (and your parameters), return the answer and
the ranked passages your generator read.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from ragbench.datasets.qasper import QasperAdapter
from ragbench.ingest.hierarchical import HierarchicalChunker
from ragbench.retrieval.bm25 import BM25Retriever
from ragbench.types import Level

identity = "my_rag v1"  # bump when the pipeline changes: ragbench caches replies under it
WORD = re.compile(r"[a-z0-9]+")
STOP = frozenset("a an and are as at be by did do does for from how in is it of on or the this to was what "
                 "which who why with".split())


@functools.lru_cache(maxsize=4)
def _index(unit: str) -> tuple[BM25Retriever, list[str], list[str]]:
    """BM25 over the corpus, split into ``unit``s (sentence | paragraph), built once per process."""
    docs = QasperAdapter(name="qasper").load().documents
    tree = HierarchicalChunker(search_level=unit).chunk(docs)
    chunks = [c for c in tree.chunks.values() if c.level == Level[unit.upper()]]
    ids, texts = [c.chunk_id for c in chunks], [c.text for c in chunks]
    retriever = BM25Retriever()
    retriever.build(ids=ids, texts=texts, vectors=None)
    return retriever, ids, texts


def _words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if w not in STOP}


def _extract(question: str, passages: list[str]) -> str:
    """The sentence of the passages that shares most content words with the question."""
    asked = _words(question)
    sentences = [s for p in passages for s in re.split(r"(?<=[.!?])\s+", p) if s.strip()]
    return max(sentences, key=lambda s: len(asked & _words(s)), default="")


def answer(question: str, *, top_k: int = 3, unit: str = "paragraph",
           contexts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The RAG system ragbench calls once per question. ``contexts`` (given only when ragbench retrieved,
    ``retrieval=bm25 expander=parent``) replaces this function's own retrieval."""
    if contexts is None:
        retriever, _, _ = _index(unit)
        hits = retriever.search(texts=[question], vectors=None, k=int(top_k))[0]
        by_id = dict(zip(*_index(unit)[1:], strict=True))
        contexts = [{"id": h.chunk_id, "text": by_id[h.chunk_id], "score": h.score} for h in hits]
    text = _extract(question, [c["text"] for c in contexts])
    return {"answer": text, "contexts": contexts, "metadata": {"top_k": top_k, "unit": unit}}
