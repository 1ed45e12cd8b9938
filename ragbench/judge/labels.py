"""Human-labelled judge items (``labels.jsonl``): what a judge configuration is calibrated against.

One JSON object per line::

    {"id": "q7", "question": "...", "answer": "...", "contexts": ["passage", {"title": "t", "text": "..."}],
     "gold": ["reference answer"], "question_type": "factual", "generator": "openai/gpt-4o",
     "labels": {"faithfulness": 1, "correctness": 0}}

``id`` is given on every line or on none (then line n is ``line-<n>``: a file mixing both is refused, since a
generated id could equal a written one); ``gold`` and ``contexts`` default to none, ``question_type`` to
``unknown``; ``generator`` (the model that wrote the answer) feeds the self-preference probe. A label is an
integer: 0/1 (the default ``scale=binary``: fail/pass) or a score 0..``max_score`` of the rubric's own scale
(``scale=rubric``); ``LabelSet.check_scale`` refuses any other. Every mistake is one line naming the file,
the line and the fix.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragbench.errors import ConfigError
from ragbench.types import Answer, Context, Level, Query

FIELDS = ("id", "question", "answer", "contexts", "gold", "question_type", "generator", "labels", "answerable",
          "meta", "run", "case")
# an item may name a run and one of its cases ("run": RUN_ID, "case": QID): the human label of that case's
# answer, which ``ragbench.compare --ppi`` combines with the run's judge scores (ragbench.compare.ppi);
# such an item needs no question or answer (the run's case holds them) when read by ``load_case_labels``
FORMAT_HELP = ('each line: {"question": str, "answer": str, "contexts": [str | {"title", "text"}], '
               '"labels": {"<rubric>": int}} (optional: id, gold, question_type, generator, answerable, meta)')


class LabelsError(ConfigError):
    """A labels file cannot be read: the message names the file, the line and the fix."""


@dataclass(frozen=True)
class LabelledItem:
    """One human-judged answer: the judge's inputs and the human label per rubric."""

    item_id: str
    question: str
    answer: str
    contexts: tuple[tuple[str, str], ...]  # (title, text)
    gold: tuple[str, ...]
    question_type: str
    generator: str | None
    labels: Mapping[str, int]
    answerable: bool = True
    meta: Mapping[str, Any] = field(default_factory=dict)
    line: int = 0  # the item's line in its labels file (0: not read from a file)
    run: str | None = None  # the run whose case this item labels (its id, id prefix or name), if any
    case: str | None = None  # the labelled case's id (``qid`` in the run's cases.jsonl), if any

    def query(self) -> Query:
        """The item as the ``Query`` a judge takes."""
        return Query(qid=self.item_id, text=self.question, answers=self.gold, question_type=self.question_type,
                     answerable=self.answerable)

    def context_objects(self, order: Sequence[int] | None = None,
                        extra: Sequence[tuple[str, str]] = ()) -> tuple[Context, ...]:
        """The item's passages as ``Context``s, in ``order`` (indices into ``contexts + extra``)."""
        passages = [*self.contexts, *extra]
        picked = range(len(passages)) if order is None else order
        return tuple(Context(chunk_id=f"{self.item_id}#{i}", text=passages[i][1], title=passages[i][0],
                             level=Level.PARAGRAPH, hit_ids=()) for i in picked)

    def answer_object(self, text: str | None = None) -> Answer:
        """The item's answer (or ``text`` in its place) as the ``Answer`` a judge takes."""
        return Answer(text=self.answer if text is None else text, model=self.generator or "unknown")


