"""LLMJudge: rubric grading through litellm (accuracy 0-4, EasyRAG correctness/faithfulness/relevance).

Per case it returns (scores normalised to 0-1 except ``judge/score``, which keeps the 0-4 scale):
``judge/score``, ``judge/accuracy`` (= score / 4), ``judge/correctness``, ``judge/faithfulness``,
``judge/relevance``; ``judge/judge_failed`` (1 when some metric got no parsable verdict -- that
metric's key is then absent) and per metric ``judge/<metric>/judge_failed`` (its coverage); with ``repeats`` > 1 ``judge/spread`` (max - min accuracy score over the
repeats) and ``judge/flip`` (1 when the repeats fall on both sides of ``pass_threshold``); and the
judge's own ``judge/prompt_tokens``, ``judge/completion_tokens``, ``judge/cost_usd``. Every reply is kept in
the reply cache, an unparseable one too (it was paid for): read again, it counts as failed again.

``structured_output`` asks the endpoint for the verdict's JSON schema (``response_format``, which
llama.cpp's server, vLLM, Ollama and OpenAI honour): None (default) asks a self-hosted endpoint (one
named by ``api_base``) or a local model (``judge.backend=local``, which decodes the verdict under its
grammar: ``ragbench.llm.local.grammar``), not a provider's default one; the run's param
``judge/structured_output`` says ``json_schema`` (an endpoint asked for the schema), ``grammar`` (a local
model's constrained decoding) or ``off``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ragbench.errors import ConfigError
from ragbench.judge.refusal import is_refusal
from ragbench.judge.rubrics import JudgeRubrics, Rubric, load_rubrics, parse_verdict
from ragbench.llm.endpoint import LLMEndpoint
from ragbench.llm.local import is_local
from ragbench.llm.local.grammar import GRAMMAR
from ragbench.types import Answer, Context, Query

log = logging.getLogger(__name__)

METRICS = ("accuracy", "correctness", "faithfulness", "relevance")
MAX_SCORE = 4.0
HEURISTIC_REFUSAL = "Heuristic_Refusal_Check"  # OpenViking's name for the refusal shortcut
UNANSWERABLE_GOLD = (
    "(none: the documents do not answer this question; a reply saying the information "
    "is not available, such as 'Not mentioned', is the correct answer)"
)


class LLMJudge:
    """Satisfies ``ragbench.protocols.Judge``. Refuses to judge its own generator's answers unless
    ``allow_same_model`` (a model grading itself is biased); ``same_model`` then tags the run.
    ``identity`` covers everything that shapes a verdict (model, rubric hash, metrics, repeats...)."""

    def __init__(
        self,
        *,
        endpoint: LLMEndpoint | None = None,
        rubrics: str = "default",
        dataset: str | None = None,
        metrics: Sequence[str] = METRICS,
        repeats: int = 1,
        pass_threshold: float = 3.0,
        allow_same_model: bool = False,
        generator_model: str | None = None,
        structured_output: bool | None = None,
        **settings: Any,
    ) -> None:
        """``endpoint`` (the judge-wide ``judge.*`` keys, ragbench.judge.build), with ``settings`` (flat
        ``LLMEndpoint`` keys) over it."""
        ep = self.endpoint = LLMEndpoint.of("judge", endpoint, settings)
        model, temperature, max_tokens = str(ep.model), ep.temperature, ep.max_tokens
        if structured_output is not None and not isinstance(structured_output, bool):
            raise ConfigError(f"judge.structured_output must be true, false or null (on for an api_base or a "
                              f"local model), got {structured_output!r}")
        local = is_local(model)
        self.structured = bool(ep.api_base) or local if structured_output is None else structured_output
        self.constrained = "off" if not self.structured else GRAMMAR if local else "json_schema"
        unknown = sorted(set(metrics) - set(METRICS))
        if unknown or not metrics:
            raise ConfigError(
                f"judge.metrics={list(metrics)} is not valid; choose a non-empty subset of {list(METRICS)}"
            )
        if repeats < 1:
            raise ConfigError(f"judge.repeats must be >= 1, got {repeats}")
        self.same_model = generator_model is not None and generator_model == model
        if self.same_model and not allow_same_model:
            raise ConfigError(
                f"judge.model={model!r} is also the generator (llm.model): a model grading its own answers "
                f"is biased\n  fix: pick another judge.model, or set judge.allow_same_model=true (the run is "
                f"then tagged judge.same_model=true)"
            )
        self.model = model
        self.dataset = dataset
        self.metrics = tuple(dict.fromkeys(metrics))
        self.repeats = repeats
        self.pass_threshold = pass_threshold
        self.rubrics: JudgeRubrics = load_rubrics(rubrics)
        for metric in self.metrics:
            if metric != "accuracy" and metric not in self.rubrics.rubrics:
                raise ConfigError(
                    f"rubric file {self.rubrics.path} has no rubric '{metric}' for judge.metrics;"
                    f" it defines {sorted(self.rubrics.rubrics)}"
                )
        self.identity = (
            f"llm-judge:{model}(rubrics={self.rubrics.hash},metrics={','.join(self.metrics)},"
            f"repeats={repeats},temperature={temperature},max_tokens={max_tokens},"
            f"pass_threshold={pass_threshold},dataset={dataset}"
            f"{f',structured_output={self.constrained}' if self.structured else ''})"
        )
        # judge.batch: the job's uncached verdict requests as provider batches (ragbench.llm.batch)
        self.client = ep.client()

    def log_params(self) -> dict[str, Any]:
        """MLflow run params the config alone does not show (ragbench.protocols.LoggedParams; no cache key):
        the rubric file and its content hash, and whether the verdicts' output was constrained
        (``json_schema``: asked with ``response_format``; ``grammar``: a local model's constrained
        decoding; ``off``)."""
        return {"judge/rubrics_file": self.rubrics.path, "judge/rubrics_hash": self.rubrics.hash,
                "judge/structured_output": self.constrained}

    def log_tags(self) -> dict[str, str]:
        """MLflow run tags (ragbench.protocols.LoggedTags; no cache key): the judge's model, and whether it is
        also the generator (allowed only with allow_same_model)."""
        return {"judge.same_model": str(self.same_model).lower(), "judge.model": self.model}

    def preflight(self) -> None:
        """One tiny request before the case loop (see ``LLMClient.preflight``); with structured output,
        a provider litellm sends no ``response_format`` to is one line here."""
        self.client.preflight()
        if self.structured and not self.client.supports_response_format():
            raise ConfigError(f"judge.structured_output=true: litellm sends no response_format to "
                              f"judge.model={self.model!r}; fix: set judge.structured_output=false")

    @property
    def score_keys(self) -> tuple[str, ...]:
        """The answer-quality keys this judge scores (a job whose every case failed logs them as 0)."""
        score = ("judge/score",) if "accuracy" in self.metrics else ()
        return (*score, *(f"judge/{m}" for m in self.metrics))

    def _rubric(self, metric: str) -> Rubric:
        if metric == "accuracy":
            return self.rubrics.accuracy_for(self.dataset)
        return self.rubrics.rubrics[metric]

    def response_format(self, metric: str) -> dict[str, Any] | None:
        """The verdict's JSON schema as an OpenAI ``response_format`` (None without structured output)."""
        if not self.structured:
            return None
        scores = sorted(self._rubric(metric).scores)
        properties = {"score": {"type": "integer", "enum": scores}, "reasoning": {"type": "string"}}
        schema = {"type": "object", "additionalProperties": False, "required": ["score", "reasoning"],
                  "properties": properties}
        return {"type": "json_schema", "json_schema": {"name": "verdict", "strict": True, "schema": schema}}

    def _gold(self, query: Query) -> str:
        if not query.answerable:
            return UNANSWERABLE_GOLD
        return " | ".join(a for a in query.answers if a.strip()) or "(no gold answer given)"

    def prompts(self, query: Query, contexts: Sequence[Context], answer: Answer) -> list[list[dict[str, str]]]:
        """The messages of every request judging ``answer`` (per metric, per repeat): for ragbench.plan."""
        gold = self._gold(query)
        return [self.rubrics.messages(self._rubric(m), question=query.text, gold=gold, answer=answer.text,
                                      contexts=contexts) for m in self.metrics for _ in range(self.repeats)]

    def judge(self, query: Query, contexts: Sequence[Context], answer: Answer) -> dict[str, float]:
        """Scores of one answer. An LLM call that fails after its retries raises (the case then fails)."""
        return self.judge_notes(query, contexts, answer)[0]

    def judge_notes(self, query: Query, contexts: Sequence[Context],
                    answer: Answer) -> tuple[dict[str, float], dict[str, Any]]:
        """``judge``'s scores and, for the case record, per metric the rubric name and the judge's
        reasoning of each repeat (``Heuristic_Refusal_Check`` when the refusal heuristic decided)."""
        gold_refuses = not query.answerable or (
            bool(query.answers) and all(is_refusal(a) for a in query.answers)
        )
        usage = {
            "judge/prompt_tokens": 0.0,
            "judge/completion_tokens": 0.0,
            "judge/cost_usd": 0.0,
        }
        if gold_refuses and is_refusal(answer.text):
            # OpenViking's Heuristic_Refusal_Check: a refusal to an unanswerable question is right.
            refused: dict[str, float] = {f"judge/{m}": 1.0 for m in self.metrics}
            if "accuracy" in self.metrics:
                refused["judge/score"] = MAX_SCORE
            refused.update({"judge/judge_failed": 0.0, "judge/heuristic_refusal": 1.0, **usage,
                            **{f"judge/{m}/judge_failed": 0.0 for m in self.metrics}})
            return refused, {m: {"rubric": HEURISTIC_REFUSAL, "reasoning": []} for m in self.metrics}
        out: dict[str, float] = {"judge/heuristic_refusal": 0.0}
        notes: dict[str, Any] = {}
        failed = False
        gold = self._gold(query)
        asked = {m: self.rubrics.messages(self._rubric(m), question=query.text, gold=gold, answer=answer.text,
                                          contexts=contexts) for m in self.metrics}
        # batch rounds (judge.batch): every metric's and repeat's request joins the same batch
        self.client.gather([(asked[m], {"repeat": r}, None, self.response_format(m)) for m in self.metrics
                            for r in range(self.repeats)])
        for metric in self.metrics:
            rubric = self._rubric(metric)
            messages = asked[metric]
            scores: list[float] = []
            notes[metric] = {"rubric": rubric.name, "reasoning": []}
            for repeat in range(self.repeats):
                # an unparseable reply is cached too (paid for) and counted as failed each time it is read
                reply = self.client.complete(messages, key_extra={"repeat": repeat},
                                             response_format=self.response_format(metric))
                usage["judge/prompt_tokens"] += reply.usage.prompt_tokens
                usage["judge/completion_tokens"] += reply.usage.completion_tokens
                usage["judge/cost_usd"] += reply.usage.cost_usd
                verdict = parse_verdict(reply.text, rubric.scores)
                notes[metric]["reasoning"].append(verdict.reasoning)
                if verdict.score is None:
                    log.warning(
                        "judge %s could not read a %s score for %s (rubric %s): %.200r",
                        self.model,
                        metric,
                        query.qid,
                        rubric.name,
                        reply.text,
                    )
                else:
                    scores.append(verdict.score)
            out[f"judge/{metric}/judge_failed"] = float(not scores)  # per rubric: its coverage
            if not scores:
                failed = True
                continue
            mean = sum(scores) / len(scores)
            if metric == "accuracy":
                out["judge/score"] = mean
                if len(scores) > 1:
                    out["judge/spread"] = max(scores) - min(scores)
                    passed = {s >= self.pass_threshold for s in scores}
                    out["judge/flip"] = float(len(passed) == 2)
            out[f"judge/{metric}"] = mean / MAX_SCORE
        out["judge/judge_failed"] = float(failed)
        out.update(usage)
        return out, notes
