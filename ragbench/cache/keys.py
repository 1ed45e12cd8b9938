"""The cache's keys, in one place: the pipeline builds entries under them, the LLM client stores its
replies under them and ``ragbench.plan`` looks them up without running a stage. Every key is ``make_key``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragbench.cache.entries import corpus_digest, library_versions, texts_digest
from ragbench.cache.store import make_key
from ragbench.types import Answer, Context, Document, Query


def chunks_key(documents: Sequence[Document], chunker: Any) -> str:
    return make_key({"stage": "chunks", "corpus": corpus_digest(documents), "chunker": dict(chunker.params())})


def index_key(chunks: str, embedder_identity: str) -> str:
    # library versions in the key: after `pip install -U numpy` the vectors are rebuilt, not refused
    return make_key({"stage": "index", "chunks": chunks, "embedder": embedder_identity, "libraries": library_versions()})


def retrieval_key(index_fp: str, query_texts: Sequence[str], depth: int) -> str:
    return make_key({"stage": "retrieval", "index": index_fp, "queries": texts_digest(list(query_texts)),
                     "k": depth, "libraries": library_versions()})


def answer_key(generator_identity: str, query: Query, contexts: Sequence[Context], repeat: int | None = None) -> str:
    """``repeat``: the repeat's index under ``repeats=N`` (N > 1), so each repeat is its own entry; None
    (``repeats=1``) leaves the key as it always was."""
    return make_key({"stage": "answers", "generator": generator_identity, "qid": query.qid,
                     **({"repeat": repeat} if repeat is not None else {}),
                     "question": query.text, "type": query.question_type,
                     "contexts": [[x.title, x.text] for x in contexts],
                     # a conversation's turn: the history the generator reads (ragbench.generate.history)
                     **({"history": [[t.text, t.answer] for t in query.history]} if query.history else {})})


def verdict_key(judge_identity: str, answer_key: str, answer: Answer, query: Query) -> str:
    return make_key({"stage": "verdicts", "judge": judge_identity, "answer": answer_key, "answer_text": answer.text,
                     "gold": list(query.answers), "answerable": query.answerable})


def reply_key(kind: str, request: Mapping[str, Any]) -> str:
    """An LLM reply (``kind`` chat or embedding) to ``request`` (model, api_base, messages or input, params;
    never the API key): for replies without a stage record of their own (query transforms, API embeddings)."""
    return make_key({"stage": "llm", "kind": kind, "request": dict(request)})
