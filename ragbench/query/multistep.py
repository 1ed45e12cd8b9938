"""Multi-step retrieval (``retrieval.mode=single|iterative|adaptive``) and each case's hops.

- ``single`` (the default): one retrieval per question (per sub-question under ``query=decompose``).
- ``iterative`` (IRCoT-style): after the first retrieval the model reads the passages found so far and
  writes the next search query, or ``ENOUGH``; up to ``retrieval.max_hops`` hops. Its requests are the
  generator's model's (its client, role included), sent in the job's ``iterate`` wave
  (``ragbench.llm.wave``): each case's step waits for its reply, batched across cases with the local
  model or ``llm.batch``, and searches again when it comes.
- ``adaptive``: per question, retrieve or answer closed-book: retrieved when the retriever's top score
  reaches ``retrieval.adaptive_threshold``; with no threshold, the model is asked whether the question
  needs documents (the same wave). ``retrieval/adaptive/retrieved`` is the share retrieved.

A hop is one searched text with its ranking (``ragbench.judge.hops.HopInput``); the hops of a case are
its sub-questions (decompose), then its iterations. A job records the hops of each case when it is
multi-step, or when its evaluation set has questions whose evidence spans documents (MultiHop-RAG): a
single-step job's one hop is the question, so the jobs of a sweep compare on the same per-hop keys.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from ragbench.errors import BudgetExhaustedError, ConfigError, JobStopped
from ragbench.judge.hops import HopInput, multi_document
from ragbench.query.decompose import HopTransform
from ragbench.query.plan import QueryPlan, interleave
from ragbench.retrieval.hybrid import rrf_fuse
from ragbench.types import Hit, Query
from ragbench.validate import integer

MODES = ("single", "iterative", "adaptive")
ENOUGH = "ENOUGH"
PASSAGE_CHARS = 400  # each passage shown to the model in an iteration's prompt is cut to this
NEXT_PROMPT = (
    "You are finding the passages that answer a question, one search at a time.\n\nQuestion: {question}\n\n"
    "Searches so far:\n{searches}\n\nPassages found so far:\n{passages}\n\n"
    "If these passages are enough to answer the question, reply "
    f"with the single word {ENOUGH}. Otherwise reply with one new search query for the missing "
    "information, and nothing else."
)
NEED_PROMPT = (
    "Does answering the question below need facts from documents (news, records, conversations) rather "
    "than general knowledge? Reply YES or NO.\n\nQuestion: {question}"
)
_LABEL = re.compile(r"^\s*(?:next\s+)?(?:search\s+)?(?:query|search)\s*:\s*", re.IGNORECASE)


@dataclass(frozen=True)
class MultiStep:
    """``retrieval.mode``, ``retrieval.max_hops`` and ``retrieval.adaptive_threshold``."""

    mode: str = "single"
    max_hops: int = 3
    adaptive_threshold: float | None = None

    @property
    def asks(self) -> bool:
        """Whether the mode sends requests to the generator's model (an ``iterate`` wave)."""
        return self.mode == "iterative" or (self.mode == "adaptive" and self.adaptive_threshold is None)

    def params(self) -> dict[str, Any]:
        if self.mode == "single":
            return {}
        return {"retrieval/mode": self.mode, "retrieval/max_hops": self.max_hops,
                "retrieval/adaptive_threshold": self.adaptive_threshold}


def multistep_options(cfg: DictConfig | Mapping[str, Any]) -> MultiStep:
    """``retrieval.mode|max_hops|adaptive_threshold`` as a ``MultiStep``; one-line ConfigErrors."""
    node = cfg.get("retrieval") or {}
    mode = str(node.get("mode") or "single")
    if mode not in MODES:
        raise ConfigError(f"retrieval.mode={mode!r} is not known; use one of {list(MODES)}")
    hops = node.get("max_hops")
    hops = 3 if hops is None else integer("retrieval.max_hops", hops, lo=1, hi=16, default=3)
    threshold = node.get("adaptive_threshold")
    if threshold is not None:
        try:
            threshold = float(threshold)
        except (TypeError, ValueError):
            raise ConfigError(f"retrieval.adaptive_threshold={threshold!r} is not a number; give the "
                              "retriever score above which a question is retrieved, or null to ask the model"
                              ) from None
    return MultiStep(mode=mode, max_hops=hops, adaptive_threshold=threshold)


def records_hops(step: MultiStep, transform: Any, queries: Sequence[Query]) -> bool:
    """Whether the job records each case's hops (multi-step, or a set with multi-document evidence)."""
    return (step.mode != "single" or isinstance(transform, HopTransform)
            or multi_document([[e.doc_id or "" for e in q.evidence] for q in queries]))


def first_hops(plan: QueryPlan, flat: Sequence[Sequence[Hit]], fused: Sequence[Sequence[Hit]], transform: Any,
               queries: Sequence[Query], text_s: Sequence[float]) -> list[list[HopInput]]:
    """Each question's hops as the search wave found them: its sub-questions under a decomposition (each
    with its share of the decomposition's tokens; under routing, ``transform.decomposed(qid)`` says which
    questions were decomposed), else one hop, the question and its (fused) ranking."""
    out: list[list[HopInput]] = []
    for i, (q, start) in enumerate(zip(queries, plan.starts, strict=True)):
        texts = plan.variants[i]
        if isinstance(transform, HopTransform) and getattr(transform, "decomposed", lambda qid: True)(q.qid):
            tokens = transform.spent(q.qid)
            out.append([HopInput(t, flat[start + j], tokens=tokens // len(texts) + (j < tokens % len(texts)),
                                 seconds=text_s[start + j] if text_s else None, source="decompose")
                        for j, t in enumerate(texts)])
        else:
            secs = sum(text_s[start: start + len(texts)]) if text_s else None
            out.append([HopInput(q.text, fused[i], seconds=secs, source="question")])
    return out


