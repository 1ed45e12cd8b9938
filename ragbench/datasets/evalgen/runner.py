"""One generation run: for each planned slot ask the generator, check the quotes with the benchmark's own
evidence matcher, ask the critic, drop near-duplicates, and journal the outcome (kept or dropped, why)."""

from __future__ import annotations

import logging
import threading
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ragbench.datasets.evalgen.dedup import Deduplicator
from ragbench.datasets.evalgen.journal import Journal, Outcome
from ragbench.datasets.evalgen.plan import TWO_PASSAGE_TYPES, Slot, passages
from ragbench.datasets.evalgen.prompts import (
    Draft,
    GenerationPrompts,
    MalformedReply,
    parse_draft,
    parse_scores,
)
from ragbench.errors import LLMError
from ragbench.evidence import EvidenceMap, EvidenceMatcher, covers
from ragbench.llm import errors as llm_errors
from ragbench.llm.errors import LLMAuthError, LLMConnectionError
from ragbench.retrieval.bm25 import BM25Retriever
from ragbench.text import tokens
from ragbench.types import ChunkTree, Evidence, Level, Query

if TYPE_CHECKING:
    from ragbench.llm.client import LLMClient

log = logging.getLogger(__name__)
T = TypeVar("T")
MIN_QUOTE_TOKENS = 3
RELEVANCE_DIRECT = 3  # EasyRAG's grade for direct / necessary evidence
LLM_ERROR = "llm_error"  # dropped for this run only: not journaled, so the next run asks again


@dataclass(frozen=True)
class Settings:
    """How many items, how strict: ``n`` kept items at most, from at most ``len(slots)`` attempts."""

    n: int
    threshold: int = 3
    parse_retries: int = 1
    max_concurrency: int = 4
    related: int = 3  # corpus paragraphs (BM25) the critic also reads for an unanswerable question


@dataclass
class RunResult:
    """Outcomes of every slot tried (resumed ones included) and this run's transient failures."""

    outcomes: list[Outcome]
    llm_errors: Counter[str] = field(default_factory=Counter)

    @property
    def kept(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "kept"]

    def dropped(self) -> Counter[str]:
        out = Counter(o.reason or "?" for o in self.outcomes if o.status == "dropped")
        out.update({f"{LLM_ERROR}:{k}": v for k, v in self.llm_errors.items()})
        return out

    def cost_usd(self) -> float:
        return sum(o.cost_usd for o in self.outcomes)


