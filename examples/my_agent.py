"""A small retrieval agent to evaluate hop by hop (``system=python``, docs/multi-step.md): over the bundled
MultiHop-RAG sample it searches BM25 once per sub-question (the question split at its conjunctions and
comparisons), then answers from what it found. It returns its trajectory, one step per search: ragbench
scores each step as a hop (per-hop recall, coverage, redundant hops) beside the final contexts and answer.

    python -m ragbench dataset=multihop_rag system=python system.target=examples.my_agent:answer

Standard library + ragbench only, offline. Replace the body with your agent: record each retrieval
step's query (or tool call) and the contexts it got.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from ragbench.datasets.multihop_rag import MultiHopRAGAdapter
from ragbench.ingest.hierarchical import HierarchicalChunker
from ragbench.query.decompose import split_rules
from ragbench.retrieval.bm25 import BM25Retriever

identity = "my_agent v1"  # bump when the agent changes: ragbench caches replies under it
WORD = re.compile(r"[a-z0-9]+")


@functools.lru_cache(maxsize=1)
def _index() -> tuple[BM25Retriever, dict[str, str]]:
    """BM25 over the sample's paragraphs, built once per process."""
    docs = MultiHopRAGAdapter(name="multihop_rag").load().documents
    tree = HierarchicalChunker(search_level="paragraph").chunk(docs)
    chunks = tree.searchable()
    retriever = BM25Retriever()
    retriever.build(ids=[c.chunk_id for c in chunks], texts=[c.text for c in chunks], vectors=None)
    return retriever, {c.chunk_id: c.text for c in chunks}


def answer(question: str, *, top_k: int = 3) -> dict[str, Any]:
    """One search per sub-question (each a trajectory step), the contexts merged in turn, an extractive
    answer: the sentence sharing most words with the question."""
    retriever, texts = _index()
    trajectory, merged = [], {}
    for sub in split_rules(question):
        hits = retriever.search(texts=[sub], vectors=None, k=int(top_k))[0]
        contexts = [{"id": h.chunk_id, "text": texts[h.chunk_id], "score": h.score} for h in hits]
        trajectory.append({"tool_call": {"name": "search", "arguments": {"query": sub}}, "contexts": contexts,
                           "output": f"{len(contexts)} passages"})
        merged.update({c["id"]: c for c in contexts})
    asked = set(WORD.findall(question.lower()))
    sentences = [s for c in merged.values() for s in re.split(r"(?<=[.!?])\s+", c["text"]) if s.strip()]
    best = max(sentences, key=lambda s: len(asked & set(WORD.findall(s.lower()))), default="")
    return {"answer": best, "contexts": list(merged.values()), "trajectory": trajectory}
