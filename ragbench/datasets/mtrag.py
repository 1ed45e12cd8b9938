"""MTRAG (IBM/mt-rag-benchmark, Apache-2.0; Katsis et al. 2025): multi-turn RAG conversations over four
corpora (ClapNQ, Cloud, FiQA, Govt), read in its released layout (docs/conversations.md).

- corpus: ``corpora/passage_level/<domain>.jsonl`` (the release's zip, unzipped), one passage per line
  (``_id``, ``title``, ``text``, as BEIR); the passage is the evidence unit (``evidence_level``: document);
- turns: ``mtrag-human/retrieval_tasks/<domain>/``: ``<domain>_lastturn.jsonl`` (each task's own user
  message, the turn searched), ``<domain>_questions.jsonl`` (every user message up to the task: its history),
  ``<domain>_rewrite.jsonl`` (the benchmark's human rewrite, kept in ``meta["rewrite"]``, searched by
  ``query=contextualize query.transform.method=dataset``) and ``qrels/dev.tsv`` (the reference passages);
- when ``mtrag-human/generation_tasks/reference.jsonl`` is there, its tasks add each turn's question type,
  answerability and multi-turn type (``Follow-up``, ``Clarification``: the ``followup`` tag, scored apart in
  ``by_followup/*``) and the agent's earlier answers to the history; ``answers: true`` also takes its
  ``targets`` as the gold answers and keeps only the turns it has (to score generated answers).

A task id ``<conversation><::><turn>`` becomes the question id ``<conversation>#<turn>``; the official id
stays in ``meta["task_id"]``. The bundled sample holds the ClapNQ turns whose reference passages are all in
the release's own sample files (ragbench/datasets/samples/mtrag/SOURCE.md).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ragbench.datasets.base import BaseAdapter, FileReader, require
from ragbench.datasets.beir import document_text
from ragbench.datasets.conversations import turn_qid
from ragbench.errors import ConfigError, DatasetError
from ragbench.types import Document, Evidence, Paragraph, Query, Section, Turn

DOMAINS = ("clapnq", "cloud", "fiqa", "govt")
CORPUS = "corpora/passage_level/{domain}.jsonl"
TASKS = "mtrag-human/retrieval_tasks/{domain}"
GENERATION = "mtrag-human/generation_tasks/reference.jsonl"
_TASK = re.compile(r"^(?P<conv>.+?)(?:<::>|::)(?P<turn>\d+)$")
_USER = re.compile(r"(?:^|\n)\|user\|: ?")


def split_task(task_id: str) -> tuple[str, int] | None:
    """(conversation id, turn) of an MTRAG task id (``<conv><::><turn>``, or ``<conv>::<turn>`` in the
    evaluation samples)."""
    m = _TASK.match(task_id)
    return (m["conv"], int(m["turn"])) if m else None


def user_messages(text: str) -> list[str]:
    """The user messages of a retrieval task's text (``|user|: ...`` lines)."""
    return [part.strip() for part in _USER.split(text) if part.strip()]


