"""ClaimJudge: claim-level diagnostics after RAGChecker (Ru et al. 2024), ``judge=[...,claims]``.

The answer and the gold answer are each decomposed into claims; each claim set is checked against the
other answer and against the retrieved passages (one request per check, one verdict per claim). With
A = the answer's claims, G = the gold answer's claims, "in X" = judged supported by X:

- ``precision``       = |A in gold| / |A|                      (RAGChecker precision)
- ``recall``          = |G in answer| / |G|                    (RAGChecker recall); ``f1`` of the two
- ``faithfulness``    = |A in passages| / |A|                  (RAGChecker faithfulness)
- ``hallucination``   = |A not in gold, not in passages| / |A| (RAGChecker hallucination; lower is better)
- ``noise_sensitivity`` = |A not in gold, in passages| / |A|   (RAGChecker's relevant + irrelevant noise
  sensitivity in one: ragbench does not split the passages by gold relevance; lower is better)
- ``self_knowledge``  = |A in gold, not in passages| / |A|     (RAGChecker self-knowledge)
- ``context_utilisation`` = |G in passages and in answer| / |G in passages| (RAGChecker context utilisation)

A key whose denominator is empty is absent (an answer without claims has no precision); a malformed
reply is asked again ``parse_retries`` times, then counted in ``judge/claims/judge_failed`` and the keys
that needed it are absent. Unanswerable questions (no gold) get the answer-side keys only.

``citation_support``: each sentence of the answer that cites contexts (``Answer.cited``) is checked as one
claim against the contexts it cites; the share judged supported (the LLM variant of the lexical
``answer/citation_support_rate``, ``ragbench.judge.citations``); absent when the answer cites nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragbench.judge.asking import Tally, ask, asking_endpoint, esc, load_prompts, references
from ragbench.judge.citations import CLAIMS_KEY as CITATION_KEY
from ragbench.judge.parsing import claims_parser, verdicts_parser
from ragbench.judge.reference_free import PROMPT_KIND, VARIABLES, numbered_claims
from ragbench.llm.endpoint import LLMEndpoint
from ragbench.metric_info import MetricInfo
from ragbench.types import Answer, Context, Level, Query

PREFIX = "judge/claims"
KEYS = ("precision", "recall", "f1", "faithfulness", "hallucination", "noise_sensitivity", "self_knowledge",
        "context_utilisation")
_RC = "RAGChecker (Ru et al. 2024)"
# A = the answer's claims, G = the gold answer's claims; directions as RAGChecker's tables (its "overall" metrics
# are scores; its diagnostic rates whose best value is 0 are averaged over the cases that have them)
METRICS = {
    f"{PREFIX}/precision": MetricInfo("|A in gold| / |A|", f"{_RC} precision"),
    f"{PREFIX}/recall": MetricInfo("|G in answer| / |G|", f"{_RC} recall"),
    f"{PREFIX}/f1": MetricInfo("harmonic mean of claim precision and recall", f"{_RC} F1"),
    f"{PREFIX}/faithfulness": MetricInfo("|A in passages| / |A|", f"{_RC} faithfulness"),
    f"{PREFIX}/hallucination": MetricInfo(
        "|A not in gold, not in passages| / |A|", f"{_RC} hallucination", higher_is_better=False, kind="diagnostic"),
    f"{PREFIX}/noise_sensitivity": MetricInfo(
        "|A not in gold, in passages| / |A|", f"{_RC} noise sensitivity",
        "relevant and irrelevant noise sensitivity in one: the passages are not split by gold relevance",
        higher_is_better=False, kind="diagnostic"),
    f"{PREFIX}/self_knowledge": MetricInfo(
        "|A in gold, not in passages| / |A|", f"{_RC} self-knowledge",
        "lower is better as in RAGChecker's tables: a RAG answer should rest on its passages",
        higher_is_better=False, kind="diagnostic"),
    f"{PREFIX}/context_utilisation": MetricInfo(
        "|G in passages and in answer| / |G in passages|", f"{_RC} context utilisation"),
}

# every claim key rests on the same chain of asks: its failure key is the judge's (judge/claims/judge_failed)
FAILED_BY = {f"{PREFIX}/{k}": f"{PREFIX}/judge_failed" for k in (*KEYS, "citation_support")}


def claim_metrics(answer_in_gold: Sequence[int] | None, answer_in_context: Sequence[int] | None,
                  gold_in_answer: Sequence[int] | None, gold_in_context: Sequence[int] | None) -> dict[str, float]:
    """The RAGChecker ratios of the four verdict lists (None: that check failed or was not made)."""
    out: dict[str, float] = {}
    a_gold, a_ctx = answer_in_gold, answer_in_context
    if a_gold:
        out["precision"] = sum(a_gold) / len(a_gold)
    if a_ctx:
        out["faithfulness"] = sum(a_ctx) / len(a_ctx)
    if a_gold and a_ctx:
        n = len(a_gold)
        out["hallucination"] = sum(1 for g, c in zip(a_gold, a_ctx, strict=True) if not g and not c) / n
        out["noise_sensitivity"] = sum(1 for g, c in zip(a_gold, a_ctx, strict=True) if not g and c) / n
        out["self_knowledge"] = sum(1 for g, c in zip(a_gold, a_ctx, strict=True) if g and not c) / n
    if gold_in_answer:
        out["recall"] = sum(gold_in_answer) / len(gold_in_answer)
    if "precision" in out and "recall" in out:
        p, r = out["precision"], out["recall"]
        out["f1"] = 2 * p * r / (p + r) if p + r else 0.0
    if gold_in_answer and gold_in_context and any(gold_in_context):
        both = sum(1 for a, c in zip(gold_in_answer, gold_in_context, strict=True) if a and c)
        out["context_utilisation"] = both / sum(gold_in_context)
    return {f"{PREFIX}/{k}": v for k, v in out.items()}


class ClaimJudge:
    """Satisfies ``ragbench.protocols.Judge`` (and PromptedJudge / ExplainingJudge)."""

    def __init__(
        self,
        *,
        endpoint: LLMEndpoint | None = None,
        prompts: str = "default",
        parse_retries: int = 1,
        **settings: Any,
    ) -> None:
        """See ``asking_endpoint``."""
        ep = self.endpoint = asking_endpoint("claims", endpoint, settings, parse_retries)
        self.model, self.parse_retries = str(ep.model), parse_retries
        self.prompt_set = load_prompts(prompts, kind=PROMPT_KIND, variables=VARIABLES)
        self.identity = (f"claim-judge:{self.model}(prompts={self.prompt_set.hash},temperature={ep.temperature},"
                         f"max_tokens={ep.max_tokens},parse_retries={parse_retries},citations=1)")
        self.client = ep.client()

    @property
    def score_keys(self) -> tuple[str, ...]:
        return tuple(f"{PREFIX}/{k}" for k in KEYS)

    def log_params(self) -> dict[str, Any]:
        return {"judge/claims/prompts_file": self.prompt_set.path, "judge/claims/prompts_hash": self.prompt_set.hash}

    def log_tags(self) -> dict[str, str]:
        return {"judge.claims.model": self.model}

    def preflight(self) -> None:
        self.client.preflight()

    @staticmethod
    def _gold(query: Query) -> str | None:
        golds = [a for a in query.answers if a.strip()]
        return golds[0] if query.answerable and golds else None

    def prompts(self, query: Query, contexts: Sequence[Context], answer: Answer) -> list[list[dict[str, str]]]:
        """The requests of one case (claim checks with a one-claim placeholder: claims come from replies)."""
        p = self.prompt_set
        one = numbered_claims([answer.text])
        out = [p.messages("claims", question=esc(query.text), answer=esc(answer.text)),
               p.messages("claim_check", references=references(contexts), claims=one)]
        gold = self._gold(query)
        if gold is not None:
            out += [p.messages("claims", question=esc(query.text), answer=esc(gold)),
                    p.messages("claim_check", references=references([_as_context("gold answer", gold)]), claims=one),
                    p.messages("claim_check", references=references(contexts), claims=one),
                    p.messages("claim_check", references=references([_as_context("answer", answer.text)]), claims=one)]
        for sentence, numbers in answer.cited:  # the citation support check: one per cited sentence
            out.append(p.messages("claim_check", references=references(cited_contexts(contexts, numbers)),
                                  claims=numbered_claims([sentence])))
        return out

    def judge(self, query: Query, contexts: Sequence[Context], answer: Answer) -> dict[str, float]:
        return self.judge_notes(query, contexts, answer)[0]

    def _claims(self, query: Query, text: str, tally: Tally) -> list[str] | None:
        messages = self.prompt_set.messages("claims", question=esc(query.text), answer=esc(text))
        return ask(self.client, messages, claims_parser("claims"), tally, what="claims", parse_retries=self.parse_retries)

    def _check(self, claims: list[str] | None, against: Sequence[Context], tally: Tally) -> list[int] | None:
        if not claims:
            return None
        messages = self.prompt_set.messages("claim_check", references=references(against),
                                            claims=numbered_claims(claims))
        return ask(self.client, messages, verdicts_parser(len(claims)), tally, what="claim check",
                   parse_retries=self.parse_retries)

    def judge_notes(self, query: Query, contexts: Sequence[Context],
                    answer: Answer) -> tuple[dict[str, float], dict[str, Any]]:
        """The ratios of one answer, and the claims and verdicts behind them (for the case record)."""
        tally = Tally(PREFIX)
        gold = self._gold(query)
        a_claims = self._claims(query, answer.text, tally)
        a_ctx = self._check(a_claims, contexts, tally)
        a_gold = g_claims = g_ans = g_ctx = None
        if gold is not None:
            a_gold = self._check(a_claims, [_as_context("gold answer", gold)], tally)
            g_claims = self._claims(query, gold, tally)
            g_ans = self._check(g_claims, [_as_context("answer", answer.text)], tally)
            g_ctx = self._check(g_claims, contexts, tally)
            if a_claims == [] and g_claims:
                g_ans = [0] * len(g_claims)  # an answer without claims covers none of the gold's
        out = claim_metrics(a_gold, a_ctx, g_ans, g_ctx)
        cited = self._citations(answer, contexts, tally)
        if any(v is not None for v in cited):
            checked = [v for v in cited if v is not None]
            out[CITATION_KEY] = sum(checked) / len(checked)
        out.update(tally.scores())
        notes = {"answer_claims": a_claims, "answer_in_gold": a_gold, "answer_in_context": a_ctx,
                 "gold_claims": g_claims, "gold_in_answer": g_ans, "gold_in_context": g_ctx,
                 **({"cited_sentences": [s for s, _ in answer.cited], "cited_supported": cited} if cited else {})}
        return out, {"claims": notes}


    def _citations(self, answer: Answer, contexts: Sequence[Context], tally: Tally) -> list[int | None]:
        """Per cited sentence: 1 when the judge finds it supported by the contexts it cites (checked as one
        claim against them), 0 when not, None when the check failed or it cites no given context."""
        out: list[int | None] = []
        for sentence, numbers in answer.cited:
            against = cited_contexts(contexts, numbers)
            verdict = self._check([sentence], against, tally) if against else None
            out.append(verdict[0] if verdict else None)
        return out


def cited_contexts(contexts: Sequence[Context], numbers: Sequence[int]) -> list[Context]:
    """The contexts the 1-based ``numbers`` name (numbers outside them left out)."""
    return [contexts[n - 1] for n in numbers if 1 <= n <= len(contexts)]


def _as_context(title: str, text: str) -> Context:
    return Context(chunk_id=title, text=text, title=title, level=Level.PARAGRAPH, hit_ids=())
