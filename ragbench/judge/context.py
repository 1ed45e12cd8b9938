"""Scores of the contexts the generator read: size, ragbench's evidence text recall, OpenViking recall.

One rule for the pipeline (``ragbench.cases``) and ``ragbench.verify``: both call ``context_scores``
with the context texts and the dataset ids each context holds.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragbench.evidence import evidence_text_recall
from ragbench.expand import count_tokens
from ragbench.judge.openviking import check_recall, render_resource
from ragbench.metric_info import Column, MetricInfo
from ragbench.types import ChunkTree, Context, Query

_TEXT_RECALL = ("share of the evidence texts found in the joined context texts (normalised substring, else >= 0.8 "
                "token coverage for evidence of >= 4 tokens); over the cases whose evidence matched the corpus")
# context figures are diagnostics: a case without matched evidence has none, and is not counted 0
METRICS = {
    "context/tokens": MetricInfo("tokens of the contexts the generator read (whitespace tokens)", "ragbench.expand "
                                 "count_tokens", higher_is_better=False, kind="diagnostic"),
    "context/evidence_text_recall": MetricInfo(_TEXT_RECALL, "ragbench.evidence evidence_text_recall",
                                               kind="diagnostic", columns=(Column("context/evidence_text_recall",
                                                                                  "ctx.rec", 4),)),
    "context/evidence_text_recall_per_1k_tokens": MetricInfo(
        "context/evidence_text_recall x 1000 / context/tokens (recall bought per 1k context tokens)", "ragbench",
        kind="diagnostic"),
    "context/openviking_recall": MetricInfo(
        "OpenViking's check_recall on its own adapter's evidence list: an evidence string is found verbatim "
        "(case-sensitive) in the joined contexts, else >= 80% of its >= 4 unique normalised tokens occur",
        "volcengine/OpenViking benchmark/RAG/src/core/metrics.py (ragbench.judge.openviking)",
        "a ragbench context is an expanded chunk, not an OpenViking resource of up to 8,000 characters",
        kind="diagnostic"),
    # computed by ragbench.cases from the answer's citations and ragbench.evidence.context_has_evidence
    "answer/citation_hit_rate": MetricInfo(
        "share of the contexts an answer cites ([ref_N]) that hold gold evidence; cases with a citation and "
        "matched evidence only", "ragbench", kind="diagnostic"),
}


def context_refs(tree: ChunkTree, context: Context) -> list[str]:
    """The dataset ids (LoCoMo dia_ids, pages, ...) of the chunks a context holds, in order."""
    parts = context.part_ids or (context.chunk_id,)
    # a system's context matched to no chunk (ragbench.systems) has no refs
    return list(dict.fromkeys(r for p in parts if p in tree.chunks for r in tree[p].refs))


def openviking_evidence(query: Query) -> list[str] | None:
    """The evidence list OpenViking's own adapter passes to ``check_recall`` for this question (set by
    the dataset adapter: ``Query.openviking``), None when that adapter skips the question. Datasets
    OpenViking has no adapter for: each item's text, or its dataset id when it has no text."""
    if query.openviking is not None:
        return list(query.openviking.evidence) if query.openviking.kept else None
    return [ev.text or ev.ref or "" for ev in query.evidence if ev.text or ev.ref]


def context_scores(texts: Sequence[str], refs: Sequence[Sequence[str]], evidence_texts: Sequence[str],
                   evidence: Sequence[str] | None, matched: bool) -> dict[str, float]:
    """``context/tokens``; ``context/evidence_text_recall`` (+ per 1k tokens) when some evidence
    matched the corpus; ``context/openviking_recall`` unless OpenViking's adapter skips the question
    (``evidence`` None; an empty list scores 0, as in OpenViking)."""
    tokens = sum(count_tokens(t) for t in texts)
    out = {"context/tokens": float(tokens)}
    rec = evidence_text_recall([t for t in evidence_texts if t], texts) if matched else None
    if rec is not None:
        out["context/evidence_text_recall"] = rec
        if tokens:
            out["context/evidence_text_recall_per_1k_tokens"] = rec * 1000.0 / tokens
    if evidence is not None:
        out["context/openviking_recall"] = check_recall(
            [render_resource(t, r) for t, r in zip(texts, refs, strict=True)], evidence)
    return out
