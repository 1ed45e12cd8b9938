"""JSON questions to a judge model: one prompt file of templates, replies parsed into typed values, a
malformed reply asked again (``parse_retries`` times) and then counted as a failed judgment, usage summed.

Shared by the reference-free judge (``ragbench.judge.reference_free``) and the claim judge
(``ragbench.judge.claims``); the LLM calls go through ``ragbench.llm.client.LLMClient`` (retries,
budget, concurrency bound), like the rubric judge's.
"""

from __future__ import annotations

import json
import logging
import re
import string
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ragbench.errors import ConfigError
from ragbench.generate.prompts import (
    check_template,
    escape_reference,
    literal,
    read_prompt_file,
    render_references,
    require_str,
    resolve_prompt_file,
)
from ragbench.llm.endpoint import LLMEndpoint
from ragbench.metric_info import MetricInfo
from ragbench.types import Context

if TYPE_CHECKING:
    from ragbench.llm.client import LLMClient

log = logging.getLogger(__name__)
T = TypeVar("T")
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
REFERENCE = string.Template('<reference id="ref_$n" title="$title">\n$text\n</reference>')
NO_REFERENCES = "(no reference passages were given)"


def json_field(text: str, name: str) -> Any:
    """``name`` of the JSON object in a reply (the whole reply, a code fence, or the outermost braces);
    None when no object with that field is found."""
    candidates = [text.strip(), *(m.group(1).strip() for m in _FENCE.finditer(text))]
    match = _OBJECT.search(text)
    if match:
        candidates.append(match.group(0))
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(data, dict) and name in data:
            return data[name]
    return None


