"""``repeats=N`` in a job's waves (ragbench.pipeline): a case after its expand step is copied once per repeat,
each copy generated and judged (its LLM requests under the repeat's seed and cache key: ragbench.repeats), and
the copies merged back into one CaseResult whose answer scores are the repeats' reduced values and which
keeps every repeat (``CaseResult.repeats``, the case record's ``repeats``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from ragbench.cases import Case, CaseRunner
from ragbench.repeats import RepeatPolicy, reduce_scores
from ragbench.types import CaseResult, Usage

Wave = Callable[[str, Sequence[Any], list[Callable[[], Any]]], list[Any]]  # (name, components, steps) -> results


def repeat_copy(case: Case, index: int) -> Case:
    """Repeat ``index`` of an expanded case: its own scores, latency and notes (a case already ended passes)."""
    if case.result is not None:
        return case
    return replace(case, scores=dict(case.scores), latency=dict(case.latency), judge_notes={},
                   trace=dict(case.trace), repeat=index)


def run_repeats(policy: RepeatPolicy, runner: CaseRunner, cases: Sequence[Case],
                generate: Callable[[list[Case]], list[Case]], wave: Wave,
                judges: Sequence[Any]) -> list[CaseResult]:
    """Each repeat's generate and judge waves, in turn (a local model's batch then holds one repeat, one seed),
    then every case merged from its repeats."""
    runs: list[list[CaseResult]] = []
    for r in range(policy.n):
        copies = generate([repeat_copy(x, r) for x in cases])
        runs.append(wave("judge", judges, [partial(runner.finish, x) for x in copies]))
    return [merged(x, [run[i] for run in runs], policy) for i, x in enumerate(cases)]


def _answer_scores(case: Case, result: CaseResult) -> dict[str, float]:
    """What a repeat scored past the expand step (its answer's and judges' scores)."""
    return {k: float(v) for k, v in result.scores.items() if k not in case.scores}


def repeat_entry(result: CaseResult, scores: dict[str, float]) -> dict[str, Any]:
    """One repeat as the case record keeps it."""
    answer = result.answer
    return {"status": result.status, "answer": answer.text if answer else None,
            "citations": list(answer.citations) if answer else [], "scores": scores,
            # its cited sentences and, with dataset.postprocess, its unprocessed answer (ragbench.verify reads both)
            **({"cited": [[t, list(ns)] for t, ns in answer.cited]} if answer and answer.cited else {}),
            **({"answer_raw": answer.raw_text} if answer and answer.raw_text is not None else {}),
            "prompt_tokens": answer.usage.prompt_tokens if answer else 0,
            "completion_tokens": answer.usage.completion_tokens if answer else 0,
            **({"error_type": result.error_type} if result.error_type else {})}


def merged(case: Case, results: Sequence[CaseResult], policy: RepeatPolicy) -> CaseResult:
    """One case from its repeats: retrieval and context scores as expanded, each answer score reduced over the
    repeats (``policy.reducer``), the first repeat's answer (its usage the repeats' sum) and judge notes, the
    mean generate and judge latencies. A case any repeat of which failed or was skipped ends as that repeat."""
    if case.result is not None:
        return case.result
    entries = tuple(repeat_entry(r, _answer_scores(case, r)) for r in results)
    ended = next((r for r in results if r.status != "ok"), None)
    if ended is not None:
        return replace(ended, repeats=entries, reducer=policy.reducer)
    first = results[0]
    scores = {**case.scores, **reduce_scores([e["scores"] for e in entries], policy.reducer)}
    latency = dict(first.latency)
    for stage in ("generate", "judge"):
        got = [r.latency[stage] for r in results if stage in r.latency]
        if got:
            latency[stage] = sum(got) / len(got)
    answer = first.answer
    if answer is not None:
        used = [r.answer.usage for r in results if r.answer is not None]
        answer = replace(answer, usage=Usage(prompt_tokens=sum(u.prompt_tokens for u in used),
                                             completion_tokens=sum(u.completion_tokens for u in used),
                                             cost_usd=sum(u.cost_usd for u in used),
                                             cached=all(u.cached for u in used)))
    return replace(first, answer=answer, scores=scores, latency=latency, repeats=entries, reducer=policy.reducer)