class SlotWorker:
    """Turns one slot into an Outcome (thread-safe: the clients bound their own concurrency)."""

    def __init__(self, *, tree: ChunkTree, prompts: GenerationPrompts, generator: LLMClient, critic: LLMClient,
                 settings: Settings) -> None:
        self.tree = tree
        self.prompts = prompts
        self.generator = generator
        self.critic = critic
        self.settings = settings
        self.matcher = EvidenceMatcher(tree)
        self._bm25: BM25Retriever | None = None
        self._lock = threading.Lock()

    def related(self, question: str, exclude: Sequence[str]) -> list[str]:
        """The paragraphs of the whole corpus that BM25 ranks best for ``question`` (``exclude`` left out):
        an "unanswerable" question is checked against them, not only against its own passages."""
        if self.settings.related < 1:
            return []
        with self._lock:  # one index, built on first use; bm25s scoring is not documented as thread-safe
            if self._bm25 is None:
                paras = self.tree.at_level(Level.PARAGRAPH)
                self._bm25 = BM25Retriever()
                self._bm25.build(ids=[c.chunk_id for c in paras], texts=[c.text for c in paras])
            hits = self._bm25.search(texts=[question], k=self.settings.related + len(exclude))[0]
        return [h.chunk_id for h in hits if h.chunk_id not in exclude][: self.settings.related]

    def _ask(self, client: LLMClient, messages: list[dict[str, str]], parse: Callable[[str], T]
             ) -> tuple[T | None, str, float]:
        """(parsed reply or None, what was wrong, cost of fresh calls); a malformed reply is asked again
        ``parse_retries`` times, each attempt its own request. Every reply is cached like any other (it was
        paid for): a rerun replays the same attempts and sends nothing."""
        cost, problem = 0.0, ""
        for attempt in range(1 + self.settings.parse_retries):
            reply = client.complete(messages, key_extra={"parse_attempt": attempt} if attempt else None)
            cost += 0.0 if reply.usage.cached else reply.usage.cost_usd
            try:
                return parse(reply.text), "", cost
            except MalformedReply as exc:
                problem = str(exc)
                log.debug("%s: malformed reply (%s), attempt %d", client, exc, attempt + 1)
        return None, problem, cost

    def _match(self, quote: str, docs: tuple[str, ...]) -> EvidenceMap:
        """The benchmark's own matching of one quote, within ``docs`` (all documents when empty)."""
        return self.matcher.match(Query(qid="quote", text="", answers=(), question_type="",
                                        evidence=(Evidence(text=quote),), doc_ids=docs))

    def _evidence(self, draft: Draft, slot: Slot) -> tuple[list[dict[str, Any]], str, str]:
        """EasyRAG evidence of the draft's quotes, or ([], reason, quote) for the first that fails."""
        docs = tuple(dict.fromkeys(self.tree[c].doc_id for c in slot.chunk_ids))
        out: list[dict[str, Any]] = []
        for quote in draft.quotes:
            if len(tokens(quote)) < MIN_QUOTE_TOKENS:  # "4." or "Yes" is found anywhere and proves nothing
                return [], "quote_too_short", quote
            emap = self._match(quote, docs)
            inside = [a for a in emap.anchors[0] if covers(self.tree, a, slot.chunk_ids)]
            if not inside:  # say whether the quote is anywhere at all (searched only when it failed here)
                elsewhere = bool(emap.anchors[0]) or bool(self._match(quote, ()).anchors[0])
                return [], "quote_outside_passages" if elsewhere else "quote_not_found", quote
            node = inside[0]
            out.append({"document_id": self.tree[node].doc_id, "node_id": node, "quote": quote,
                        "relevance": RELEVANCE_DIRECT, "match": emap.how[0]})
        if draft.question_type in TWO_PASSAGE_TYPES:
            used = {p for e in out for p in slot.chunk_ids if covers(self.tree, e["node_id"], (p,))}
            if len(used) < 2:
                return [], "quotes_from_one_passage", draft.quotes[0] if draft.quotes else ""
        return out, "", ""

    def __call__(self, slot: Slot) -> Outcome:
        ps = passages(self.tree, slot.chunk_ids)

        def dropped(reason: str, detail: str, cost: float) -> Outcome:
            return Outcome(slot=slot.index, question_type=slot.question_type, status="dropped", reason=reason,
                           detail=detail[:200], cost_usd=cost)

        try:
            draft, problem, cost = self._ask(self.generator, self.prompts.generate(slot.question_type, ps),
                                             lambda t: parse_draft(t, slot.question_type))
            if draft is None:
                return dropped("malformed_reply", problem, cost)
            evidence, reason, quote = self._evidence(draft, slot)
            if reason:
                return dropped(reason, quote, cost)
            shown = ps
            if draft.question_type == "unanswerable":
                shown = ps + passages(self.tree, self.related(draft.question, slot.chunk_ids))
            scores, problem, critic_cost = self._ask(self.critic, self.prompts.critic(draft, shown), parse_scores)
        except (LLMAuthError, LLMConnectionError):
            raise  # every later call would fail the same way: stop and say how to fix it
        except LLMError as exc:
            return dropped(LLM_ERROR, type(exc).__name__, 0.0)
        cost += critic_cost
        if scores is None:
            return dropped("critic_malformed_reply", problem, cost)
        low = scores.low(self.settings.threshold)
        if low:
            detail = ", ".join(f"{c}={getattr(scores, c)}" for c in low) + f" < {self.settings.threshold}"
            return dropped(f"critic_low_{low[0]}", detail, cost)
        item = {
            "id": f"gen_{slot.index:05d}", "question": draft.question, "reference_answer": draft.answer,
            "evidence": evidence, "difficulty": draft.difficulty, "question_type": draft.question_type,
            "answerable": draft.question_type != "unanswerable", "source_chunks": list(slot.chunk_ids),
            "critic": {"groundedness": scores.groundedness, "standalone": scores.standalone,
                       "answerability": scores.answerability, "reasoning": scores.reasoning},
        }
        return Outcome(slot=slot.index, question_type=slot.question_type, status="kept", item=item, cost_usd=cost)


