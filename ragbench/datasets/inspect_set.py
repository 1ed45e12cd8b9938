"""``python -m ragbench.datasets inspect eval.json``: what an EasyRAG evaluation set holds (types,
difficulty), how its quotes match the documents (the benchmark's own matcher), and which items are bad."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragbench.datasets.base import FileReader, fingerprint
from ragbench.datasets.custom import CustomAdapter
from ragbench.datasets.customqa import parse_easyrag
from ragbench.errors import DatasetError
from ragbench.evidence import EvidenceMatcher
from ragbench.ingest.hierarchical import HierarchicalChunker
from ragbench.text import normalize
from ragbench.types import ChunkTree, Evidence, Query


@dataclass(frozen=True)
class SetReport:
    """Counts, evidence matching and bad items of one evaluation set."""

    samples: int
    by_type: Mapping[str, int]
    by_difficulty: Mapping[str, int]
    by_type_difficulty: Mapping[tuple[str, str], int]
    answerable: int
    evidence_how: Mapping[str, int]  # exact | soft | unmatched | unchecked
    bad: Sequence[tuple[str, str]] = field(default_factory=tuple)  # (id, reason)

    @property
    def match_rate(self) -> float | None:
        checked = sum(v for k, v in self.evidence_how.items() if k != "unchecked")
        return (self.evidence_how.get("exact", 0) + self.evidence_how.get("soft", 0)) / checked if checked else None


def read_set(path: Path) -> tuple[list[Any], dict[str, Any]]:
    """(samples, metadata) of an evaluation-set file: a JSON array, or ``{"metadata", "samples"}``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"cannot read the evaluation set: {exc}", dataset="custom", file=str(path),
                           fix="give the JSON file written by `python -m ragbench.datasets generate`") from None
    if isinstance(data, list):
        return data, {}
    if isinstance(data, dict) and isinstance(data.get("samples"), list):
        return data["samples"], dict(data.get("metadata") or {})
    raise DatasetError("expected a JSON array of samples or an object with 'samples'", dataset="custom",
                       file=str(path), fix="give an EasyRAG evaluation set")


def inspect_samples(samples: Sequence[Any], tree: ChunkTree | None, *, file: str = "eval.json") -> SetReport:
    """Counts every sample; checks each with the custom adapter's own parser and each quote with the
    evidence matcher over ``tree`` (None: quotes are counted as unchecked)."""
    matcher = EvidenceMatcher(tree) if tree is not None else None
    docs: dict[str, str] = {}  # the names the custom adapter accepts: relative path, file name, stem
    for d in sorted({c.doc_id for c in tree.chunks.values()} if tree is not None else ()):
        for name in (Path(d).stem, Path(d).name, d):
            docs[name] = d
    bad: list[tuple[str, str]] = []
    how: Counter[str] = Counter()
    by_type: Counter[str] = Counter()
    by_diff: Counter[str] = Counter()
    cross: Counter[tuple[str, str]] = Counter()
    seen: dict[str, str] = {}
    ids: set[str] = set()
    answerable = 0
    for n, row in enumerate(samples):
        sid = str(row.get("id", f"#{n}")) if isinstance(row, dict) else f"#{n}"
        try:
            (qa,) = parse_easyrag([row], dataset="custom", file=file)
        except DatasetError as exc:
            first = str(exc).splitlines()[0]
            what = first.split(f"field '{exc.field}': ", 1)[-1] if exc.field else first.split(": ", 1)[-1]
            bad.append((sid, f"field '{exc.field}': {what}" if exc.field else what))
            continue
        if sid in ids:
            bad.append((sid, "the id is used by an earlier item too"))
        ids.add(sid)
        qtype, diff = qa.question_type, str(qa.meta.get("difficulty") or "unknown")
        by_type[qtype] += 1
        by_diff[diff] += 1
        cross[(qtype, diff)] += 1
        answerable += qa.answerable
        key = normalize(qa.question)
        if key in seen:
            bad.append((sid, f"same question as {seen[key]}"))
        seen.setdefault(key, sid)
        if qa.answerable and not qa.evidence:
            bad.append((sid, "answerable but has no evidence"))
        if not qa.answerable and qa.evidence:
            bad.append((sid, "unanswerable but has evidence"))
        for ev in qa.evidence:
            if matcher is None or not ev.text:
                how["unchecked"] += 1
                continue
            doc = docs.get(ev.doc) if ev.doc else None
            if ev.doc and doc is None:
                bad.append((sid, f"document {ev.doc!r} is not in the documents"))
            emap = matcher.match(Query(qid=sid, text=qa.question, answers=(), question_type=qtype,
                                       evidence=(Evidence(text=ev.text, doc_id=doc),)))
            how[emap.how[0]] += 1
            if emap.how[0] == "unmatched":
                bad.append((sid, f"quote not found in the documents: {ev.text[:80]!r}"))
    return SetReport(samples=len(samples), by_type=dict(by_type), by_difficulty=dict(by_diff),
                     by_type_difficulty=dict(cross), answerable=answerable, evidence_how=dict(how), bad=bad)


