"""Constrained decoding of a graded verdict by a local model: the grammar ``{"<field>": <allowed digit>}``.

A request whose ``response_format`` is a JSON schema of the graded-verdict form (``score_schema``: an object
whose graded field, the first of ``required``, is an integer with an ``enum`` of single-digit values, its
other properties strings such as ``reasoning``) is answered without free text: the forced prefix
``{"<field>": `` is appended to the chat-templated prompt, one forward pass gives the next token's logits,
and the allowed digit the model rates most likely is the verdict (greedy decoding under a grammar admitting
only ``{"<field>": <allowed>}``; the optional string properties are left out). Any other schema (a claim
list, per-claim verdicts) returns None here and is generated freely.

This module is torch-free: ``graded_field`` reads the schema, ``plan`` finds the forced prefix's token ids
and each allowed value's one token with the model's own tokenizer (a tokenizer that merges the space into
the digit, or spells a value in two tokens, is handled or refused), ``pick`` chooses from the logits.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

GRAMMAR = "grammar"  # judge/structured_output's value for constrained decoding by a local model


@dataclass(frozen=True)
class Graded:
    """A graded-verdict schema: its field's name and the allowed values (sorted)."""

    field: str
    allowed: tuple[int, ...]


@dataclass(frozen=True)
class Plan:
    """How to decode a ``Graded`` verdict with one tokenizer: ``prefix`` (token ids appended to the prompt)
    and ``tokens`` (per allowed value, in ``allowed``'s order, the one token that follows it)."""

    graded: Graded
    prefix: tuple[int, ...]
    tokens: tuple[int, ...]

    def reply(self, index: int) -> str:
        """The reply choosing ``allowed[index]``: ``{"<field>": <value>}``."""
        return json.dumps({self.graded.field: self.graded.allowed[index]})


def _schema(response_format: Mapping[str, Any]) -> Any:
    """The JSON schema inside an OpenAI ``response_format`` (``{"type": "json_schema", "json_schema":
    {"schema": ...}}``), or a bare schema."""
    inner = response_format.get("json_schema")
    if isinstance(inner, Mapping):
        return inner.get("schema")
    return response_format.get("schema", response_format)


def _digit(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 9


def graded_field(response_format: Mapping[str, Any] | None) -> Graded | None:
    """The graded field of a verdict schema (``ragbench.judge.parsing.score_schema``), None for any other
    schema. The field is the first of ``required`` (a request's schema has its keys sorted, so the order
    of ``properties`` is not kept), else the only property; it must be an integer with an ``enum`` of
    single-digit values, and every other property a string (free commentary the grammar leaves out)."""
    if not isinstance(response_format, Mapping):
        return None
    schema = _schema(response_format)
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return None
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return None
    required = schema.get("required")
    if isinstance(required, list) and required:
        field = required[0]
    elif len(properties) == 1:
        field = next(iter(properties))
    else:
        return None
    spec = properties.get(field)
    if not isinstance(field, str) or not isinstance(spec, Mapping) or spec.get("type") != "integer":
        return None
    enum = spec.get("enum")
    if not isinstance(enum, list) or not enum or not all(_digit(v) for v in enum):
        return None
    others = [p for name, p in properties.items() if name != field]
    if not all(isinstance(p, Mapping) and p.get("type") == "string" for p in others):
        return None
    return Graded(field, tuple(sorted(set(enum))))


def plan(graded: Graded, encode: Callable[[str], Sequence[int]]) -> Plan | None:
    """The forced prefix and each allowed value's token under ``encode`` (text -> token ids, no special
    tokens), or None when some value is not one token after a common prefix. Tried first with the prefix
    ending in its space (``{"score": `` + ``3``), then with the space merged into the value's token."""
    head = json.dumps({graded.field: 0})[:-2]  # '{"score": ' (json.dumps escapes the name as the reply does)
    whole = [list(encode(head + str(v))) for v in graded.allowed]
    for prefix in (list(encode(head)), list(encode(head.rstrip()))):
        n = len(prefix)
        if not prefix or any(ids[:n] != prefix or len(ids) != n + 1 for ids in whole):
            continue
        tokens = tuple(ids[n] for ids in whole)
        if len(set(tokens)) == len(tokens):
            return Plan(graded, tuple(prefix), tokens)
    return None


def pick(scores: Sequence[float]) -> int:
    """The index of the highest score (the first of equal ones): greedy choice among the allowed tokens."""
    if not scores:
        raise ValueError("no allowed token to choose from")
    return max(range(len(scores)), key=lambda i: (scores[i], -i))
