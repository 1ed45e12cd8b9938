"""ReferenceFreeJudge: LLM-judged metrics that need no gold answer or evidence (``judge=[...,reference_free]``).

Each key, its definition, its source and where ragbench differs is in ``METRICS`` (and docs/metrics.md).
Per case: one request per retrieved passage (context relevance), two for faithfulness (claims, then
one verdict per claim), one for answer relevance. A malformed reply is asked again ``parse_retries``
times, then the metric is a failed judgment (``judge/rf/judge_failed`` = 1, its key absent).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ragbench.errors import ConfigError
from ragbench.judge.asking import Tally, ask, asking_endpoint, esc, load_prompts, references
from ragbench.judge.parsing import claims_parser, score_parser, verdicts_parser
from ragbench.llm.endpoint import LLMEndpoint
from ragbench.metric_info import MetricInfo
from ragbench.types import Answer, Context, Query

PREFIX = "judge/rf"
PROMPT_KIND = "judge/llm_metrics"
VARIABLES = {"context_relevance": ("question", "passage"), "answer_relevance": ("question", "answer"),
             "claims": ("question", "answer"), "claim_check": ("references", "claims")}
GROUPS = ("context_relevance", "faithfulness", "answer_relevance")


# every key is a score: higher is better, and a failed case counts 0 end to end (ragbench.judge.metric_info)
METRICS = {
    f"{PREFIX}/context_relevance": MetricInfo(
        "mean judged relevance of the k passages given to the generator, each 0 / 0.5 / 1 (judged 0, 1, 2)",
        "TruLens context relevance (per-chunk LLM rating, averaged); ARES context relevance",
        "a 0-2 scale instead of TruLens' 0-3; ARES trains a classifier, ragbench prompts the judge model"),
    f"{PREFIX}/context_precision": MetricInfo(
        "precision@k: share of the k passages judged relevant (score >= 1)",
        "ARES context relevance (binary per passage), as precision over the retrieved list", "no gold qrels"),
    f"{PREFIX}/context_ap": MetricInfo(
        "sum over ranks i of precision@i x rel_i, divided by the number of relevant passages (0 when none)",
        "RAGAS context precision without reference (LLMContextPrecisionWithoutReference)",
        "RAGAS asks whether a passage was useful for the *answer*; ragbench asks whether it is relevant to "
        "the *question*, so the metric does not depend on the generator"),
    f"{PREFIX}/context_ndcg": MetricInfo(
        "nDCG@k with linear gains (the judged grade 0-2) and a log2(rank + 1) discount, as trec_eval's ndcg_cut; the "
        "ideal order is the same passages sorted by judged grade (0 when none is relevant)",
        "graded-relevance nDCG (Jarvelin & Kekalainen 2002) over LLM relevance judgements (ARES-style)",
        "measures the order of what was retrieved, not recall: nothing is known of passages not retrieved"),
    f"{PREFIX}/faithfulness": MetricInfo(
        "claims of the answer supported by the passages / claims of the answer",
        "RAGAS faithfulness (statement extraction, then one verdict per statement); TruLens groundedness",
        "an answer with no claim (a refusal) scores 1 -- it asserts nothing unsupported -- where RAGAS gives NaN"),
    f"{PREFIX}/answer_relevance": MetricInfo(
        "judged relevance of the answer to the question, 0-4, divided by 4",
        "TruLens answer relevance (LLM rating of the response against the prompt)",
        "RAGAS answer relevancy instead embeds questions generated from the answer; ragbench needs no embedder"),
}


# per metric group, 1 when none of its replies parsed after the retries (its keys are then absent)
FAILED = {f"{PREFIX}/{group}/judge_failed": MetricInfo(
    f"1 when the {group.replace('_', ' ')} replies of the case did not parse after judges.reference_free."
    "parse_retries (its keys are then absent)", "ragbench", higher_is_better=False, kind="diagnostic")
    for group in GROUPS}
# each score's failure key: 1 - its job mean is the score's coverage (ragbench.judge.aggregate.coverage)
FAILED_BY = {**{k: f"{PREFIX}/context_relevance/judge_failed" for k in METRICS if "/context_" in k},
             f"{PREFIX}/faithfulness": f"{PREFIX}/faithfulness/judge_failed",
             f"{PREFIX}/answer_relevance": f"{PREFIX}/answer_relevance/judge_failed"}


def relevance_scores(levels: Sequence[int]) -> dict[str, float]:
    """Context metrics of judged relevance levels (0, 1, 2) in rank order; see ``METRICS``."""
    k = len(levels)
    if k == 0:
        return {}
    relevant = [int(r >= 1) for r in levels]
    hits = 0
    ap = 0.0
    for i, rel in enumerate(relevant, start=1):
        hits += rel
        ap += rel * hits / i
    dcg = sum(r / math.log2(i + 1) for i, r in enumerate(levels, start=1))
    ideal = sum(r / math.log2(i + 1) for i, r in enumerate(sorted(levels, reverse=True), start=1))
    return {f"{PREFIX}/context_relevance": sum(levels) / (2 * k), f"{PREFIX}/context_precision": sum(relevant) / k,
            f"{PREFIX}/context_ap": ap / sum(relevant) if any(relevant) else 0.0,
            f"{PREFIX}/context_ndcg": dcg / ideal if ideal > 0 else 0.0}


def numbered_claims(claims: Sequence[str]) -> str:
    """Claims as a numbered, escaped list for the ``claim_check`` prompt."""
    return "\n".join(f'<claim n="{i}">{esc(c)}</claim>' for i, c in enumerate(claims, start=1))


class ReferenceFreeJudge:
    """Satisfies ``ragbench.protocols.Judge`` (and PromptedJudge / ExplainingJudge: verdicts are cached per
    case, requests shown by ``plan=true``). ``metrics``: a subset of context_relevance, faithfulness,
    answer_relevance."""

    def __init__(
        self,
        *,
        endpoint: LLMEndpoint | None = None,
        prompts: str = "default",
        metrics: Sequence[str] = GROUPS,
        parse_retries: int = 1,
        **settings: Any,
    ) -> None:
        """See ``asking_endpoint``."""
        ep = self.endpoint = asking_endpoint("reference_free", endpoint, settings, parse_retries)
        unknown = sorted(set(metrics) - set(GROUPS))
        if unknown or not metrics:
            raise ConfigError(f"judges.reference_free.metrics={list(metrics)} is not valid; choose a non-empty "
                              f"subset of {list(GROUPS)}")
        self.model, self.parse_retries = str(ep.model), parse_retries
        self.metrics = tuple(dict.fromkeys(metrics))
        self.prompt_set = load_prompts(prompts, kind=PROMPT_KIND, variables=VARIABLES)
        self.identity = (f"reference-free-judge:{self.model}(prompts={self.prompt_set.hash},"
                         f"metrics={','.join(self.metrics)},temperature={ep.temperature},max_tokens={ep.max_tokens},"
                         f"parse_retries={parse_retries})")
        self.client = ep.client()

    @property
    def score_keys(self) -> tuple[str, ...]:
        keys = {"context_relevance": [k for k in METRICS if "/context_" in k],
                "faithfulness": [f"{PREFIX}/faithfulness"], "answer_relevance": [f"{PREFIX}/answer_relevance"]}
        return tuple(k for m in self.metrics for k in keys[m])

    def log_params(self) -> dict[str, Any]:
        return {"judge/rf/prompts_file": self.prompt_set.path, "judge/rf/prompts_hash": self.prompt_set.hash}

    def log_tags(self) -> dict[str, str]:
        return {"judge.reference_free.model": self.model}

    def preflight(self) -> None:
        self.client.preflight()

    def prompts(self, query: Query, contexts: Sequence[Context], answer: Answer) -> list[list[dict[str, str]]]:
        """The requests of one case (the claim check with a one-claim placeholder: its claims come from a reply)."""
        p = self.prompt_set
        out = []
        if "context_relevance" in self.metrics:
            out += [p.messages("context_relevance", question=esc(query.text), passage=esc(c.text)) for c in contexts]
        if "faithfulness" in self.metrics:
            out += [p.messages("claims", question=esc(query.text), answer=esc(answer.text)),
                    p.messages("claim_check", references=references(contexts), claims=numbered_claims([answer.text]))]
        if "answer_relevance" in self.metrics:
            out.append(p.messages("answer_relevance", question=esc(query.text), answer=esc(answer.text)))
        return out

    def judge(self, query: Query, contexts: Sequence[Context], answer: Answer) -> dict[str, float]:
        return self.judge_notes(query, contexts, answer)[0]

    def judge_notes(self, query: Query, contexts: Sequence[Context],
                    answer: Answer) -> tuple[dict[str, float], dict[str, Any]]:
        """The scores of one answer, and per metric the parsed judgements (for the case record)."""
        p, tally = self.prompt_set, Tally(PREFIX)
        out: dict[str, float] = {}
        notes: dict[str, Any] = {}
        opts = {"parse_retries": self.parse_retries}
        if "context_relevance" in self.metrics and contexts:
            levels = [ask(self.client, p.messages("context_relevance", question=esc(query.text), passage=esc(c.text)),
                          score_parser((0, 1, 2)), tally, what="context relevance", **opts) for c in contexts]
            notes["context_relevance"] = {"levels": levels}
            if all(level is not None for level in levels):
                out.update(relevance_scores([int(level) for level in levels if level is not None]))
            out[f"{PREFIX}/context_relevance/judge_failed"] = float(f"{PREFIX}/context_relevance" not in out)
        if "faithfulness" in self.metrics:
            claims = ask(self.client, p.messages("claims", question=esc(query.text), answer=esc(answer.text)),
                         claims_parser("claims"), tally, what="claims", **opts)
            verdicts: list[int] | None = []
            if claims:
                verdicts = ask(self.client, p.messages("claim_check", references=references(contexts),
                                                       claims=numbered_claims(claims)),
                               verdicts_parser(len(claims)), tally, what="claim check", **opts)
            notes["faithfulness"] = {"claims": claims, "verdicts": verdicts}
            if claims is not None and verdicts is not None:
                out[f"{PREFIX}/faithfulness"] = sum(verdicts) / len(claims) if claims else 1.0
            out[f"{PREFIX}/faithfulness/judge_failed"] = float(f"{PREFIX}/faithfulness" not in out)
        if "answer_relevance" in self.metrics:
            score = ask(self.client, p.messages("answer_relevance", question=esc(query.text), answer=esc(answer.text)),
                        score_parser(range(5)), tally, what="answer relevance", **opts)
            notes["answer_relevance"] = {"score": score}
            if score is not None:
                out[f"{PREFIX}/answer_relevance"] = score / 4
            out[f"{PREFIX}/answer_relevance/judge_failed"] = float(score is None)
        out.update(tally.scores())
        return out, notes
