"""Document-level retrieval metrics (``retrieval/doc/<m>_at_k``) for any chunking.

A document is ranked by its first hit: the document ranking of a hit list is its hits' documents in order,
each kept at its first occurrence (later hits on a ranked document are dropped), as passage runs are
turned into document runs (MaxP) and as ``trec_eval`` scores a document run. The metrics at k read the
first k documents of the job's top-k hits; with one unit per document (``chunker=document``) that is the
documents' own ranking, as BEIR/MTEB score it. With ``ignore_identical_ids`` (BEIR) the document whose id
equals the question's id is removed before ranking, and the case records whether it was retrieved
(``retrieval/doc/self_hit_ignored`` 1/0: its mean is the share of questions that retrieved themselves).

Relevance: each evidence item's document (``Evidence.doc_id``, else the documents its matched anchors lie
in) with the item's grade, the highest grade kept per document. Computed for datasets whose relevance is
judged per document (the adapter's ``evidence_level == "document"``: BEIR; MultiHop-RAG, whose evidence facts
name their articles; FinanceBench, whose evidence pages lie in the question's filing; a custom set whose every
item names a document) when the search spans the corpus: under ``retrieval.scope=document`` a question searches
only its own documents, so its document ranking would be right by construction and none is logged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragbench.evidence import EvidenceMap
from ragbench.judge.ir import retrieval_metrics
from ragbench.judge.retrieval import IR_METRICS, MRR_DEPTH
from ragbench.metric_info import MetricInfo, Rank
from ragbench.types import ChunkTree, Hit, Query

PREFIX = "retrieval/doc/"
SELF_HIT = f"{PREFIX}self_hit_ignored"
# BEIR's k_values; each is reported when the job's top-k reaches it, with the job's top-k itself
STANDARD_KS = (1, 3, 5, 10, 100, 1000)

_DOC = "; the top-k hits' documents, each at its first hit, against the evidence documents (per-document datasets, " \
       "corpus scope); averaged over the queries with matched evidence"
METRICS: dict[str, MetricInfo] = {
    **{f"{PREFIX}{m}_at_<k>": MetricInfo(d + _DOC, f"trec_eval (pytrec_eval) {src}; BEIR", kind="diagnostic")
       for m, (d, src) in IR_METRICS.items()},
    SELF_HIT: MetricInfo("1 when the question's own id was retrieved and removed before ranking (its mean: the share "
                         "of questions that retrieved themselves)", "BEIR ignore_identical_ids", kind="diagnostic"),
}
# MRR has one value per ranking, at a cut-off in its name (retrieval/doc/mrr_at_10, as retrieval/mrr_at_10):
# the documents of the first MRR_DEPTH hits, whatever the top-k, so the jobs of a top-k sweep that rank the
# same hits show one MRR (the retired retrieval/doc/mrr read as deep as the job scored: max(10, top-k) hits)
DOC_MRR_KEY = f"{PREFIX}mrr_at_{MRR_DEPTH}"
METRICS[f"{PREFIX}mrr_at_<k>"] = MetricInfo(
    f"1 / rank of the first relevant document within k; mrr_at_{MRR_DEPTH} reads the documents of the first "
    f"{MRR_DEPTH} hits whatever the top-k, the others the first k documents" + _DOC,
    "trec_eval (pytrec_eval) recip_rank on the first k documents; BEIR MRR@k", kind="diagnostic")
# the published tables' figure leads a per-document sweep: nDCG@10, else nDCG at the job's top-k
METRICS[f"{PREFIX}ndcg_at_<k>"] = MetricInfo(
    METRICS[f"{PREFIX}ndcg_at_<k>"].definition, METRICS[f"{PREFIX}ndcg_at_<k>"].source, kind="diagnostic",
    ranks=(Rank(f"{PREFIX}ndcg_at_10", "lead", 0), Rank(f"{PREFIX}ndcg_at_topk", "lead", 1)))


def document_ks(topk: int) -> list[int]:
    """Document cut-offs reported: BEIR's 1, 3, 5, 10, 100, 1000 up to the job's top-k, and the top-k."""
    return sorted({*(k for k in STANDARD_KS if k <= topk), topk})


def is_document_level(dataset: Any) -> bool:
    """Whether the dataset adapter declares relevance judged per document."""
    return getattr(dataset, "evidence_level", "passage") == "document"


def document_ranking(ranked_doc_ids: Sequence[str], ignore: Sequence[str] = ()) -> list[str]:
    """The document ranking of a hit list (each hit's document, best first): each document at its first hit,
    the documents in ``ignore`` removed."""
    skip = set(ignore)
    return [d for d in dict.fromkeys(ranked_doc_ids) if d not in skip]


def document_qrels(query: Query, emap: EvidenceMap, tree: ChunkTree) -> dict[str, int]:
    """Graded relevance per document: each evidence item's document with its grade (highest kept)."""
    out: dict[str, int] = {}
    for i, ev in enumerate(query.evidence):
        docs = [ev.doc_id] if ev.doc_id else [tree[a].doc_id for a in (emap.anchors[i] if i < len(emap.anchors) else ())]
        for doc in docs:
            out[doc] = max(out.get(doc, ev.relevance), ev.relevance)
    return out


def document_scores(ranked_doc_ids: Sequence[str], qrels: Mapping[str, int], ks: Sequence[int],
                    ignore: Sequence[str] | None = None) -> dict[str, float]:
    """``retrieval/doc/<m>_at_k`` of a hit list's documents (trec_eval semantics,
    ``judge.ir.retrieval_metrics``) and ``DOC_MRR_KEY``, the MRR of the documents of the first
    ``MRR_DEPTH`` hits (never an uncut MRR); with ``ignore`` (BEIR's identical ids) also ``SELF_HIT``. None
    without qrels."""
    if not qrels:
        return {}
    ranking = document_ranking(ranked_doc_ids, ignore or ())
    out = {f"{PREFIX}{k}": v for k, v in retrieval_metrics(ranking, qrels, ks).items() if k != "mrr"}
    head = document_ranking(ranked_doc_ids[:MRR_DEPTH], ignore or ())
    out[DOC_MRR_KEY] = retrieval_metrics(head, qrels, [MRR_DEPTH])[f"mrr_at_{MRR_DEPTH}"]
    if ignore is not None:
        out[SELF_HIT] = 1.0 if any(d in set(ignore) for d in ranked_doc_ids) else 0.0
    return out


def case_document_scores(dataset: Any, tree: ChunkTree, emap: EvidenceMap, query: Query, hits: Sequence[Hit],
                         topk: int, *, scope: str = "corpus") -> dict[str, float]:
    """A case's document-level scores when the dataset judges relevance per document and the search spans the
    corpus (``scope``), else none."""
    if not is_document_level(dataset) or scope == "document":
        return {}
    ignore = [query.qid] if query.meta.get("ignore_identical_id") else None
    return document_scores([tree[h.chunk_id].doc_id for h in hits], document_qrels(query, emap, tree),
                           document_ks(topk), ignore)


def record_fields(case_scores: Mapping[str, float], query: Query, emap: EvidenceMap,
                  tree: ChunkTree) -> dict[str, Any]:
    """What a case record keeps for ``ragbench.verify`` to recompute the document scores: the document
    qrels and the ids ignored (none when the case has no document scores)."""
    if not any(k.startswith(PREFIX) for k in case_scores):
        return {}
    return {"doc_qrels": document_qrels(query, emap, tree), "doc_ignore": [query.qid] if SELF_HIT in case_scores else None}


def scores_from_record(row: Mapping[str, Any]) -> dict[str, float]:
    """The document scores of a ``cases.jsonl`` row (``record_fields`` + ranked document ids + top-k)."""
    if "doc_qrels" not in row:
        return {}
    return document_scores(row["ranked_doc_ids"], row["doc_qrels"], document_ks(int(row["topk"])), row["doc_ignore"])
