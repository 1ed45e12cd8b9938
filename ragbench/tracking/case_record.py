"""The reproducible part of a ``cases.jsonl`` row: everything ``ragbench.verify`` needs to recompute a
case's retrieval, context and answer scores without the corpus, the index or any model.

Per case: the ranked chunk ids down to the deepest cut-off any metric uses, with each hit's document
and the evidence units it covers; the qrels at chunk and evidence-unit level; the evidence strings;
the texts of the top-k hits; every context the generator read (its text, the dataset ids it holds,
whether it covers evidence); the gold answers and the query facts the answer metrics read; per model judge and metric, the
rubric name and the judge's reasoning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragbench.evidence import Coverage, EvidenceMap, context_has_evidence, hit_units
from ragbench.judge.context import context_refs, openviking_evidence
from ragbench.judge.document import record_fields as document_record
from ragbench.judge.retrieval import metric_ks
from ragbench.types import CaseResult, ChunkTree

RECORD_VERSION = 1
CASES_ARTIFACT = "cases.jsonl"
REUSED_FROM = "ragbench.reused_from"  # a resumed job's copy names the run that ran it (ragbench.lifecycle)


def cases_run_id(run: Any) -> str:
    """The run whose ``cases.jsonl`` holds ``run``'s cases: the run itself, or for a copy that resume put in a
    later sweep (params, metrics and tags only) the run that ran the job."""
    return str(run.data.tags.get(REUSED_FROM) or run.info.run_id)
EMPTY_MAP = EvidenceMap(anchors=(), relevance=(), texts=(), how=())


def _plain(meta: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k): v for k, v in meta.items() if isinstance(v, (str, int, float, bool)) or v is None}


def case_record(case: CaseResult, tree: ChunkTree, emap: EvidenceMap | None, *, dataset: str,
                topk: int, coverage: Coverage | None = None) -> dict[str, Any]:
    """The record fields of one case (merged into its ``cases.jsonl`` row); ``coverage``: the query's
    ``Coverage`` on ``tree`` when the job kept one (hits and contexts share their chunks' coverage)."""
    emap = emap or EMPTY_MAP
    ranked = list(case.hits[: max(metric_ks(topk))])
    matched = bool(emap.matched)
    query = case.query
    cov = coverage if coverage is not None and coverage.emap is emap else Coverage(tree, emap)
    return {
        "record_version": RECORD_VERSION,
        "dataset": dataset,
        "topk": topk,
        "answers": list(query.answers),
        "query_meta": _plain(query.meta),
        "doc_ids": list(query.doc_ids),
        "ranked_ids": [h.chunk_id for h in ranked],
        "ranked_doc_ids": [tree[h.chunk_id].doc_id for h in ranked],
        "hit_units": hit_units(tree, emap, ranked, cov),
        "qrels": {"chunk": cov.chunk_qrels() if matched else {}, "unit": cov.unit_qrels()},
        "evidence": {"matched": matched, "texts": list(emap.texts), "how": list(emap.how),
                     "openviking": openviking_evidence(query)},
        "topk_texts": [tree[h.chunk_id].text for h in ranked[:topk]],
        "contexts": [{"chunk_id": c.chunk_id, "title": c.title, "text": c.text, "parts": list(c.part_ids),
                      "refs": context_refs(tree, c), "has_evidence": context_has_evidence(tree, emap, c, cov)}
                     for c in case.contexts],
        "judge_notes": {name: dict(notes) for name, notes in case.judge_notes.items()},
        **document_record(case.scores, query, emap, tree),  # doc_qrels, doc_ignore: retrieval/doc/* cases
        # trace=true: candidates and scores per stage, gold_entered / gold_lost; rerank_fallback when any
        **({"trace": dict(case.trace)} if case.trace else {}),
    }
