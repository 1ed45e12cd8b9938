"""Question-generation and critic prompts (conf/prompt/generate/*.yaml) and the parsing of their replies."""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragbench.errors import ConfigError
from ragbench.generate.prompts import (
    check_template,
    escape_reference,
    literal,
    read_prompt_file,
    require_str,
    resolve_prompt_file,
)

QUESTION_TYPES = ("factual", "multi_hop", "comparison", "temporal", "unanswerable")
DIFFICULTIES = ("easy", "medium", "hard")
CRITERIA = ("groundedness", "standalone", "answerability")
DEFAULT_DIFFICULTY = {"factual": "easy", "temporal": "medium", "unanswerable": "medium",
                      "multi_hop": "hard", "comparison": "hard"}
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)

Messages = list[dict[str, str]]


class MalformedReply(ValueError):
    """A model reply that is not the JSON object the prompt asks for (``reason`` names what is wrong)."""


@dataclass(frozen=True)
class Passage:
    """A passage shown to the model: its chunk, title and text."""

    chunk_id: str
    title: str
    text: str


@dataclass(frozen=True)
class Draft:
    """A parsed generator reply."""

    question: str
    answer: str | None
    quotes: tuple[str, ...]
    question_type: str
    difficulty: str


@dataclass(frozen=True)
class Scores:
    """A parsed critic reply: 1-5 per criterion."""

    groundedness: int
    standalone: int
    answerability: int
    reasoning: str

    def low(self, threshold: int) -> list[str]:
        """The criteria scored below ``threshold``."""
        return [c for c in CRITERIA if getattr(self, c) < threshold]


@dataclass(frozen=True)
class GenerationPrompts:
    """A loaded prompt file: builds generator and critic messages."""

    path: str
    sha256: str
    generate_system: str
    generate_user: string.Template
    types: Mapping[str, str]
    passage: string.Template
    critic_system: str
    critic_user: string.Template
    critic_kinds: Mapping[str, str]
    critic_answerability: Mapping[str, str]

    @property
    def hash(self) -> str:
        return self.sha256[:16]

    def _passages(self, passages: Sequence[Passage]) -> str:
        return "\n".join(self.passage.substitute(n=i, title=escape_reference(p.title, attribute=True),
                                                 text=escape_reference(p.text))
                         for i, p in enumerate(passages, start=1))

    def generate(self, question_type: str, passages: Sequence[Passage]) -> Messages:
        """Messages asking for one question of ``question_type`` on ``passages``."""
        user = self.generate_user.substitute(passages=self._passages(passages), question_type=question_type,
                                             instruction=self.types[question_type])
        return [{"role": "system", "content": self.generate_system}, {"role": "user", "content": user}]

    def critic(self, draft: Draft, passages: Sequence[Passage]) -> Messages:
        """Messages asking the critic to score ``draft``."""
        kind = "unanswerable" if draft.question_type == "unanswerable" else "answerable"
        quotes = "\n".join(f"<quote>{escape_reference(q)}</quote>" for q in draft.quotes) or "(no quotes)"
        user = self.critic_user.substitute(
            passages=self._passages(passages), question=escape_reference(draft.question),
            answer=escape_reference(draft.answer or "(none)"), quotes=quotes, kind=self.critic_kinds[kind],
            answerability=self.critic_answerability[kind])
        return [{"role": "system", "content": self.critic_system}, {"role": "user", "content": user}]


def _mapping(data: Mapping[str, Any], key: str, path: str, required: Sequence[str]) -> dict[str, str]:
    raw = data.get(key)
    missing = [k for k in required if not isinstance(raw, dict) or not isinstance(raw.get(k), str)]
    if missing:
        raise ConfigError(f"prompt file {path}: '{key}' needs a text for each of {missing}")
    assert isinstance(raw, dict)
    return {k: literal(str(v), where=f"prompt file {path}, {key}.{k}") for k, v in raw.items()}


def load_generation_prompts(spec: str) -> GenerationPrompts:
    """Load and validate a generation prompt file (a stem under conf/prompt/generate/ or a path)."""
    path = resolve_prompt_file(spec, kind="generate")
    data, sha = read_prompt_file(path)
    where = f"prompt file {path}"

    def text(key: str) -> str:
        return literal(require_str(data, key, path), where=f"{where}, key '{key}'")

    def template(key: str, variables: tuple[str, ...]) -> string.Template:
        return check_template(require_str(data, key, path), variables, where=f"{where}, key '{key}'")

    return GenerationPrompts(
        path=str(path), sha256=sha, generate_system=text("generate_system"),
        generate_user=template("generate_user", ("passages", "instruction", "question_type")),
        types=_mapping(data, "types", str(path), QUESTION_TYPES),
        passage=template("passage", ("n", "title", "text")),
        critic_system=text("critic_system"),
        critic_user=template("critic_user", ("passages", "question", "answer", "quotes", "kind", "answerability")),
        critic_kinds=_mapping(data, "critic_kinds", str(path), ("answerable", "unanswerable")),
        critic_answerability=_mapping(data, "critic_answerability", str(path), ("answerable", "unanswerable")),
    )


def json_object(text: str) -> dict[str, Any]:
    """The JSON object in a reply: the whole reply, a fenced block, or the outermost ``{...}``."""
    candidates = [text.strip(), *(m.group(1).strip() for m in _FENCE.finditer(text))]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(data, dict):
            return data
    raise MalformedReply("no JSON object in the reply")


def parse_draft(text: str, question_type: str) -> Draft:
    """A generator reply as a Draft; MalformedReply when a field is missing or of the wrong kind."""
    data = json_object(text)
    question = data.get("question")
    if not isinstance(question, str) or len(question.split()) < 3:
        raise MalformedReply("'question' is missing or shorter than 3 words")
    quotes = data.get("quotes") or []
    if isinstance(quotes, str):
        quotes = [quotes]
    if not isinstance(quotes, list) or not all(isinstance(q, str) for q in quotes):
        raise MalformedReply("'quotes' is not a list of strings")
    quotes = [q.strip() for q in quotes if q.strip()]
    answer = data.get("answer")
    if question_type == "unanswerable":
        answer, quotes = None, []
    elif not isinstance(answer, str | int | float) or isinstance(answer, bool) or not str(answer).strip():
        raise MalformedReply("'answer' is missing")
    elif not quotes:
        raise MalformedReply("'quotes' is empty for an answerable question")
    difficulty = str(data.get("difficulty") or "").lower()
    if difficulty not in DIFFICULTIES:
        difficulty = DEFAULT_DIFFICULTY[question_type]
    return Draft(question=question.strip(), answer=None if answer is None else str(answer).strip(),
                 quotes=tuple(quotes), question_type=question_type, difficulty=difficulty)


def parse_scores(text: str) -> Scores:
    """A critic reply as Scores (integers 1-5); MalformedReply otherwise."""
    data = json_object(text)
    values: dict[str, int] = {}
    for c in CRITERIA:
        v = data.get(c)
        if isinstance(v, bool) or not isinstance(v, int | float) or not float(v).is_integer() or not 1 <= v <= 5:
            raise MalformedReply(f"critic score '{c}' is missing or not an integer 1-5")
        values[c] = int(v)
    return Scores(**values, reasoning=str(data.get("reasoning") or ""))


def is_json_object(text: str) -> bool:
    """Whether a reply holds a JSON object (only such replies are cached)."""
    try:
        json_object(text)
    except MalformedReply:
        return False
    return True