# the fix for each reason a slot is dropped ("critic_low_*" by prefix; "llm_error:<class>" by the LLM error's own fix)
DROP_FIXES = {
    "malformed_reply": "the generator's replies are not the JSON the prompt asks for: use a model that follows "
                       "instructions (llm.model=...), raise parse_retries, or raise llm.max_tokens if replies are cut off",
    "critic_malformed_reply": "the critic's replies are not the JSON scores asked for: set critic.model to a model "
                              "that follows instructions, or raise parse_retries",
    "quote_not_found": "the generator's quotes are not in the documents: use a model that copies text verbatim "
                       "(llm.model=...) or lower llm.temperature",
    "quote_outside_passages": "the generator quotes other parts of the documents than the passages shown: use a "
                              "stronger model (llm.model=...) or lower llm.temperature",
    "quote_too_short": "the generator's quotes are fragments of under 3 words: use a stronger model (llm.model=...)",
    "quotes_from_one_passage": "two-passage questions quote one passage only: lower types.multi_hop and "
                               "types.comparison, or use a stronger model (llm.model=...)",
    "critic_low": "the critic scores the questions below critic.threshold: lower critic.threshold, or use a "
                  "stronger generator (llm.model=...)",
    "near_duplicate": "the questions repeat each other: raise dedup.threshold, or add documents",
}


def drop_fix(reason: str) -> str:
    """What to change so fewer slots are dropped for ``reason`` (a key of ``RunResult.dropped``)."""
    if reason.startswith(f"{LLM_ERROR}:"):
        cls = getattr(llm_errors, reason.split(":", 1)[1], None)
        if isinstance(cls, type) and issubclass(cls, LLMError):
            return llm_errors.fix_for(cls)
        return "check the llm settings and run the same command again to retry the failed calls"
    return DROP_FIXES.get("critic_low" if reason.startswith("critic_low_") else reason,
                          "raise max_attempts (or lower critic.threshold)")


Progress = Callable[[int, int, int, float], None]  # (slots done, slots planned, items kept, cost so far)


def run(slots: Sequence[Slot], worker: Callable[[Slot], Outcome], journal: Journal, dedup: Deduplicator,
        settings: Settings, progress: Progress | None = None) -> RunResult:
    """Runs the slots not in the journal, ``max_concurrency`` at a time, deciding in slot order; stops
    once ``n`` items are kept."""
    result = RunResult(outcomes=[journal.done[s.index] for s in slots if s.index in journal.done])
    for o in result.kept:
        assert o.item is not None
        dedup.add(str(o.item["question"]), str(o.item["id"]))
    todo = deque(s for s in slots if s.index not in journal.done)
    done = len(slots) - len(todo)
    report = progress or (lambda done, total, kept, cost: None)

    def tick(done: int, total: int, kept: int) -> None:
        report(done, total, kept, result.cost_usd())

    tick(done, len(slots), len(result.kept))
    window: deque[Future[Outcome]] = deque()
    with ThreadPoolExecutor(max_workers=settings.max_concurrency, thread_name_prefix="evalgen") as pool:
        try:
            while (todo or window) and len(result.kept) < settings.n:
                # look ahead no further than the items still missing: fewer calls past the n-th kept item
                while todo and len(window) < min(settings.max_concurrency, settings.n - len(result.kept)):
                    window.append(pool.submit(worker, todo.popleft()))
                outcome = window.popleft().result()
                done += 1
                if outcome.reason == LLM_ERROR:
                    result.llm_errors[outcome.detail] += 1
                    tick(done, len(slots), len(result.kept))
                    continue
                if outcome.status == "kept":
                    item = outcome.item
                    assert item is not None
                    near = dedup.near(str(item["question"]))
                    if near is not None:
                        outcome = Outcome(slot=outcome.slot, question_type=outcome.question_type, status="dropped",
                                          reason="near_duplicate", detail=f"similarity {near[1]:.2f} to {near[0]}",
                                          cost_usd=outcome.cost_usd)
                    else:
                        dedup.add(str(item["question"]), str(item["id"]))
                journal.record(outcome)
                result.outcomes.append(outcome)
                tick(done, len(slots), len(result.kept))
        finally:
            for f in window:
                f.cancel()
    result.outcomes.sort(key=lambda o: o.slot)
    return result