@dataclass(frozen=True)
class LabelSet:
    """A loaded labels file: its items, path and content hash (the run's dataset fingerprint)."""

    path: str
    sha256: str
    items: tuple[LabelledItem, ...]

    @property
    def name(self) -> str:
        return Path(self.path).stem

    @property
    def rubrics(self) -> tuple[str, ...]:
        """Every rubric some item has a label for, sorted."""
        return tuple(sorted({r for item in self.items for r in item.labels}))

    def check_scale(self, scale: str, max_score: int) -> None:
        """A LabelsError naming the first label outside the scale (``binary``: 0 or 1; ``rubric``:
        0..``max_score``): such a label can never agree with a verdict, so it would only lower the
        accuracy and kappa."""
        allowed = range(2) if scale == "binary" else range(max_score + 1)
        said = "0 or 1" if scale == "binary" else f"0 to {max_score}"
        fix = ("correct the label, or set scale=rubric (and max_score) if the labels are rubric scores"
               if scale == "binary" else "correct the label, or set max_score to the rubrics' top score")
        for item in self.items:
            for rubric, label in item.labels.items():
                if label not in allowed:
                    raise _bad(Path(self.path), item.line, f"labels.{rubric} is {label}, but scale={scale} "
                                                           f"allows {said}", fix=fix)


def _bad(path: Path, line: int, message: str, fix: str = FORMAT_HELP) -> LabelsError:
    return LabelsError(f"labels file {path}, line {line}: {message}; fix: {fix}")


