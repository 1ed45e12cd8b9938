"""The record an outside RAG system gives for one question: its answer and the ranked contexts it read."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ragbench.errors import RagbenchError
from ragbench.types import Usage

_EMPTY: Mapping[str, Any] = MappingProxyType({})
FIELDS = ("qid, answer, contexts [{id?, text, score?}], latency_ms?, usage?, cost_usd?, citations?, metadata?, "
          "trajectory? [{query | tool_call, contexts, output?}]")
KNOWN = frozenset({"qid", "answer", "contexts", "latency_ms", "usage", "cost_usd", "citations", "metadata",
                   "trajectory"})


class RecordError(RagbenchError):
    """A record that does not have the shape of ``SystemRecord``: the message names where and the field."""


@dataclass(frozen=True)
class SystemContext:
    """One context the system retrieved, in its rank order: a dataset id (a chunk id, a document id or the
    dataset's own paragraph id) and/or its text; ``score`` as the system gave it."""

    id: str | None
    text: str
    score: float | None = None


@dataclass(frozen=True)
class TrajectoryStep:
    """One retrieval step of an agent's trajectory (docs/multi-step.md): the query it searched (or its tool
    call, written as ``name(arguments)``), the contexts it retrieved in rank order, and what it wrote."""

    query: str
    contexts: tuple[SystemContext, ...]
    output: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"query": self.query, "contexts": [_context_json(c) for c in self.contexts],
                **({"output": self.output} if self.output else {})}


def _context_json(c: SystemContext) -> dict[str, Any]:
    return {k: v for k, v in (("id", c.id), ("text", c.text), ("score", c.score)) if v is not None}


