"""``sampling=openviking``: the subsets OpenViking's RAG benchmark samples, by question id.

The selection procedure of ``benchmark/RAG/scripts/sample_dataset.py`` as ``scripts/run_sampling.py`` calls
it (volcengine/OpenViking, commit 6e944cc3e14872ec7e7a80edec9265397f367894; the ids it selects are
recorded in tests/fixtures/openviking/sampling/expected.json and checked): stratified mode, seed 42,
and per dataset ``num_docs`` documents, then ``sample_size`` questions of them stratified by type:

=============  ========  ===========  =============================================================
dataset        num_docs  sample_size  strata (the questions counted)
=============  ========  ===========  =============================================================
locomo         3         80           ``category`` 1-4 (category 5 is kept with its document, uncounted)
syllabusqa     7         90           ``question_type`` (``no answer`` kept with its document, uncounted)
qasper         8         60           first answer type (extractive / free_form / yes_no) of the
                                      question's answerable annotations; unanswerable ones kept, uncounted
financebench   3         12           ``question_type``
=============  ========  ===========  =============================================================

Documents: LoCoMo and SyllabusQA ``random.sample`` them; Qasper and FinanceBench shuffle and then
stable-sort by question count (most first). Questions: each stratum gets ``sample_size // strata`` (the
first ``remainder`` strata in name order one more) from a shuffle of its questions, then a quota a
stratum could not fill is handed round the strata one question per turn. The random calls are the
script's, in its order, re-seeded with 42 where it calls ``random.seed(42)``, and the files are read as
it reads them (all of Qasper's three split files present under the root, SyllabusQA's three CSVs).

A Qasper question whose annotations have several answer types: the script takes the first in a Python
``set``'s iteration order, which follows ``PYTHONHASHSEED`` (a different subset from one process to the
next); ragbench takes the type the script takes under ``PYTHONHASHSEED=0`` (``QASPER_TYPE_ORDER``), so its
subset is the same in every run, and the suite's when the suite runs with ``PYTHONHASHSEED=0``.
"""

from __future__ import annotations

import csv
import json
import random
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ragbench.errors import ConfigError, DatasetError
from ragbench.types import Document, Query

SEED = 42
# run_sampling.py: dataset -> (num_docs, sample_size)
SIZES: dict[str, tuple[int, int]] = {
    "locomo": (3, 80), "syllabusqa": (7, 90), "qasper": (8, 60), "financebench": (3, 12),
}
PRESETS = ("openviking",)
# a Qasper question with several answer types is stratified by the first of these it has: the script's choice
# (``next(iter(set_of_types))``) under PYTHONHASHSEED=0, for each of the four mixes (tests/unit/datasets)
QASPER_TYPE_ORDER = ("yes_no", "free_form", "extractive")
QASPER_FILES = ("qasper-train-v0.3.json", "qasper-dev-v0.3.json", "qasper-test-v0.3.json")
SYLLABUS_FILES = ("train.csv", "val.csv", "test.csv")

T = TypeVar("T")


@dataclass(frozen=True)
class Selection:
    """The suite's subset: its documents (in the order it picks them) and the question ids it keeps
    (the sampled ones plus the uncounted ones of the kept documents)."""

    doc_ids: tuple[str, ...]
    qids: tuple[str, ...]


def check_preset(sampling: str | None, *, dataset: str, num_docs: int | None, sample_size: int | None) -> None:
    if sampling is None:
        return
    if sampling not in PRESETS:
        raise ConfigError(f"dataset.sampling={sampling!r} is not a sampling preset; choose one of {list(PRESETS)} "
                          "or null")
    if dataset not in SIZES:
        raise ConfigError(f"sampling=openviking covers the suite's datasets {sorted(SIZES)}, not {dataset!r}; "
                          "fix: drop sampling=openviking or use dataset.num_docs / dataset.sample_size")
    if num_docs is not None or sample_size is not None:
        raise ConfigError("sampling=openviking sets its own sizes; fix: drop dataset.num_docs / dataset.sample_size")


