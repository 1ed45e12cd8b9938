"""LocalGenerator (``llm=local``): answers with a model ragbench runs itself (ragbench.llm.local), with the
same prompts and citations as ``LLMGenerator``, and a rule for prompts longer than the model's window.

``context_overflow=truncate_contexts`` drops the lowest-ranked contexts until the prompt fits the window
less ``max_tokens`` (counted by the model's own tokenizer; each cut prompt counts in
``counts/context_truncated``); ``refuse`` fails the case in one line instead. The cost is logged as 0 USD,
tagged ``ragbench.cost_basis=local``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ragbench.generate.citations import cited_sentences, parse_citations
from ragbench.generate.prompts import AnswerPrompt, load_answer_prompt
from ragbench.llm.local.client import LLMContextError, LocalClient
from ragbench.session import LEDGER
from ragbench.types import Answer, Context, Query

COST_BASIS = "local"


class LocalGenerator:
    """Satisfies ``ragbench.protocols.Generator``. ``identity`` holds everything that shapes an answer;
    ``cost_basis``: its 0 USD is no price (the run tag ``ragbench.cost_basis=local``,
    ragbench.llm.pricing)."""

    cost_basis = COST_BASIS

    def __init__(
        self,
        *,
        model: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        threads: int | None = None,
        batch_size: int = 8,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = 0,
        max_tokens: int = 256,
        context_overflow: str = "truncate_contexts",
        max_reply_chars: int = 100_000,
        prompt: str = "default",
        dataset: str | None = None,
        api_base: str | None = None,
        api_key_env: str | None = None,
    ) -> None:
        """``api_base`` and ``api_key_env`` (litellm's keys, read by ``datasets generate``'s critic) are
        unused."""
        self.dataset = dataset
        self.prompt: AnswerPrompt = load_answer_prompt(prompt)
        self.client = LocalClient(
            model=model,
            temperature=temperature,
            max_tokens=max_tokens,
            role="llm",
            max_reply_chars=max_reply_chars,
            device=device,
            dtype=dtype,
            threads=threads,
            batch_size=batch_size,
            top_p=top_p,
            seed=seed,
            context_overflow=context_overflow,
        )
        self.model = self.client.model
        sampled = f",top_p={top_p},seed={seed}" if temperature > 0 else ""
        self.identity = (
            f"{self.model}(prompt={self.prompt.hash},temperature={temperature}{sampled},"
            f"max_tokens={max_tokens},dtype={dtype},context_overflow={context_overflow},"
            f"dataset={dataset})"
        )
        self.max_concurrency = 1  # one model: the cases' requests are batched in waves, not raced
        self._truncated: set[str] = set()
        self._lock = threading.Lock()

    def log_params(self) -> dict[str, Any]:
        """The prompt file and hash, and the model's parameter count once loaded."""
        return {
            "llm/prompt_file": self.prompt.path,
            "llm/prompt_hash": self.prompt.hash,
            "llm/local_model": self.model,
        }

    def preflight(self) -> None:
        """Loads the model before the case loop (a bad file, too little memory: one line, up front)."""
        self.client.preflight()

    def prompts(self, query: Query, contexts: Sequence[Context]) -> list[list[dict[str, str]]]:
        query, kept = self.fitted(query, contexts, count=False)
        return [self.prompt.messages(query, kept, dataset=self.dataset)]

    def fitted(self, query: Query, contexts: Sequence[Context], *, count: bool = True) -> tuple[Query, list[Context]]:
        """``fit``, and for a conversation's turn whose history leaves no room even without contexts
        (``truncate_contexts``), its oldest history turns dropped until the prompt fits; under ``refuse``
        the error names the history settings too."""
        try:
            return query, self.fit(query, contexts, count=count)
        except LLMContextError as exc:
            if not query.history:
                raise
            if self.client.context_overflow == "refuse":
                raise LLMContextError(f"{exc}; or shorten the turn's history (generate.history_turns, "
                                      "generate.history_max_tokens)") from None
            error = exc
        history = list(query.history)
        while history:
            history.pop(0)  # the oldest turn first
            shorter = replace(query, history=tuple(history))
            try:
                return shorter, self.fit(shorter, contexts, count=count)
            except LLMContextError as exc:
                error = exc
        raise error

    def fit(self, query: Query, contexts: Sequence[Context], *, count: bool = True) -> list[Context]:
        """``contexts`` less the lowest-ranked ones the window has no room for (``context_overflow``)."""
        kept = list(contexts)
        room = self.client.room()
        tokens = self.client.count_tokens(self.prompt.messages(query, kept, dataset=self.dataset))
        if tokens <= room:
            return kept
        if self.client.context_overflow == "refuse":
            raise LLMContextError(
                self.client.overflow_message(tokens, self.client.local_model().context_window).replace(
                    "the prompt has", f"the prompt of question {query.qid!r} has"
                )
            )
        while kept and tokens > room:
            kept.pop()  # the contexts come best first: the last is the lowest-ranked
            tokens = self.client.count_tokens(self.prompt.messages(query, kept, dataset=self.dataset))
        if tokens > room:
            raise LLMContextError(
                self.client.overflow_message(tokens, self.client.local_model().context_window).replace(
                    "the prompt has", f"the prompt of question {query.qid!r} has, with no context,"
                )
            )
        with self._lock:
            first = query.qid not in self._truncated
            self._truncated.add(query.qid)
        if count and first:  # a question's prompt is fitted once per job: counted once
            LEDGER.truncated(self.client.role)
        return kept

    def answer(self, query: Query, contexts: Sequence[Context]) -> Answer:
        """The answer with ``[ref_N]`` markers moved into ``citations``; raises an LLMError subclass."""
        query, kept = self.fitted(query, contexts)
        reply = self.client.complete(self.prompt.messages(query, kept, dataset=self.dataset))
        text, citations = parse_citations(reply.text, len(kept))
        return Answer(
            text=text, model=self.model, latency_s=reply.latency_s, usage=reply.usage, citations=citations,
            cited=cited_sentences(reply.text, len(kept)),
        )