@dataclass(frozen=True)
class SystemRecord:
    """What the system answered one question with (``latency_ms``, ``usage`` and ``cost_usd`` as it reports
    them; ``citations``: 1-based numbers of the contexts the answer cites)."""

    qid: str
    answer: str
    contexts: tuple[SystemContext, ...]
    latency_ms: float | None = None
    usage: Usage = Usage()
    citations: tuple[int, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    trajectory: tuple[TrajectoryStep, ...] = ()  # an agent's retrieval steps, each scored as a hop

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object (the responses file's line, a cached reply)."""
        out: dict[str, Any] = {
            "qid": self.qid, "answer": self.answer,
            "contexts": [_context_json(c) for c in self.contexts]}
        if self.latency_ms is not None:
            out["latency_ms"] = self.latency_ms
        if self.usage != Usage():
            out["usage"] = {"prompt_tokens": self.usage.prompt_tokens,
                            "completion_tokens": self.usage.completion_tokens}
            out["cost_usd"] = self.usage.cost_usd
        if self.citations:
            out["citations"] = list(self.citations)
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        if self.trajectory:
            out["trajectory"] = [step.to_json() for step in self.trajectory]
        return out


def _number(value: Any, where: str, name: str, *, integer: bool = False) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    if not ok or (integer and not float(value).is_integer()):
        kind = "a non-negative integer" if integer else "a non-negative number"
        raise RecordError(f"{where}: {name} must be {kind}, got {value!r}; fix: write {name} as {kind} or leave it out")
    return float(value)


def _context(item: Any, where: str) -> SystemContext:
    if isinstance(item, str):  # a bare text: a context without id or score
        item = {"text": item}
    if not isinstance(item, dict):
        raise RecordError(f"{where}: a context must be an object {{id?, text, score?}}, got {type(item).__name__}; "
                          "fix: write each context as {\"id\": ..., \"text\": ...}")
    cid, text, score = item.get("id"), item.get("text"), item.get("score")
    if cid is not None and not isinstance(cid, str | int):
        raise RecordError(f"{where}: id must be a string, got {type(cid).__name__}; fix: write the id as a string")
    if text is not None and not isinstance(text, str):
        raise RecordError(f"{where}: text must be a string, got {type(text).__name__}; fix: write the text as a string")
    if cid is None and not (text or "").strip():
        raise RecordError(f"{where}: a context needs an id or a text (it has neither); fix: give the passage's text "
                          "and, when it comes from the dataset, its id")
    if score is not None and (isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score)):
        raise RecordError(f"{where}: score must be a finite number, got {score!r}; fix: write a number or leave it out")
    return SystemContext(id=None if cid is None else str(cid), text=text or "",
                         score=None if score is None else float(score))


def parse_record(obj: Any, where: str, *, qid: str | None = None) -> SystemRecord:
    """A ``SystemRecord`` from a JSON object, or one RecordError naming ``where`` and the field. ``qid``: the
    question asked (a reply of a called system may leave its ``qid`` out; one naming another question fails)."""
    if not isinstance(obj, dict):
        raise RecordError(f"{where}: a record must be a JSON object ({FIELDS}), got {type(obj).__name__}")
    got = obj.get("qid", qid)
    if got is None or not isinstance(got, str | int) or isinstance(got, bool):
        raise RecordError(f"{where}: qid is missing or not a string (got {got!r}); fix: give each record the "
                          "dataset's question id")
    if qid is not None and str(got) != qid:
        raise RecordError(f"{where}: the record answers question {str(got)!r}, not {qid!r}; fix: return the asked qid")
    for name in ("answer", "contexts"):
        if name not in obj:
            raise RecordError(f"{where}: field {name!r} is missing; fix: every record has {FIELDS}")
    if not isinstance(obj["answer"], str):
        raise RecordError(f"{where}: answer must be a string, got {type(obj['answer']).__name__}; fix: write the "
                          "answer text (\"\" for no answer)")
    contexts = obj["contexts"]
    if not isinstance(contexts, list):
        raise RecordError(f"{where}: contexts must be a list (ranked, best first), got {type(contexts).__name__}")
    usage = obj.get("usage") or {}
    if not isinstance(usage, dict):
        raise RecordError(f"{where}: usage must be an object {{prompt_tokens, completion_tokens}}, got {usage!r}")
    citations = obj.get("citations") or []
    if not isinstance(citations, list):
        raise RecordError(f"{where}: citations must be a list of 1-based context numbers, got {citations!r}")
    metadata = obj.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise RecordError(f"{where}: metadata must be an object, got {type(metadata).__name__}")
    latency = obj.get("latency_ms")
    steps = obj.get("trajectory")
    if steps is not None and not isinstance(steps, list):
        raise RecordError(f"{where}: trajectory must be a list of steps {{query | tool_call, contexts, output?}}, "
                          f"got {type(steps).__name__}")
    return SystemRecord(
        qid=str(got), answer=obj["answer"],
        contexts=tuple(_context(c, f"{where}, contexts[{i}]") for i, c in enumerate(contexts)),
        latency_ms=None if latency is None else _number(latency, where, "latency_ms"),
        usage=Usage(prompt_tokens=int(_number(usage.get("prompt_tokens", 0), where, "usage.prompt_tokens", integer=True)),
                    completion_tokens=int(_number(usage.get("completion_tokens", 0), where,
                                                  "usage.completion_tokens", integer=True)),
                    cost_usd=_number(obj.get("cost_usd", 0.0) or 0.0, where, "cost_usd")),
        citations=tuple(int(_number(c, where, "citations[]", integer=True)) for c in citations),
        metadata=MappingProxyType(dict(metadata)),
        trajectory=tuple(_step(s, f"{where}, trajectory[{i}]") for i, s in enumerate(steps or ())),
    )


def _step(item: Any, where: str) -> TrajectoryStep:
    """One trajectory step, or one RecordError naming it: a step must say what it searched and what it got."""
    if not isinstance(item, dict):
        raise RecordError(f"{where}: a step must be an object {{query | tool_call, contexts, output?}}, got "
                          f"{type(item).__name__}")
    query, call = item.get("query"), item.get("tool_call")
    if isinstance(call, dict) and query is None:
        args = call.get("arguments")
        query = (args.get("query") if isinstance(args, dict) and isinstance(args.get("query"), str)
                 else f"{call.get('name', 'tool')}({json.dumps(args, sort_keys=True, default=str)})")
    if not isinstance(query, str) or not query.strip():
        raise RecordError(f"{where}: the step has no query (a string) or tool_call ({{name, arguments}}); fix: "
                          "give each step the query or tool call it searched with")
    contexts = item.get("contexts")
    if not isinstance(contexts, list) or not contexts:
        raise RecordError(f"{where}: the step has no contexts; fix: give each retrieval step the contexts it "
                          "retrieved, best first (leave steps that retrieved nothing out of the trajectory)")
    output = item.get("output", "")
    if not isinstance(output, str):
        raise RecordError(f"{where}: output must be a string, got {type(output).__name__}")
    return TrajectoryStep(query=query, output=output,
                          contexts=tuple(_context(c, f"{where}, contexts[{j}]") for j, c in enumerate(contexts)))