def _targets(n: int, cats: list[str]) -> dict[str, int] | None:
    """calculate_category_targets: None when the script falls back to plain random sampling."""
    if not cats or n // len(cats) == 0:
        return None
    base, rest = divmod(n, len(cats))
    return {c: base + (1 if i < rest else 0) for i, c in enumerate(cats)}


def stratified(n: int, by_cat: dict[str, list[T]], seed: int = SEED) -> list[T]:
    """stratified_sample_with_reallocation (membership by equality, as the script's ``not in``)."""
    rng = random.Random(seed)
    cats = sorted(by_cat)
    targets = _targets(n, cats)
    if targets is None:
        pool = [x for xs in by_cat.values() for x in xs]
        return random.Random(seed).sample(pool, n) if len(pool) > n else pool
    picked: list[T] = []
    quota = n
    actual: dict[str, int] = {}
    for c in cats:
        xs = by_cat[c].copy()
        rng.shuffle(xs)
        k = min(len(xs), targets[c])
        actual[c] = k
        quota -= k
        picked.extend(xs[:k])
    available = {c: len(by_cat[c]) - actual.get(c, 0) for c in cats}
    while quota > 0:
        allocated = 0
        for c in cats:
            if quota <= 0:
                break
            if available.get(c, 0) > 0:
                xs = by_cat[c].copy()
                rng.shuffle(xs)
                for x in xs:
                    if x not in picked:
                        picked.append(x)
                        available[c] -= 1
                        quota -= 1
                        allocated += 1
                        break
        if allocated == 0:
            break
    return picked


def _group(pairs: list[tuple[str, T]]) -> dict[str, list[T]]:
    out: dict[str, list[T]] = {}
    for cat, item in pairs:
        out.setdefault(cat, []).append(item)
    return out


def _locomo(root: Path, num_docs: int, n: int) -> Selection:
    data = json.loads((root / "data" / "locomo10.json").read_text(encoding="utf-8"))
    data = data if isinstance(data, list) else [data]
    per_doc = [_group([(str(q.get("category")), q) for q in doc.get("qa", []) if str(q.get("category")) != "5"])
               for doc in data]
    chosen = data if num_docs >= len(data) else random.Random(SEED).sample(data, num_docs)
    by_cat: dict[str, list[tuple[int, Any]]] = {}
    for doc in chosen:
        idx = data.index(doc)
        for cat, qs in per_doc[idx].items():
            by_cat.setdefault(cat, []).extend((idx, q) for q in qs)
    keep = set()
    for idx, q in stratified(n, by_cat):
        keep.add((idx, next(i for i, item in enumerate(data[idx].get("qa", [])) if item == q)))
    qids = [f"{doc['sample_id']}/q{qi}" for doc in chosen for qi, q in enumerate(doc.get("qa", []))
            if (data.index(doc), qi) in keep or str(q.get("category")) == "5"]
    return Selection(tuple(str(d["sample_id"]) for d in chosen), tuple(qids))


def _syllabusqa(root: Path, num_docs: int, n: int) -> Selection:
    rows: list[dict[str, Any]] = []
    for name in SYLLABUS_FILES:
        path = root / "data" / "dataset_split" / name
        if path.exists():
            with open(path, encoding="utf-8") as f:
                rows.extend({**row, "_source_file": name} for row in csv.DictReader(f))
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row.get("syllabus_name", "unknown")].append(row)
    per_doc = {d: _group([(str(r.get("question_type")), r) for r in items if r.get("question_type") != "no answer"])
               for d, items in groups.items()}
    names = list(groups)
    chosen = names if num_docs >= len(names) else random.Random(SEED).sample(names, num_docs)
    by_cat: dict[str, list[dict[str, Any]]] = {}
    for d in chosen:
        for cat, items in per_doc[d].items():
            by_cat.setdefault(cat, []).extend(items)
    kept = stratified(n, by_cat) + [r for d in chosen for r in groups[d] if r.get("question_type") == "no answer"]
    return Selection(tuple(chosen), tuple(str(r["id"]) for d in chosen for r in kept if r["syllabus_name"] == d))


