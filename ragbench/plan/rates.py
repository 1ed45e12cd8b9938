"""Measured rates the plan estimates wall time from, recorded by every finished job in the stage cache
(``<cache.dir>/rates.json``): per embedder identity the texts encoded per second (model load excluded);
per generator identity the mean completion tokens; and the seconds per LLM request keyed by role
(generation, judge), model and prompt size (``llm_rate_key``: a power-of-two bucket of the prompt's words),
since a local model's time per request grows with its prompt. A plan uses a rate of the same role, model
and prompt bucket only -- never one whose key merely contains the model name (another dataset's, or the
generator's for the judge) -- and says so when it has none instead of guessing."""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbench.expand import count_tokens
from ragbench.protocols import PromptedGenerator, PromptedJudge

if TYPE_CHECKING:
    from ragbench.cache.store import StageCache
    from ragbench.components import Components, JobResult

log = logging.getLogger(__name__)
FILE = "rates.json"


def read_rates(cache_dir: Path) -> dict[str, dict[str, float]]:
    try:
        data = json.loads((cache_dir / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(cache_dir: Path, rates: dict[str, dict[str, float]]) -> None:
    cache_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".rates-", dir=cache_dir)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(rates, fh, indent=1, sort_keys=True)
    os.replace(tmp, cache_dir / FILE)


def words(messages: Sequence[Mapping[str, str]]) -> int:
    """A request's prompt size in whitespace words (the plan's unit, that of ``context/tokens``)."""
    return sum(count_tokens(str(m.get("content", ""))) for m in messages)


def llm_rate_key(role: str, model: str, prompt_words: float) -> str:
    """The key of the seconds per request of ``role`` (generation, judge) on ``model`` at a prompt of about
    ``prompt_words`` words: ``llm judge openai/x prompt<=512w`` (the bucket: the next power of two)."""
    bucket = 1 << max(0, math.ceil(math.log2(max(prompt_words, 1.0))))
    return f"llm {role} {model} prompt<={bucket}w"


def judge_model(components: Components) -> str:
    """The judge role's model as the plan names it: the prompted judges' models, sorted and joined."""
    return ",".join(sorted({j.model for j in components.judges.values() if isinstance(j, PromptedJudge)}))


def llm_rates(components: Components, result: JobResult) -> dict[str, dict[str, Any]]:
    """Seconds per request of the generator and of the judges, each under ``llm_rate_key``: the generator's
    over its fresh (uncached) answers; the judges' as their time over the requests they sent
    (``llm/judge_calls``), at the mean prompt size of their requests."""
    out: dict[str, dict[str, Any]] = {}
    gen = components.generator
    fresh = [c for c in result.cases if c.answer is not None and not c.answer.usage.cached]
    if isinstance(gen, PromptedGenerator) and fresh:
        prompts = [p for c in fresh for p in gen.prompts(c.query, c.contexts)]
        size = sum(words(p) for p in prompts) / max(len(prompts), 1)
        out[llm_rate_key("generation", gen.model, size)] = {
            "s_per_call": sum(c.answer.latency_s for c in fresh if c.answer is not None) / len(fresh),
            "prompt_words": size, "calls": float(len(fresh))}
    judges = [j for j in components.judges.values() if isinstance(j, PromptedJudge)]
    calls = float(result.metrics.get("llm/judge_calls", 0.0))
    seconds = sum(c.latency.get("judge", 0.0) for c in result.cases if not c.failed)
    if judges and calls > 0 and seconds > 0:
        prompts = [p for c in result.cases if c.answer is not None for j in judges
                   for p in j.prompts(c.query, c.contexts, c.answer)]
        size = sum(words(p) for p in prompts) / max(len(prompts), 1)
        out[llm_rate_key("judge", judge_model(components), size)] = {
            "s_per_call": seconds / calls, "prompt_words": size, "calls": calls}
    return out


def record_rates(cache: StageCache, components: Components, result: JobResult) -> None:
    """Updates the rates file with this job's measurements; never fails the job."""
    if not cache.writes:
        return
    rates: dict[str, dict[str, Any]] = {}
    emb = components.embedder
    seconds = result.timings.get("embed", 0.0)
    if emb is not None and result.counts.get("embedded_texts", 0) and seconds > 0:
        rates[emb.identity] = {"texts_per_s": result.counts["embedded_texts"] / seconds}
    fresh = [c.answer for c in result.cases if c.answer is not None and not c.answer.usage.cached]
    if components.generator is not None and fresh:  # the plan's expected answer length
        rates[components.generator.identity] = {
            "completion_tokens": sum(a.usage.completion_tokens for a in fresh) / len(fresh)}
    try:
        rates.update(llm_rates(components, result))
    except Exception as exc:  # noqa: BLE001 - a rate is a convenience: never fails the job
        log.debug("LLM rates not measured: %s", exc)
    if not rates:
        return
    try:
        _write(cache.dir, {**read_rates(cache.dir), **rates})
    except OSError as exc:
        log.debug("rates not recorded in %s: %s", cache.dir, exc)