def int_in(allowed: Collection[int], name: str = "score") -> Callable[[str], int | None]:
    """A parser of ``{"<name>": <int in allowed>}``."""

    def parse(text: str) -> int | None:
        value = json_field(text, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or float(value) not in allowed:
            return None
        return int(value)

    return parse


def str_list(name: str) -> Callable[[str], list[str] | None]:
    """A parser of ``{"<name>": ["...", ...]}`` (blank entries dropped; an empty list is valid)."""

    def parse(text: str) -> list[str] | None:
        value = json_field(text, name)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return None
        return [v.strip() for v in value if v.strip()]

    return parse


def verdict_list(n: int, name: str = "verdicts") -> Callable[[str], list[int] | None]:
    """A parser of ``{"<name>": [0|1, ...]}`` with exactly ``n`` entries (one per claim asked about)."""

    def parse(text: str) -> list[int] | None:
        value = json_field(text, name)
        if not isinstance(value, list) or len(value) != n:
            return None
        out = []
        for v in value:
            if isinstance(v, bool):
                out.append(int(v))
            elif isinstance(v, int | float) and float(v) in (0.0, 1.0):
                out.append(int(v))
            else:
                return None
        return out

    return parse


@dataclass(frozen=True)
class PromptSet:
    """A loaded prompt file: a system prompt and named user-message templates."""

    path: str
    sha256: str
    system: str
    templates: Mapping[str, string.Template]

    @property
    def hash(self) -> str:
        return self.sha256[:16]

    def messages(self, name: str, **values: str) -> list[dict[str, str]]:
        """System + user messages of template ``name``; every value is escaped (no tag can be closed)."""
        user = self.templates[name].substitute(values)
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


def load_prompts(spec: str, *, kind: str, variables: Mapping[str, Sequence[str]]) -> PromptSet:
    """A prompt file with one template per name in ``variables`` (each using only its listed variables)."""
    path = resolve_prompt_file(spec, kind=kind)
    data, sha = read_prompt_file(path)
    raw = data.get("prompts")
    if not isinstance(raw, dict):
        raise ConfigError(f"prompt file {path}: 'prompts' must map a prompt name to its template; "
                          f"fix: give {sorted(variables)}")
    missing = sorted(set(variables) - set(raw))
    if missing:
        raise ConfigError(f"prompt file {path}: no prompt {missing[0]!r}; fix: add it (needed: {sorted(variables)})")
    templates = {name: check_template(require_str(raw, name, path), allowed, where=f"prompt file {path}, prompts.{name}")
                 for name, allowed in variables.items()}
    system = literal(require_str(data, "system", path), where=f"prompt file {path}, key 'system'")
    return PromptSet(path=str(path), sha256=sha, system=system, templates=templates)


def references(contexts: Sequence[Context]) -> str:
    """The contexts as numbered reference blocks, as the rubric judge shows them."""
    return render_references(contexts, REFERENCE, NO_REFERENCES)


def esc(text: str) -> str:
    return escape_reference(text)


# the usage and failures of the judges that ask through a Tally (judge/rf, judge/claims): ``judge/<name>/...``
METRICS = {
    "judge/<name>/prompt_tokens": MetricInfo("prompt tokens the judge's requests used", "the provider's usage "
                                             "(litellm)", higher_is_better=False, kind="diagnostic"),
    "judge/<name>/completion_tokens": MetricInfo("completion tokens the judge's requests used", "the provider's "
                                                 "usage (litellm)", higher_is_better=False, kind="diagnostic"),
    "judge/<name>/cost_usd": MetricInfo("cost of the judge's requests, US dollars", "litellm's cost map",
                                        higher_is_better=False, kind="diagnostic"),
    "judge/<name>/judge_failed": MetricInfo("1 when some ask got no parsable reply after its retries", "ragbench",
                                            higher_is_better=False, kind="diagnostic"),
}


@dataclass
class Tally:
    """One judgment's usage and failed asks (a judge call may run in many threads: one Tally each)."""

    prefix: str
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    cost_usd: float = 0.0
    failed: int = 0
    replies: list[str] = field(default_factory=list)

    def scores(self) -> dict[str, float]:
        return {f"{self.prefix}/prompt_tokens": self.prompt_tokens,
                f"{self.prefix}/completion_tokens": self.completion_tokens,
                f"{self.prefix}/cost_usd": self.cost_usd, f"{self.prefix}/judge_failed": float(self.failed > 0)}


def asking_endpoint(name: str, endpoint: LLMEndpoint | None, settings: Mapping[str, Any],
                    parse_retries: int) -> LLMEndpoint:
    """The endpoint of a judge that asks JSON questions (``judges.<name>``): ``endpoint`` (the judge-wide
    ``judge.*`` keys, ragbench.judge.build) with ``settings`` (its node's flat ``LLMEndpoint`` keys, e.g. its
    ``max_tokens``, 512 by default: a claim list needs room) over it; its ``parse_retries`` checked."""
    if parse_retries < 0:
        raise ConfigError(f"judges.{name}.parse_retries must be >= 0, got {parse_retries}")
    return LLMEndpoint.of("judge", endpoint, settings, max_tokens=512)


def ask(client: LLMClient, messages: list[dict[str, str]], parse: Callable[[str], T | None], tally: Tally, *,
        what: str, parse_retries: int) -> T | None:
    """The parsed reply, asking again up to ``parse_retries`` times while it is malformed; None (and a
    failed ask in ``tally``) when no reply parses. A failed call (after the client's retries) raises.
    Every reply is cached, a malformed one too (it was paid for; each ask has its own key): a rerun reads
    the same replies and counts the same failed asks, without paying for them again."""
    for attempt in range(parse_retries + 1):
        reply = client.complete(messages, key_extra={"attempt": attempt} if attempt else None)
        tally.prompt_tokens += reply.usage.prompt_tokens
        tally.completion_tokens += reply.usage.completion_tokens
        tally.cost_usd += reply.usage.cost_usd
        value = parse(reply.text)
        if value is not None:
            tally.replies.append(reply.text[:500])
            return value
        log.warning("judge %s: malformed %s reply (attempt %d of %d): %.200r", client.model, what, attempt + 1,
                    parse_retries + 1, reply.text)
    tally.failed += 1
    return None