def _text(value: Any, path: Path, line: int, name: str, *, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise _bad(path, line, f"'{name}' must be a non-empty string, got {json.dumps(value)[:60]}")
    return value


def _contexts(value: Any, path: Path, line: int) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _bad(path, line, f"'contexts' must be a list of passages, got {type(value).__name__}")
    out = []
    for i, passage in enumerate(value, start=1):
        if isinstance(passage, str) and passage.strip():
            out.append(("", passage))
        elif isinstance(passage, dict) and isinstance(passage.get("text"), str) and passage["text"].strip():
            out.append((str(passage.get("title") or ""), passage["text"]))
        else:
            raise _bad(path, line, f"contexts[{i}] must be a non-empty string or {{\"title\", \"text\"}}")
    return tuple(out)


def _labels(value: Any, path: Path, line: int) -> dict[str, int]:
    if not isinstance(value, dict) or not value:
        raise _bad(path, line, "'labels' must map a rubric name to an integer label, e.g. {\"faithfulness\": 1}")
    out: dict[str, int] = {}
    for name, label in value.items():
        if isinstance(label, bool) or not isinstance(label, int):
            raise _bad(path, line, f"labels.{name} must be an integer (0/1, or a score of the rubric), "
                                   f"got {json.dumps(label)[:40]}")
        out[str(name)] = label
    return out


def parse_item(data: Any, path: Path, line: int, *, of_case: bool = False) -> LabelledItem:
    """One line's object as a ``LabelledItem`` (``LabelsError`` naming the line when it is not one).
    ``of_case``: an item labelling a run's case: ``case`` is required, question and answer are not."""
    if not isinstance(data, dict):
        raise _bad(path, line, f"expected a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise _bad(path, line, f"unknown field {unknown[0]!r}", fix=f"use only {', '.join(FIELDS)}")
    gold = data.get("gold")
    golds = (gold,) if isinstance(gold, str) else tuple(gold or ())
    if not all(isinstance(g, str) for g in golds):
        raise _bad(path, line, "'gold' must be a string or a list of strings")
    answerable = data.get("answerable", True)
    if not isinstance(answerable, bool):
        raise _bad(path, line, "'answerable' must be true or false")
    meta = data.get("meta") or {}
    if not isinstance(meta, dict):
        raise _bad(path, line, "'meta' must be an object")
    given = data.get("id")
    if given not in (None, "") and (isinstance(given, bool) or not isinstance(given, str | int)):
        raise _bad(path, line, f"'id' must be a string or an integer, got {json.dumps(given)[:40]}")
    case = _text(data.get("case"), path, line, "case", required=of_case)
    run = _text(data.get("run"), path, line, "run", required=False)
    return LabelledItem(
        item_id=f"line-{line}" if given in (None, "") else str(given),
        question=_text(data.get("question"), path, line, "question", required=not of_case) or "",
        answer=_text(data.get("answer"), path, line, "answer", required=not of_case) or "",
        contexts=_contexts(data.get("contexts"), path, line),
        gold=golds,
        question_type=str(_text(data.get("question_type"), path, line, "question_type", required=False) or "unknown"),
        generator=_text(data.get("generator"), path, line, "generator", required=False),
        labels=_labels(data.get("labels"), path, line),
        answerable=answerable,
        meta=meta,
        line=line,
        run=run,
        case=case,
    )


def load_labels(path: str | Path) -> LabelSet:
    """Read and check a labels file; ids must be unique and at least one item is needed."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise LabelsError(f"labels file {p} does not exist; fix: give the path of a JSONL labels file "
                          f"(the bundled sample: {sample_path()})")
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LabelsError(f"labels file {p} is not UTF-8 text (byte {exc.start}); fix: save it as UTF-8") from None
    items: list[LabelledItem] = []
    written: list[int] = []  # lines that give their own id
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _bad(p, n, f"not JSON ({exc.msg} at column {exc.colno})") from None
        item = parse_item(data, p, n)
        if data.get("id") not in (None, ""):
            written.append(n)
        items.append(item)
    if not items:
        raise LabelsError(f"labels file {p} holds no item; fix: one JSON object per line ({FORMAT_HELP})")
    if written and len(written) < len(items):  # before the repeats: a generated id may repeat a written one
        first = min(set(i.line for i in items) - set(written))
        raise _bad(p, first, f"no 'id' here, while {len(written)} of the {len(items)} lines give one (first: "
                             f"line {written[0]}); a generated id (line-<n>) could equal one written",
                   fix="give every line its own id, or remove them all (then each is line-<n>)")
    seen: dict[str, int] = {}
    for item in items:
        if item.item_id in seen:
            raise _bad(p, item.line, f"id {item.item_id!r} also on line {seen[item.item_id]}",
                       fix="give every item its own id")
        seen[item.item_id] = item.line
    return LabelSet(path=str(p), sha256=hashlib.sha256(raw).hexdigest(), items=tuple(items))


CASE_HELP = ('each line: {"run": RUN_ID, "case": QID, "labels": {"<rubric>": int}}; "run" may be left '
             'out when one run is compared; any calibration field may be given too')


def load_case_labels(path: str | Path) -> list[LabelledItem]:
    """Human labels of runs' cases (each item names a ``case``, and a ``run`` unless one run is compared);
    a LabelsError naming the file, the line and the fix; at least one item, no (run, case) twice."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise LabelsError(f"labels file {p} does not exist; fix: give the path of a JSONL file ({CASE_HELP})")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise LabelsError(f"labels file {p} is not UTF-8 text (byte {exc.start}); "
                          "fix: save it as UTF-8") from None
    items: list[LabelledItem] = []
    seen: dict[tuple[str | None, str | None], int] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _bad(p, n, f"not JSON ({exc.msg} at column {exc.colno})", fix=CASE_HELP) from None
        if isinstance(data, dict) and "case" not in data:
            raise _bad(p, n, "no 'case': the id of the run's case this label is for", fix=CASE_HELP)
        item = parse_item(data, p, n, of_case=True)
        key = (item.run, item.case)
        if key in seen:
            raise _bad(p, n, f"case {item.case!r} of run {item.run or '(the compared run)'} also on line "
                             f"{seen[key]}",
                       fix="label each case of a run once")
        seen[key] = n
        items.append(item)
    if not items:
        raise LabelsError(f"labels file {p} holds no item; fix: one JSON object per line ({CASE_HELP})")
    return items


def sample_path() -> Path:
    """The bundled human-labelled sample (ExpertQA attribution judgements; see its SOURCE.md)."""
    return Path(__file__).resolve().parents[1] / "datasets" / "samples" / "expertqa_labels" / "labels.jsonl"
