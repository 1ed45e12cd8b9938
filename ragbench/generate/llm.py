"""LLMGenerator: answers through any litellm model with the dataset x question-type prompts and citations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragbench.generate.citations import cited_sentences, parse_citations
from ragbench.generate.prompts import AnswerPrompt, load_answer_prompt
from ragbench.llm.endpoint import LLMEndpoint
from ragbench.types import Answer, Context, Query


class LLMGenerator:
    """Satisfies ``ragbench.protocols.Generator``.

    ``identity`` is the litellm model string plus everything else that shapes an answer (prompt hash,
    temperature, max_tokens, api_base, dataset), so a cache keyed by it never serves a stale answer;
    ``Answer.model`` is the bare model string. The API key is read from the environment variable named by ``api_key_env``; only that name is
    in the config. ``prompt`` is a file stem under ``conf/prompt/answer/`` or a path to a YAML file.
    ``batch``: the job's uncached answers go out as one provider batch at half price (``ragbench.llm.batch``;
    the same answers, so not part of ``identity``), polled every ``batch_poll_s`` seconds.
    """

    def __init__(self, *, endpoint: LLMEndpoint | None = None, prompt: str = "default", dataset: str | None = None,
                 **settings: Any) -> None:
        """``endpoint``, with ``settings`` (the flat ``llm.*`` keys of an ``LLMEndpoint``) over it."""
        ep = self.endpoint = LLMEndpoint.of("llm", endpoint, settings, batch=False)
        self.model = str(ep.model)
        self.dataset = dataset
        self.prompt: AnswerPrompt = load_answer_prompt(prompt)
        at = f",api_base={ep.api_base}" if ep.api_base else ""
        self.identity = (
            f"{ep.model}(prompt={self.prompt.hash},temperature={ep.temperature},max_tokens={ep.max_tokens}"
            f"{at},dataset={dataset})"
        )
        self.batch = bool(ep.batch)
        self.client = ep.client(batch=self.batch)

    @property
    def max_concurrency(self) -> int:
        """Cases the pipeline runs at once: the client's bound (``llm.max_concurrency: null``: the server's
        slots, known after ``preflight``; ragbench.llm.slots)."""
        return int(self.client.max_concurrency)

    def log_params(self) -> dict[str, Any]:
        """MLflow run params the config alone does not show (ragbench.protocols.LoggedParams; no cache key):
        the prompt file and its content hash."""
        return {"llm/prompt_file": self.prompt.path, "llm/prompt_hash": self.prompt.hash}

    def preflight(self) -> None:
        """One tiny request before the case loop (see ``LLMClient.preflight``)."""
        self.client.preflight()

    def prompts(self, query: Query, contexts: Sequence[Context]) -> list[list[dict[str, str]]]:
        """The messages of the request answering ``query`` (one request): for ragbench.plan."""
        return [self.prompt.messages(query, contexts, dataset=self.dataset)]

    def answer(self, query: Query, contexts: Sequence[Context]) -> Answer:
        """The answer with ``[ref_N]`` markers moved into ``citations``; raises an LLMError subclass."""
        messages = self.prompt.messages(query, contexts, dataset=self.dataset)
        reply = self.client.complete(messages)
        text, citations = parse_citations(reply.text, len(contexts))
        return Answer(
            text=text, model=self.model, latency_s=reply.latency_s, usage=reply.usage, citations=citations,
            cited=cited_sentences(reply.text, len(contexts)),
        )