def merged(hops: Sequence[HopInput], merge: str, k_rrf: float, k: int) -> list[Hit]:
    """The case's ranking from its hops' rankings: RRF or interleaved; one hop's ranking as it is."""
    rankings = [list(h.hits) for h in hops]
    if len(rankings) == 1:
        return rankings[0][:k]
    if merge == "interleave":
        return interleave(rankings, k)
    return rrf_fuse(rankings, weights=[1.0] * len(rankings), k_rrf=k_rrf, k=k)


def parse_next(reply: str, searched: Sequence[str]) -> str | None:
    """The next search query of an iteration's reply; None when the model says it has enough, the reply
    is empty, or the query repeats one already searched."""
    lines = [line.strip() for line in reply.strip().splitlines() if line.strip()]
    if not lines:
        return None
    text = " ".join(_LABEL.sub("", lines[0]).split()).strip("\"'")
    if not text or text.upper().rstrip(".!").startswith(ENOUGH):
        return None
    if any(text.lower() == s.lower() for s in searched):
        return None
    return text


def needs_retrieval(reply: str) -> bool:
    """An adaptive judge's reply: NO means closed-book; anything else retrieves."""
    return not reply.strip().upper().startswith("NO")


Search = Callable[[str, Query], tuple[list[Hit], float]]  # a query text -> its hits, seconds


@dataclass
class StepResult:
    """What one case's multi-step step made: its hops and its ranking, and for adaptive whether it
    retrieved (``adaptive``: the record's ``trace.adaptive``)."""

    hops: list[HopInput]
    hits: list[Hit]
    adaptive: dict[str, Any] | None = None
    error: str = ""


def _ask(client: Any, prompt: str) -> tuple[str, int, float]:
    """One request to the generator's model: its text, tokens and seconds; a budget stop stops the job."""
    start = time.perf_counter()
    try:
        reply = client.complete([{"role": "user", "content": prompt}])
    except BudgetExhaustedError as exc:
        raise JobStopped(f"stopped by budget during multi-step retrieval: {exc}; fix: raise the budget and "
                         "rerun (the replies paid for are cached)") from None
    return reply.text, reply.usage.prompt_tokens + reply.usage.completion_tokens, time.perf_counter() - start


def iterate(query: Query, hops: list[HopInput], client: Any, search: Search, passage: Callable[[str], str],
            *, max_hops: int, topk: int) -> tuple[list[HopInput], str]:
    """IRCoT-style hops after the first ones, up to ``max_hops`` in all: the model reads the passages found
    so far (each hop's top-k) and writes the next query, or ENOUGH. An LLM failure ends the iteration (the
    hops so far kept; its one-line reason returned and recorded)."""
    hops = list(hops)
    while len(hops) < max_hops:
        seen: dict[str, None] = {}
        for h in hops:
            seen.update(dict.fromkeys(x.chunk_id for x in list(h.hits)[:topk]))
        shown = "\n".join(f"[{n}] {passage(cid)[:PASSAGE_CHARS]}" for n, cid in enumerate(seen, 1))
        shown = shown or "(none)"
        try:
            text, tokens, llm_s = _ask(client, NEXT_PROMPT.format(
                question=query.text, searches="\n".join(f"- {h.query}" for h in hops), passages=shown))
        except JobStopped:
            raise
        except Exception as exc:  # noqa: BLE001 - the case keeps the hops it has; the reason is recorded
            return hops, f"{type(exc).__name__}: {exc}"[:200]
        nxt = parse_next(text, [h.query for h in hops])
        if nxt is None:
            break
        hits, secs = search(nxt, query)
        hops.append(HopInput(nxt, hits, tokens=tokens, seconds=secs + llm_s, source="iterative"))
    return hops, ""


def adapt(query: Query, hops: list[HopInput], client: Any,
          threshold: float | None) -> tuple[bool, dict[str, Any]]:
    """Whether the case retrieves (adaptive mode), with how it was decided."""
    top = max((h.score for hop in hops for h in list(hop.hits)[:1]), default=None)
    if threshold is not None:
        return top is not None and top >= threshold, {"by": "threshold", "top_score": top}
    try:
        text, tokens, _ = _ask(client, NEED_PROMPT.format(question=query.text))
    except JobStopped:
        raise
    except Exception as exc:  # noqa: BLE001 - undecided: retrieve (the always-retrieve baseline)
        return True, {"by": "judge", "error": f"{type(exc).__name__}: {exc}"[:200]}
    return needs_retrieval(text), {"by": "judge", "reply": text.strip()[:40], "tokens": tokens}


def run_step(step: MultiStep, query: Query, hops: list[HopInput], client: Any, search: Search,
             passage: Callable[[str], str], *, merge: str, k_rrf: float, k: int, topk: int) -> StepResult:
    """One case's multi-step work in the ``iterate`` wave."""
    if step.mode == "adaptive":
        retrieve, how = adapt(query, hops, client, step.adaptive_threshold)
        info = {"retrieved": retrieve, **how}
        if not retrieve:  # closed-book: no hop, no context
            return StepResult(hops=[], hits=[], adaptive=info)
        return StepResult(hops=hops, hits=merged(hops, merge, k_rrf, k), adaptive=info)
    done, error = iterate(query, hops, client, search, passage, max_hops=step.max_hops, topk=topk)
    return StepResult(hops=done, hits=merged(done, merge, k_rrf, k), error=error)
