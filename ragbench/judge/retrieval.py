"""Retrieval metrics of one query at chunk level and at the dataset's evidence unit.

``retrieval_scores`` reads the chunk tree; ``scores_from_record`` computes the same numbers from what
``cases.jsonl`` records (ranked ids, the units each hit covers, qrels, hit texts), so
``ragbench.verify`` reuses the one rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ragbench.evidence import Coverage, EvidenceMap, evidence_text_recall, hit_units
from ragbench.judge.ir import covering_metrics, retrieval_metrics
from ragbench.metric_info import Column, MetricInfo, Rank
from ragbench.types import ChunkTree, Hit

# MRR is reported at a fixed depth (retrieval/mrr_at_10), so a top-k sweep that ranks the same hits shows one
# MRR; the depth is one of the cut-offs every job reports, so every job scores (and searches) at least 10 hits
MRR_DEPTH = 10
BASE_KS = (1, 3, 5, MRR_DEPTH)
MRR_KEY = f"retrieval/mrr_at_{MRR_DEPTH}"  # present exactly when a case has retrieval scores


_TREC = "trec_eval (pytrec_eval)"
_UNIT = ", one rank per hit over the evidence units it covers (judge.ir.covering_metrics)"
_PER_QUERY = "; averaged over the queries with matched evidence (the others are counted apart)"
# retrieval figures are diagnostics: a query without matched evidence has none, and is not counted 0
IR_METRICS = {  # metric -> (definition, trec_eval measure)
    "hit": ("a relevant hit in the first k", "success_k"),
    "recall": ("relevant ids covered by the first k / R", "recall_k"),
    "precision": ("relevant hits in the first k / k", "P_k"),
    "ndcg": ("DCG of the first k (log2 discount) / ideal DCG", "ndcg_cut_k"),
    "map": ("average precision cut at k", "map_cut_k"),
    "mrr": ("1 / rank of the first relevant hit within k", "recip_rank"),
}
METRICS: dict[str, MetricInfo] = {
    **{f"retrieval/{m}_at_<k>": MetricInfo(d + _PER_QUERY, f"{_TREC} {src}", "evidence units" + _UNIT,
                                          kind="diagnostic") for m, (d, src) in IR_METRICS.items()},
    **{f"retrieval/chunk/{m}_at_<k>": MetricInfo(d + _PER_QUERY, f"{_TREC} {src}", "over the ranked chunks",
                                                kind="diagnostic") for m, (d, src) in IR_METRICS.items()},
    "retrieval/evidence_text_recall": MetricInfo(
        "share of the gold evidence texts found in the top-k hit texts" + _PER_QUERY, "ragbench.evidence",
        kind="diagnostic"),
    "retrieval/doc_recall_at_<k>": MetricInfo(
        "share of the gold evidence articles that a top-k hit comes from" + _PER_QUERY,
        "MultiHop-RAG EvidenceRecall@K", "only for adapters that declare doc_recall", kind="diagnostic"),
}
# the sweep table's columns (the job's own top-k under one name: in a top-k sweep these differ, @5 would not)
# and its ranking of a retrieval-only sweep, which has no answer/f1
METRICS["retrieval/hit_at_<k>"] = replace(METRICS["retrieval/hit_at_<k>"],
                                          columns=(Column("retrieval/hit_at_topk", "hit@k", 2),))
METRICS["retrieval/mrr_at_<k>"] = replace(METRICS["retrieval/mrr_at_<k>"], columns=(Column(MRR_KEY, "mrr@10", 3),),
                                          ranks=(Rank(MRR_KEY, "fallback"),))
METRICS["retrieval/recall_at_<k>"] = replace(METRICS["retrieval/recall_at_<k>"],
                                             columns=(Column("retrieval/recall_at_topk", "rec@k", 7),))


def metric_ks(topk: int) -> list[int]:
    """Cut-offs reported: 1, 3, 5, 10 and the job's top-k."""
    return sorted({*BASE_KS, topk})


def scores_from_record(
    ranked: Sequence[str], covered: Sequence[Sequence[str]], chunk_qrels: Mapping[str, int],
    units_qrels: Mapping[str, int], ks: Sequence[int], evidence_texts: Sequence[str],
    topk_texts: Sequence[str],
) -> dict[str, float]:
    """``retrieval/chunk/<m>_at_k`` over the ranked chunks; ``retrieval/<m>_at_k`` over evidence units, one
    rank per hit (``judge.ir.covering_metrics``); and ``retrieval/evidence_text_recall`` of the top-k hit
    texts."""
    return _with_text_recall(ranking_scores(ranked, covered, chunk_qrels, units_qrels, ks), evidence_texts,
                             topk_texts)


def ranking_scores(ranked: Sequence[str], covered: Sequence[Sequence[str]], chunk_qrels: Mapping[str, int],
                   units_qrels: Mapping[str, int], ks: Sequence[int]) -> dict[str, float]:
    """The scores of ``scores_from_record`` that read the ranking alone (all but the evidence text recall).
    Each metric at k reads the first k hits; MRR only at its cut-offs (``mrr_at_k``), never uncut, so
    its value does not depend on how deep the job scored."""
    out = {f"retrieval/chunk/{key}": value for key, value in retrieval_metrics(ranked, chunk_qrels, ks).items()
           if key != "mrr"}
    out.update({f"retrieval/{key}": value for key, value in covering_metrics(covered, units_qrels, ks).items()
                if key != "mrr"})
    return out


def _with_text_recall(out: dict[str, float], evidence_texts: Sequence[str],
                      topk_texts: Sequence[str]) -> dict[str, float]:
    rec = evidence_text_recall(evidence_texts, topk_texts)
    if rec is not None:
        out["retrieval/evidence_text_recall"] = rec
    return out


def doc_recall_scores(ranked_doc_ids: Sequence[str], gold_doc_ids: Sequence[str],
                      ks: Sequence[int]) -> dict[str, float]:
    """MultiHop-RAG's document-level EvidenceRecall@K: the share of the gold evidence articles that at
    least one of the top-k hits comes from (``retrieval/doc_recall_at_k``); none without gold articles."""
    gold = set(gold_doc_ids)
    if not gold:
        return {}
    return {f"retrieval/doc_recall_at_{k}": len(gold & set(ranked_doc_ids[:k])) / len(gold) for k in ks}


def retrieval_scores(
    tree: ChunkTree, emap: EvidenceMap, hits: Sequence[Hit], ks: Sequence[int], topk: int,
    coverage: Coverage | None = None,
) -> dict[str, float]:
    """The scores of ``scores_from_record`` for hits on ``tree``. Queries without matched evidence get
    no retrieval scores (they are counted apart). ``coverage``: the query's ``Coverage`` on ``tree``, when
    the caller keeps one."""
    if not emap.matched:
        return {}
    ranked = [h.chunk_id for h in hits]
    texts = ([t for t in emap.texts if t], [tree[h.chunk_id].text for h in hits[:topk]])
    if coverage is None:
        cov = Coverage(tree, emap)
        return scores_from_record(ranked, hit_units(tree, emap, hits, cov), cov.chunk_qrels(), cov.unit_qrels(),
                                  ks, *texts)
    # a kept Coverage outlives the job: the jobs of a top-k sweep that rank the same hits at the same
    # cut-offs (top-k 3 and 5 both score ranks 1, 3 and 5) take the ranking's scores computed once
    part = coverage.ranking_scores((tuple(ranked), tuple(ks)), lambda: ranking_scores(
        ranked, hit_units(tree, emap, hits, coverage), coverage.chunk_qrels(), coverage.unit_qrels(), ks))
    return _with_text_recall(dict(part), *texts)