class MTRAGAdapter(BaseAdapter):
    """See the module docstring."""

    doc_id_field = "_id"
    qid_field = "_id"
    evidence_level = "document"
    has_answers = False
    answers_optional = True

    def __init__(self, *, domain: str = "clapnq", answers: bool = False, **kwargs: Any) -> None:
        if domain not in DOMAINS:
            raise ConfigError(f"dataset.domain={domain!r} is not valid; choose one of {list(DOMAINS)}")
        if not isinstance(answers, bool):
            raise ConfigError(f"dataset.answers must be true or false, got {answers!r}")
        super().__init__(**kwargs)
        self.domain = domain
        self.answers = answers
        self.has_answers = answers

    def root(self) -> Path:
        if self.variant == "full" and not self.path:
            raise DatasetError(
                "MTRAG is not downloaded by ragbench", dataset=self.name,
                fix="git clone https://github.com/IBM/mt-rag-benchmark, unzip "
                    "corpora/passage_level/<domain>.jsonl.zip in place and set dataset.path to the clone")
        return super().root()

    def read_spec(self) -> dict[str, Any]:
        return {"domain": self.domain, "answers": self.answers}

    def _corpus(self, reader: FileReader) -> list[Document]:
        rel = CORPUS.format(domain=self.domain)
        file = str(reader.root / rel)
        if not (reader.root / rel).is_file():
            zipped = reader.root / f"{rel}.zip"
            raise DatasetError(
                "the passage-level corpus is missing", dataset=self.name, file=file,
                fix=f"unzip {zipped} in place" if zipped.is_file() else
                "point dataset.path at a clone of IBM/mt-rag-benchmark with its corpora unzipped")
        docs: list[Document] = []
        for n, row in enumerate(reader.read_jsonl(rel), start=1):
            where = f"line {n}"
            doc_id = str(require(row, "_id", dataset=self.name, file=file, where=where, types=(str, int)))
            text = require(row, "text", dataset=self.name, file=file, where=where, types=(str,))
            title = str(row.get("title") or "")
            body = document_text(title, text)
            docs.append(Document(doc_id=doc_id, title=title or doc_id, sections=(
                Section(title=title or doc_id, paragraphs=(Paragraph(text=body, ref=doc_id),) if body else ()),)))
        return docs

    def _texts(self, reader: FileReader, kind: str) -> dict[str, str]:
        rel = f"{TASKS.format(domain=self.domain)}/{self.domain}_{kind}.jsonl"
        if not (reader.root / rel).is_file():
            if kind == "rewrite":
                return {}
            raise DatasetError(f"the retrieval tasks' {kind} file is missing", dataset=self.name,
                               file=str(reader.root / rel), fix="point dataset.path at a clone of "
                               "IBM/mt-rag-benchmark (its mtrag-human/retrieval_tasks folder)")
        out: dict[str, str] = {}
        file = str(reader.root / rel)
        for n, row in enumerate(reader.read_jsonl(rel), start=1):
            qid = str(require(row, "_id", dataset=self.name, file=file, where=f"line {n}", types=(str,)))
            out[qid] = str(require(row, "text", dataset=self.name, file=file, where=f"line {n}", types=(str,)))
        return out

    def _qrels(self, reader: FileReader) -> tuple[dict[str, dict[str, int]], str]:
        rel = f"{TASKS.format(domain=self.domain)}/qrels/dev.tsv"
        file = str(reader.root / rel)
        qrels: dict[str, dict[str, int]] = {}
        for n, line in enumerate(reader.read_text(rel).splitlines(), start=1):
            cols = line.rstrip("\r").split("\t")
            if n == 1 and cols[:1] == ["query-id"] or not line.strip():
                continue
            if len(cols) != 3 or not cols[2].strip().lstrip("-").isdigit():
                raise DatasetError("a judgement must be query-id<TAB>corpus-id<TAB>integer score",
                                   dataset=self.name, file=file, record=f"line {n}",
                                   fix="use the release's qrels/dev.tsv unchanged")
            qrels.setdefault(cols[0], {})[cols[1]] = int(cols[2])
        return qrels, file

    def _generation(self, reader: FileReader) -> dict[tuple[str, int], dict[str, Any]]:
        if not (reader.root / GENERATION).is_file():
            if self.answers:
                raise DatasetError("dataset.answers=true reads the generation tasks, which are missing",
                                   dataset=self.name, file=str(reader.root / GENERATION),
                                   fix="point dataset.path at a clone of IBM/mt-rag-benchmark, or set "
                                       "dataset.answers=false (retrieval only)")
            return {}
        out: dict[tuple[str, int], dict[str, Any]] = {}
        for row in reader.read_jsonl(GENERATION):
            key = split_task(str(row.get("task_id", ""))) if isinstance(row, dict) else None
            if key is not None:
                out[key] = row
        return out

    def _read(self, reader: FileReader) -> tuple[list[Document], list[Query], dict[str, int]]:
        stats = {"documents": 0, "tasks": 0, "tasks_without_qrels": 0, "qrels_unknown_document": 0,
                 "tasks_not_in_generation": 0}
        docs = self._corpus(reader)
        stats["documents"] = len(docs)
        known = {d.doc_id for d in docs}
        last, full, rewrite = (self._texts(reader, k) for k in ("lastturn", "questions", "rewrite"))
        qrels, qrels_file = self._qrels(reader)
        generation = self._generation(reader)
        tasks = TASKS.format(domain=self.domain)
        self.id_files = {"document": str(reader.root / CORPUS.format(domain=self.domain)),
                         "question": str(reader.root / f"{tasks}/{self.domain}_lastturn.jsonl")}
        queries: list[Query] = []
        for task_id, text in last.items():
            parsed = split_task(task_id)
            if parsed is None:
                raise DatasetError(f"task id {task_id!r} is not <conversation><::><turn>", dataset=self.name,
                                   file=self.id_files["question"], field="_id",
                                   fix="use the release's retrieval task files unchanged")
            conv, turn = parsed
            stats["tasks"] += 1
            judged = qrels.get(task_id, {})
            if not judged:
                stats["tasks_without_qrels"] += 1
            stats["qrels_unknown_document"] += sum(d not in known for d in judged)
            gen = generation.get((conv, turn))
            if self.answers and gen is None:
                stats["tasks_not_in_generation"] += 1
                continue
            messages = user_messages(full.get(task_id, text))
            said = user_messages(text)
            answers_said = [str(t.get("text", "")) for t in (gen or {}).get("input", [])
                            if isinstance(t, dict) and t.get("speaker") == "agent"]
            history = tuple(Turn(text=m, answer=answers_said[i] if i < len(answers_said) else None,
                                 qid=turn_qid(conv, i + 1)) for i, m in enumerate(messages[:-1]))
            meta: dict[str, Any] = {"task_id": task_id}
            if rewrite.get(task_id):
                meta["rewrite"] = " ".join(user_messages(rewrite[task_id]))
            qtype, answerable = "query", True
            answers: tuple[str, ...] = ()
            if gen is not None:
                kinds = gen.get("Multi-Turn")
                if isinstance(kinds, list) and kinds:
                    meta["followup"] = str(kinds[0]).lower()
                types = gen.get("Question Type")
                qtype = str(types[0]) if isinstance(types, list) and types else qtype
                answerable = "UNANSWERABLE" not in (gen.get("answerability") or [])
                if self.answers:
                    answers = tuple(str(t["text"]) for t in gen.get("targets") or []
                                    if isinstance(t, dict) and t.get("text"))
            queries.append(Query(
                qid=turn_qid(conv, turn), text=" ".join(said) or text, answers=answers, question_type=qtype,
                answerable=answerable, evidence=tuple(Evidence(ref=d, doc_id=d, relevance=g)
                                                      for d, g in judged.items()),
                doc_ids=tuple(judged), meta=meta, conversation=conv, turn=turn, history=history))
        if not queries and last:
            raise DatasetError("no task was kept", dataset=self.name, file=qrels_file,
                               fix="check dataset.domain and, with dataset.answers=true, the generation tasks")
        return docs, queries, stats