def _qasper_type(qa: dict[str, Any]) -> str | None:
    """None for a question every annotation calls unanswerable; else the script's primary type."""
    answers = qa.get("answers", [])
    if all(a.get("answer", {}).get("unanswerable", False) for a in answers):
        return None
    types = set()
    for a in answers:
        body = a.get("answer", {})
        if body.get("unanswerable", False):
            continue
        if body.get("extractive_spans"):
            types.add("extractive")
        elif body.get("free_form_answer", "").strip():
            types.add("free_form")
        elif body.get("yes_no") is not None:
            types.add("yes_no")
    # the script takes the first of a set, whose order follows PYTHONHASHSEED; ragbench takes the one the script
    # takes under PYTHONHASHSEED=0 (CPython 3.11+) for every mix, so a subset never changes between runs
    return next((t for t in QASPER_TYPE_ORDER if t in types), "extractive")


def _qasper(root: Path, num_docs: int, n: int) -> Selection:
    papers: dict[str, dict[str, Any]] = {}
    for name in QASPER_FILES:
        if (root / name).exists():
            papers.update(json.loads((root / name).read_text(encoding="utf-8")))
    ids = list(papers)
    counts = {p: sum(_qasper_type(qa) is not None for qa in papers[p].get("qas", [])) for p in ids}
    if num_docs >= len(ids):
        chosen = ids
    else:
        shuffled = ids.copy()
        random.Random(SEED).shuffle(shuffled)
        chosen = sorted(shuffled, key=lambda p: counts[p], reverse=True)[:num_docs]
    by_cat: dict[str, list[tuple[str, int]]] = {}
    for p in chosen:
        for i, qa in enumerate(papers[p].get("qas", [])):
            kind = _qasper_type(qa)
            if kind is not None:
                by_cat.setdefault(kind, []).append((p, i))
    if _targets(n, sorted(by_cat)) is None:
        raise DatasetError("too few Qasper question types for sampling=openviking (the suite's script fails here)",
                           dataset="qasper", file=str(root), fix="use dataset.sample_size instead")
    keep = set(stratified(n, by_cat))
    qids = [str(qa.get("question_id") or f"{p}/q{i}") for p in chosen for i, qa in enumerate(papers[p].get("qas", []))
            if _qasper_type(qa) is None or (p, i) in keep]
    return Selection(tuple(chosen), tuple(qids))


def _financebench(root: Path, num_docs: int, n: int) -> Selection:
    path = root / "data" / "financebench_open_source.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row.get("doc_name", "unknown")].append(row)
    names = list(groups)
    if num_docs >= len(names):
        chosen = names
    else:
        order = sorted(names, key=lambda d: len(groups[d]), reverse=True)
        random.Random(SEED).shuffle(order)
        chosen = sorted(order, key=lambda d: len(groups[d]), reverse=True)[:num_docs]
    by_cat: dict[str, list[dict[str, Any]]] = {}
    for d in chosen:
        for row in groups[d]:
            by_cat.setdefault(row.get("question_type", "domain-relevant"), []).append(row)
    kept = stratified(n, by_cat)
    return Selection(tuple(chosen), tuple(str(r["financebench_id"]) for d in chosen for r in kept
                                          if r.get("doc_name", "unknown") == d))


_READERS = {"locomo": _locomo, "syllabusqa": _syllabusqa, "qasper": _qasper, "financebench": _financebench}


def select(dataset: str, root: Path) -> Selection:
    """The suite's subset of the official files under ``root`` (ragbench's layout for ``dataset``)."""
    num_docs, n = SIZES[dataset]
    try:
        return _READERS[dataset](Path(root), num_docs, n)
    except (OSError, ValueError, KeyError, TypeError, StopIteration) as exc:
        raise DatasetError(f"sampling=openviking could not read the official files ({type(exc).__name__}: {exc})",
                           dataset=dataset, file=str(root),
                           fix="point dataset.path at the unmodified official files") from exc


def apply(dataset: str, root: Path, docs: Sequence[Document],
          queries: Sequence[Query]) -> tuple[list[Document], list[Query]]:
    """Keeps the suite's documents and questions (in ragbench's own order)."""
    sel = select(dataset, root)
    keep_docs: set[Hashable] = set(sel.doc_ids)
    keep_q = set(sel.qids)
    return [d for d in docs if d.doc_id in keep_docs], [q for q in queries if q.qid in keep_q]
