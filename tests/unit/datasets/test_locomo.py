"""LoCoMo adapter (the lead's): counts by category from the raw file, SOURCE.md evidence quirks, bad input."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from ragbench.datasets.base import bundled_sample
from ragbench.datasets.locomo import CATEGORIES, LocomoAdapter, parse_evidence_ids
from ragbench.errors import DatasetError

FILE = "data/locomo10.json"


def raw() -> list[dict]:
    return json.loads((bundled_sample("locomo") / FILE).read_text(encoding="utf-8"))


def load(root: Path | None = None, **kw):
    return LocomoAdapter(name="locomo", path=str(root) if root else None, **kw).load()


def test_raw_sample_matches_source_md():
    cats = Counter(qa["category"] for conv in raw() for qa in conv["qa"])
    assert cats == {1: 43, 2: 63, 3: 13, 4: 114, 5: 71}


def test_counts_by_type_match_raw_categories():
    cats = Counter(qa["category"] for conv in raw() for qa in conv["qa"] if qa["category"] != 5)
    es = load()
    assert Counter(q.question_type for q in es.queries) == {CATEGORIES[c]: n for c, n in cats.items()}
    assert Counter(q.meta["category"] for q in es.queries) == cats
    assert len(es.queries) == 233 and es.stats["qa_adversarial_excluded"] == 71


def test_adversarial_included_are_refusals():
    es = load(include_adversarial=True)
    adv = [q for q in es.queries if q.question_type == "adversarial"]
    assert len(adv) == 71 and len(es.queries) == 304
    assert all(not q.answerable and q.answers == ("Not mentioned",) for q in adv)
    assert all(q.meta["adversarial_answer"] for q in adv)


def test_sessions_and_turns():
    es = load()
    assert [len(d.sections) for d in es.documents] == [19, 19]  # conv-26 has date keys up to 35, sessions to 19
    assert sum(len(s.paragraphs) for d in es.documents for s in d.sections) == 788
    first = es.documents[0].sections[0]
    assert first.ref == "session_1" and "DATE: 1:56 pm on 8 May, 2023" in first.title
    assert first.paragraphs[0].ref == "D1:1"
    assert sum("[shares a photo:" in p.text for d in es.documents for s in d.sections for p in s.paragraphs) == 188


def test_evidence_refs_exist_as_paragraph_refs():
    es = load()
    refs = {d.doc_id: {p.ref for s in d.sections for p in s.paragraphs} for d in es.documents}
    evidence = [(e.doc_id, e.ref) for q in es.queries for e in q.evidence]
    assert len(evidence) == 309 and all(ref in refs[doc] for doc, ref in evidence)
    assert es.stats["qa_without_evidence"] == 2


@pytest.mark.parametrize(("entry", "ids", "bad", "recovered"), [
    ("D8:6; D9:17", ["D8:6", "D9:17"], 0, 0),
    ("D", [], 1, 0),
    ("D:11:26", ["D11:26"], 0, 1),
    ("D:11:26; D2:3", ["D11:26", "D2:3"], 0, 1),
    ("D9:1 D4:4 D4:6", ["D9:1", "D4:4", "D4:6"], 0, 0),
    ("D22:1 D22:2 D9:10 D9:11", ["D22:1", "D22:2", "D9:10", "D9:11"], 0, 0),
    ("D21:18 D21:22 D11:15 D11:19", ["D21:18", "D21:22", "D11:15", "D11:19"], 0, 0),
    ("D01:03", ["D1:3"], 0, 0),
])
def test_source_md_quirks_parse(entry, ids, bad, recovered):
    assert parse_evidence_ids([entry]) == (ids, bad, recovered)


def test_malformed_evidence_in_a_file_is_parsed_and_counted(tmp_path):
    data = raw()
    qas = data[0]["qa"]
    qas[0]["evidence"] = ["D8:6; D9:17"]
    qas[1]["evidence"] = ["D"]
    qas[2]["evidence"] = ["D:11:26", "D1:3"]
    qas[3]["evidence"] = []
    (tmp_path / "data").mkdir()
    (tmp_path / FILE).write_text(json.dumps(data, indent=2), encoding="utf-8")
    es = load(tmp_path, include_adversarial=True)
    by_id = {q.qid: q for q in es.queries}
    assert [e.ref for e in by_id["conv-26/q0"].evidence] == ["D8:6", "D9:17"]
    assert by_id["conv-26/q1"].evidence == ()
    assert [e.ref for e in by_id["conv-26/q2"].evidence] == ["D11:26", "D1:3"]  # "D:11:26" recovered
    assert es.stats["evidence_unparseable"] == 1 and es.stats["evidence_ids_recovered"] == 1
    assert es.stats["qa_without_evidence"] == 2 + 2  # q1 and q3, plus the two of the sample
    assert len(es.queries) == 304


def _error(root: Path) -> DatasetError:
    with pytest.raises(DatasetError) as info:
        load(root)
    assert "dataset 'locomo'" in str(info.value) and "fix:" in str(info.value)
    return info.value


def test_missing_file(tmp_path):
    assert _error(tmp_path).file.endswith("locomo10.json")


@pytest.mark.parametrize(("content", "message"), [
    (b'[{"sample_id": ', "invalid JSON"),
    (b'{"conv-26": {}}', "expected a JSON array"),
    (b'[{"sample_id": "c\xff"}]', "invalid UTF-8"),
    (b'[{"sample_id": "c1", "conversation": {}}]', "required field is missing"),
])
def test_bad_files(tmp_path, content, message):
    (tmp_path / "data").mkdir()
    (tmp_path / FILE).write_bytes(content)
    assert message in str(_error(tmp_path))


def test_missing_category_names_the_record(tmp_path):
    data = raw()
    del data[1]["qa"][5]["category"]
    (tmp_path / "data").mkdir()
    (tmp_path / FILE).write_text(json.dumps(data), encoding="utf-8")
    err = _error(tmp_path)
    assert err.field == "category" and err.record == "#1 (conv-30) qa[5]"


def test_evidence_counters_cover_only_the_questions_kept():
    kept = LocomoAdapter(name="locomo").load()
    assert kept.stats["qa_adversarial_excluded"] > 0
    assert kept.stats["evidence_ids"] == sum(len(q.evidence) for q in kept.queries) == 309
    everything = LocomoAdapter(name="locomo", include_adversarial=True).load()
    assert everything.stats["evidence_ids"] == sum(len(q.evidence) for q in everything.queries) == 382