def _tree(read: Mapping[str, str], chunker_params: Mapping[str, Any]) -> tuple[ChunkTree, str]:
    from collections import defaultdict

    adapter = CustomAdapter(name="custom", path=read["dataset_path"], docs_dir=read.get("docs_dir") or ".",
                            text_encoding=read.get("text_encoding") or "utf-8")
    reader = FileReader(dataset="custom", root=adapter.root())
    docs, _ = adapter._documents(reader, defaultdict(int))  # noqa: SLF001 - the adapter's own folder reading
    params = {k: v for k, v in chunker_params.items() if k != "chunker"}
    return HierarchicalChunker(**params).chunk(docs), fingerprint(reader.digests(), {})


def _examples(samples: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """Up to ``k`` samples, one question type after another (the file's order within a type)."""
    by_type: dict[str, list[dict[str, Any]]] = {}
    for s in samples:
        by_type.setdefault(str(s.get("question_type")), []).append(s)
    out: list[dict[str, Any]] = []
    for i in range(max((len(v) for v in by_type.values()), default=0)):
        out.extend(v[i] for v in by_type.values() if i < len(v))
    return out[:k]


def inspect_file(path: Path, *, docs: str | None = None, examples: int = 3) -> int:
    """Prints the report of ``path``; the documents folder defaults to the one recorded at generation."""
    from rich.console import Console
    from rich.table import Table

    samples, meta = read_set(path)
    if not samples:
        raise DatasetError("the evaluation set is empty: it holds no samples", dataset="custom", file=str(path),
                           fix="generate it again (`python -m ragbench.datasets generate`; its summary names why "
                               "items were dropped) or give a set with samples")
    prov = meta.get("provenance") or {}
    read = {"dataset_path": docs, "docs_dir": ".", "text_encoding": prov.get("text_encoding") or "utf-8"} if docs \
        else {k: prov[k] for k in ("dataset_path", "docs_dir", "text_encoding") if prov.get(k)}
    folder = Path(docs or prov.get("documents_folder") or "")
    console = Console()
    tree = None
    if read.get("dataset_path"):
        tree, fp = _tree(read, prov.get("chunker") or {})
        if prov.get("documents") and prov["documents"] != fp:
            console.print(f"[yellow]the documents in {folder} changed since the set was generated[/yellow]")
    else:
        console.print("no documents folder recorded: quotes are not checked (give --docs DIR)")
    report = inspect_samples(samples, tree, file=str(path))
    diffs = sorted(report.by_difficulty)
    table = Table(title=f"{path.name}: {report.samples} samples, {report.answerable} answerable")
    table.add_column("type")
    for d in [*diffs, "total"]:
        table.add_column(d, justify="right")
    for t in sorted(report.by_type):
        table.add_row(t, *(str(report.by_type_difficulty.get((t, d), 0)) for d in diffs), str(report.by_type[t]))
    console.print(table)
    rate = report.match_rate
    console.print("evidence matched against the documents: "
                  + (f"{rate:.0%}" if rate is not None else "not checked")
                  + f" ({', '.join(f'{k} {v}' for k, v in sorted(report.evidence_how.items())) or 'no quotes'})")
    for row in _examples([s for s in samples if isinstance(s, dict)], examples):
        quotes = "; ".join(str(e.get("quote", "")) for e in row.get("evidence") or [] if isinstance(e, dict))
        console.print(f"- [bold]{row.get('id')}[/bold] ({row.get('question_type')}, {row.get('difficulty')}): "
                      f"{row.get('question')}\n  answer: {row.get('reference_answer')}\n  quotes: {quotes or '-'}")
    if report.bad:
        bad = Table(title=f"{len(report.bad)} bad items")
        bad.add_column("id")
        bad.add_column("reason")
        for sid, reason in report.bad:
            bad.add_row(sid, reason)
        console.print(bad)
    else:
        console.print("no bad items")
    return 0
