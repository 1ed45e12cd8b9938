"""Judge rubric files (conf/prompt/judge/*.yaml) and the parsing of a judge's reply into a score.

A reply is read by ``ragbench.judge.parsing.parse_score``: JSON ``{"score", "reasoning"}`` (also inside a
code fence or surrounding prose), then a labelled ``score: N`` / ``Verdict: yes``, then a lone number (``3``
or ``3/4``). Unlike the OpenViking grader we do not take *any* 0-4 integer found in the text: "the answer
names 2 dates" is not a score of 2, so such a reply counts as a failed judgment instead of a wrong number.
``Rubric.schema`` is the verdict's JSON schema, for structured output and constrained decoding.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragbench.errors import ConfigError
from ragbench.generate.prompts import (
    check_template,
    escape_reference,
    literal,
    norm_key,
    read_prompt_file,
    render_references,
    require_str,
    resolve_prompt_file,
)
from ragbench.judge.parsing import parse_score, score_schema
from ragbench.metric_info import Column, MetricInfo
from ragbench.types import Context

# the per-case keys of the LLM judge (ragbench.judge.llm.LLMJudge), graded with these rubrics
_RUBRIC = "the judge model's grade with the rubric file's {} rubric (conf/prompt/judge), 0-4, divided by 4"
_OV = "OpenViking's 0-4 accuracy rubric (benchmark/RAG)"
_EASYRAG = "EasyRAG's {} rubric"
METRICS = {
    "judge/score": MetricInfo("the accuracy grade on its 0-4 scale (mean over judge.repeats)", _OV),
    "judge/accuracy": MetricInfo(_RUBRIC.format("accuracy"), _OV, columns=(Column("judge/accuracy", "judge", 5),)),
    "judge/correctness": MetricInfo(_RUBRIC.format("correctness"), _EASYRAG.format("correctness")),
    "judge/faithfulness": MetricInfo(_RUBRIC.format("faithfulness"), _EASYRAG.format("faithfulness")),
    "judge/relevance": MetricInfo(_RUBRIC.format("relevance"), _EASYRAG.format("relevance")),
    "judge/judge_failed": MetricInfo("1 when some rubric got no parsable verdict (that rubric's key is then absent)",
                                     "ragbench", higher_is_better=False, kind="diagnostic"),
    "judge/heuristic_refusal": MetricInfo(
        "1 when the refusal shortcut graded the case without asking the model (an unanswerable question refused)",
        "OpenViking's Heuristic_Refusal_Check", kind="diagnostic"),
    "judge/spread": MetricInfo("max - min accuracy grade (0-4) over judge.repeats (repeats > 1)", "ragbench",
                               higher_is_better=False, kind="diagnostic"),
    "judge/flip": MetricInfo("1 when the repeats fall on both sides of judge.pass_threshold (repeats > 1)",
                             "ragbench", higher_is_better=False, kind="diagnostic"),
    "judge/prompt_tokens": MetricInfo("prompt tokens the judge's requests used", "the provider's usage (litellm)",
                                      higher_is_better=False, kind="diagnostic"),
    "judge/completion_tokens": MetricInfo("completion tokens the judge's requests used",
                                          "the provider's usage (litellm)", higher_is_better=False,
                                          kind="diagnostic"),
    "judge/cost_usd": MetricInfo("cost of the judge's requests, US dollars", "litellm's cost map",
                                 higher_is_better=False, kind="diagnostic"),
}

# per rubric, 1 when none of its repeats' replies gave a valid score (the rubric's keys are then absent)
for _m in ("accuracy", "correctness", "faithfulness", "relevance"):
    METRICS[f"judge/{_m}/judge_failed"] = MetricInfo(
        f"1 when no reply to the {_m} rubric held a valid score (judge/{_m} is then absent)", "ragbench",
        higher_is_better=False, kind="diagnostic")
# each score's failure key: 1 - its job mean is the score's coverage (ragbench.judge.aggregate.coverage)
FAILED_BY = {"judge/score": "judge/accuracy/judge_failed",
             **{f"judge/{m}": f"judge/{m}/judge_failed" for m in ("accuracy", "correctness", "faithfulness",
                                                                   "relevance")}}
RUBRIC_VARIABLES = ("question", "gold", "answer", "references")
_REFERENCE = string.Template('<reference id="ref_$n" title="$title">\n$text\n</reference>')


@dataclass(frozen=True)
class Verdict:
    """A parsed judge reply: ``score`` is None when the reply held no valid score (``how`` = failed)."""

    score: float | None
    reasoning: str
    how: str  # json | labelled | bare | failed


@dataclass(frozen=True)
class Rubric:
    """One grading prompt and the scores it allows."""

    name: str
    scores: tuple[int, ...]
    template: string.Template

    @property
    def schema(self) -> dict[str, Any]:
        """The JSON schema of this rubric's verdict (``{"score": <one of scores>, "reasoning": "..."}``): what
        structured output (``response_format``) and constrained decoding ask the judge model for."""
        return score_schema(self.scores)


def parse_verdict(text: str, allowed: Sequence[int]) -> Verdict:
    """The score in a judge reply (``ragbench.judge.parsing.parse_score``: JSON first, then labelled
    fallbacks, then a lone value); ``how='failed'`` when none is valid or the reply is ambiguous."""
    parsed = parse_score(text, allowed)
    if parsed.value is None:
        return Verdict(None, text.strip(), "failed")
    return Verdict(float(parsed.value), parsed.text, parsed.how)


@dataclass(frozen=True)
class JudgeRubrics:
    """A loaded rubric file: system prompt, rubrics by name, and the accuracy rubric per dataset."""

    name: str
    path: str
    sha256: str
    system: str
    rubrics: Mapping[str, Rubric]
    accuracy_rubric: Mapping[str, str]

    @property
    def hash(self) -> str:
        """Short content hash for params (``judge/rubrics_hash``)."""
        return self.sha256[:16]

    def accuracy_for(self, dataset: str | None) -> Rubric:
        """The headline rubric of a dataset (LoCoMo 0/4, else generic 0-4 in the shipped file)."""
        name = self.accuracy_rubric.get(norm_key(dataset)) or self.accuracy_rubric["default"]
        return self.rubrics[name]

    def messages(
        self, rubric: Rubric, *, question: str, gold: str, answer: str, contexts: Sequence[Context]
    ) -> list[dict[str, str]]:
        """System + user messages grading one answer with one rubric (all values escaped)."""
        user = rubric.template.substitute(
            question=escape_reference(question),
            gold=escape_reference(gold),
            answer=escape_reference(answer),
            references=render_references(contexts, _REFERENCE, "(no reference passages were given)"),
        )
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


def load_rubrics(spec: str) -> JudgeRubrics:
    """Load and validate a rubric file (a stem under conf/prompt/judge/ or a path)."""
    path = resolve_prompt_file(spec, kind="judge")
    data, sha = read_prompt_file(path)
    raw = data.get("rubrics")
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"rubric file {path}: 'rubrics' must map rubric name -> {{scores, prompt}}")
    rubrics: dict[str, Rubric] = {}
    for name, body in raw.items():
        where = f"rubric file {path}, rubrics.{name}"
        if not isinstance(body, dict):
            raise ConfigError(f"{where}: must be a mapping with 'scores' and 'prompt'")
        scores = body.get("scores")
        if not isinstance(scores, list) or not scores or not all(isinstance(s, int) for s in scores):
            raise ConfigError(f"{where}.scores must be a non-empty list of integers, e.g. [0, 4]")
        template = check_template(
            require_str(body, "prompt", path), RUBRIC_VARIABLES, where=f"{where}.prompt"
        )
        rubrics[str(name)] = Rubric(name=str(name), scores=tuple(sorted(scores)), template=template)
    routing = {norm_key(k): str(v) for k, v in (data.get("accuracy_rubric") or {}).items()}
    if "default" not in routing:
        raise ConfigError(f"rubric file {path}: accuracy_rubric needs a 'default' entry")
    unknown = sorted(set(routing.values()) - set(rubrics))
    if unknown:
        raise ConfigError(
            f"rubric file {path}: accuracy_rubric names unknown rubrics {unknown}; defined: {sorted(rubrics)}"
        )
    return JudgeRubrics(
        name=path.stem,
        path=str(path),
        sha256=sha,
        system=literal(require_str(data, "system", path), where=f"rubric file {path}, key 'system'"),
        rubrics=rubrics,
        accuracy_rubric=routing,
    )
