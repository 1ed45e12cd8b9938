"""``context/openviking_recall`` equals OpenViking's adapter + ``check_recall`` end to end: per question of
four datasets' samples, ragbench's OpenViking evidence list equals the one OpenViking's own adapter
built, and the metric on the same contexts equals OpenViking's recall (``tests/fixtures/openviking``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ragbench.ingest.hierarchical import HierarchicalChunker
from ragbench.judge.context import context_scores, openviking_evidence
from tests.fixtures.openviking.make_golden import ragbench_adapters

GOLDEN = json.loads((Path(__file__).resolve().parents[2] / "fixtures/openviking/golden.json").read_text("utf-8"))
KEY = "context/openviking_recall"


@pytest.mark.parametrize("name", list(GOLDEN["datasets"]))
def test_evidence_and_recall_equal_openvikings(name):
    golden = GOLDEN["datasets"][name]
    assert golden["openviking_only"] == []  # OpenViking scores no question ragbench does not read
    es = ragbench_adapters()[name].load()
    tree = HierarchicalChunker().chunk(es.documents)
    assert [q.qid for q in es.queries] == [row["qid"] for row in golden["questions"]]
    for q, row in zip(es.queries, golden["questions"], strict=True):
        assert openviking_evidence(q) == row["evidence"], q.qid
        texts = [tree[c].text for c in row["retrieved"]]
        refs = [list(dict.fromkeys(tree[c].refs)) for c in row["retrieved"]]
        digests = [hashlib.sha256((t + "".join(f" [{r}]" for r in rs)).encode()).hexdigest()[:16]
                   for t, rs in zip(texts, refs, strict=True)]
        assert digests == row["sha256"], f"{name} {q.qid}: the contexts changed; regenerate golden.json (README)"
        scores = context_scores(texts, refs, [], row["evidence"], False)
        assert scores.get(KEY) == row["recall"], q.qid


def test_the_golden_sets_hold_the_quirks_they_are_for():
    """Questions OpenViking skips have no score; its lists keep what ragbench's own metrics clean."""
    rows = {n: {r["qid"]: r for r in d["questions"]} for n, d in GOLDEN["datasets"].items()}
    quirks = rows["locomo_quirks"]
    assert quirks["conv-quirks/q0"]["evidence"] == ["D1:03"] and quirks["conv-quirks/q0"]["recall"] == 0.0
    assert quirks["conv-quirks/q1"]["evidence"] == ["D:1:5"]
    assert quirks["conv-quirks/q6"]["evidence"] is None  # category 5
    assert sum(e.startswith("FLOAT SELECTED: ") for r in rows["qasper"].values() for e in r["evidence"]) == 6
    assert sum(r["evidence"] is None for r in rows["syllabusqa"].values()) == 12  # "no answer"
    assert all(e == e.strip() for r in rows["syllabusqa"].values() for e in r["evidence"] or [])
    recalls = [r["recall"] for d in rows.values() for r in d.values() if r["recall"] is not None]
    assert 0 < sum(0 < x < 1 for x in recalls) and 0 < recalls.count(1.0) and 0 < recalls.count(0.0)
