"""Citation support and required citations, lexically (see docs/metrics.md):

- ``answer/citation_support_rate``: the share of the answer's cited sentences that their cited contexts
  support. A cited sentence is a sentence of the reply carrying a ``[ref_N]`` marker
  (``ragbench.generate.citations.cited_sentences``). Its *content tokens* are the distinct tokens of its
  SQuAD-normalised text (lower case, no punctuation, no articles) that are not in ``STOPWORDS``; its
  *coverage* is the share of them found among the SQuAD-normalised tokens of the contexts it cites (their
  union). It is *supported* when coverage >= ``SUPPORT_MIN`` (0.5). A sentence without content tokens is
  left out; an answer without cited sentences has no rate (the key is absent).
- ``answer/citation_missing``: on a case whose question has ``citation_required: true`` (the custom
  format), 1 when the answer cites no context, else 0 (a refusal that cites nothing counts as missing too);
  absent on other cases. Its job mean is the share of citation-required cases answered without a citation.
- ``answer/raw_<name>``: a dataset with an answer post-processing hook (``dataset.postprocess``) is scored
  on the processed answer; ``answer/raw_em``, ``raw_f1``, ``raw_contains`` (and LoCoMo's F1 keys) are the
  same lexical scores of the unprocessed answer, beside them.

The LLM-judged variant of citation support is ``judge/claims/citation_support`` (``ragbench.judge.claims``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragbench.judge.lexical import answer_scores
from ragbench.judge.squad import squad_normalize
from ragbench.metric_info import MetricInfo

SUPPORT_MIN = 0.5  # the share of a cited sentence's content tokens its cited contexts must hold
# function words carry no claim: left out of a sentence's content tokens (articles are dropped by the
# SQuAD normalisation already)
STOPWORDS = frozenset(
    "is are was were be been being am it its this that these those there their they them he she his her him "
    "i we you our your my me us of in on at to for from by with as and or but not no nor so if then than "
    "also which who whom whose what when where why how do does did has have had can could will would shall "
    "should may might must about into over under up down out very just all any some such".split())
SUPPORT_KEY = "answer/citation_support_rate"
MISSING_KEY = "answer/citation_missing"
RAW = "answer/raw_"
REQUIRED = "citation_required"  # the query meta key the custom format sets
CLAIMS_KEY = "judge/claims/citation_support"  # the LLM variant (ragbench.judge.claims, judge=claims)

METRICS = {
    SUPPORT_KEY: MetricInfo(
        "share of the answer's cited sentences whose content tokens (SQuAD-normalised, stopwords left out) are "
        f"at least {SUPPORT_MIN:.0%} present in the contexts they cite", "ragbench",
        "lexical: a paraphrase can be unsupported; judge=claims adds the LLM verdict "
        "(judge/claims/citation_support)", kind="diagnostic",
        job_level="mean over the cases whose answer has a cited sentence with content tokens"),
    MISSING_KEY: MetricInfo(
        "1 when a citation_required question's answer cites no context (only on those questions)", "ragbench",
        higher_is_better=False, kind="diagnostic",
        job_level="share of the citation_required cases answered without a citation"),
    CLAIMS_KEY: MetricInfo(
        "share of the answer's cited sentences the claims judge finds supported by the contexts each cites (one "
        "claim check per cited sentence)", "ragbench (claim check of RAGChecker's prompts)",
        "the LLM variant of answer/citation_support_rate; absent when the answer cites nothing", kind="diagnostic",
        job_level="mean over the cases whose answer has a checked cited sentence"),
    f"{RAW}<name>": MetricInfo(
        "the lexical score <name> (em, f1, contains, LoCoMo F1) of the answer before dataset.postprocess",
        "ragbench", "logged only when the dataset has an answer post-processing hook", kind="diagnostic",
        job_level="mean over the cases that got an answer"),
}


def content_tokens(text: str) -> set[str]:
    """The distinct SQuAD-normalised tokens of ``text`` that are not stopwords."""
    return {t for t in squad_normalize(text).split() if t not in STOPWORDS}


def coverage(sentence: str, cited_texts: Sequence[str]) -> float | None:
    """The share of ``sentence``'s content tokens found in the cited texts; None without content tokens."""
    tokens = content_tokens(sentence)
    if not tokens:
        return None
    found = {t for text in cited_texts for t in squad_normalize(text).split()}
    return len(tokens & found) / len(tokens)


def support_rate(cited: Sequence[tuple[str, Sequence[int]]], contexts: Sequence[str]) -> float | None:
    """``answer/citation_support_rate`` of the cited sentences over the 1-based numbered ``contexts``;
    None when no cited sentence has content tokens (numbers outside the contexts are ignored)."""
    verdicts = []
    for sentence, numbers in cited:
        texts = [contexts[n - 1] for n in numbers if 1 <= n <= len(contexts)]
        share = coverage(sentence, texts) if texts else None
        if share is not None:
            verdicts.append(share >= SUPPORT_MIN)
    return sum(verdicts) / len(verdicts) if verdicts else None


def citation_scores(cited: Sequence[tuple[str, Sequence[int]]], citations: Sequence[int], contexts: Sequence[str],
                    meta: Mapping[str, Any]) -> dict[str, float]:
    """The support rate (when the answer has cited sentences) and, on a citation_required question,
    ``answer/citation_missing``: the one rule ``ragbench.cases`` and ``ragbench.verify`` share."""
    out: dict[str, float] = {}
    rate = support_rate(cited, contexts)
    if rate is not None:
        out[SUPPORT_KEY] = rate
    if meta.get(REQUIRED) is True:
        out[MISSING_KEY] = float(not any(1 <= n <= len(contexts) for n in citations))
    return out


def raw_scores(raw: str, golds: Sequence[str], *, dataset: str | None, meta: Mapping[str, Any]) -> dict[str, float]:
    """``answer/raw_*``: the lexical scores of the unprocessed answer (the refusal flag left out)."""
    return {RAW + k.removeprefix("answer/"): v for k, v in answer_scores(raw, golds, dataset=dataset, meta=meta).items()
            if k != "answer/refused"}
