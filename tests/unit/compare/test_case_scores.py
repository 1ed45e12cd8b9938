"""The compact per-case artifact (``case_scores.json``): the numbers a comparison reads of cases.jsonl,
the same after a JSON round trip as from the records themselves, and a bad document refused in one line."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ragbench.compare.runcases import SCORES_FORMAT, from_rows, from_scores_document, scores_document
from ragbench.compare.taxonomy import taxonomy
from ragbench.errors import ConfigError

ROWS = [
    {"qid": "a", "question_type": "single hop", "status": "ok", "retrieval/mrr": 1.0, "answer/f1": 0.5,
     "latency/search_ms": 1.25, "prompt_tokens": 7, "answerable": True, "topk": 3, "error": None,
     "qrels": {"chunk": {"c1": 1}, "unit": {"ev0": 1}}, "ranked_ids": ["c1", "c2", "c3", "c4", "c5"],
     "retrieved_ids": ["c1", "c2", "c3"], "contexts": [{"text": "long"}], "retrieval/hit_at_3": 1.0},
    {"qid": "b", "question_type": "Multi-Hop", "status": "failed", "retrieval/mrr": float("nan"),
     "answer/f1": np.float64(0.25), "latency/search_ms": float("inf"), "prompt_tokens": 0, "answerable": False,
     "topk": 3, "error": "boom", "qrels": {"chunk": {}, "unit": {}}, "ranked_ids": [], "retrieved_ids": []},
    {"qid": "c", "question_type": None, "retrieval/mrr": 0.0, "answer/f1": "n/a", "prompt_tokens": 2,
     "topk": 3, "qrels": {"chunk": {"c9": 2}}, "ranked_ids": ["c1", "c9"], "retrieved_ids": ["c1", "c9"],
     "retrieval/hit_at_3": 0.0},
    {"qid": "d", "question_type": "single hop", "status": "skipped", "topk": 3},
]


def _round_trip(rows):
    """cases.jsonl as a comparison reads it: each record through json.dumps/json.loads."""
    return [json.loads(json.dumps(r, sort_keys=True, default=str, ensure_ascii=False)) for r in rows]


def _same(a, b):
    assert a.qids == b.qids and a.types == b.types
    assert (a.ok == b.ok).all() and (a.skipped == b.skipped).all()
    assert a.fields.keys() == b.fields.keys()
    for key in a.fields:
        np.testing.assert_array_equal(a.fields[key], b.fields[key], err_msg=key)
    assert taxonomy(a).counts == taxonomy(b).counts


def test_compact_document_gives_the_runcases_of_the_parsed_records():
    doc = json.loads(json.dumps(scores_document(ROWS)))  # as written by the job, as read by the comparison
    compact = from_scores_document(doc, run_id="r", source="t", name="#0 x", dataset="locomo", topk=3)
    full = from_rows(_round_trip(ROWS), run_id="r", name="#0 x", dataset="locomo", topk=3)
    _same(compact, full)
    # the handling, field by field: NaN/inf are a field without a value, bool and text are not numbers,
    # a numpy float is a number (json writes it as one), a missing status is ok
    assert "answerable" not in compact.fields and "error" not in compact.fields
    assert math.isnan(compact.fields["retrieval/mrr"][1]) and math.isnan(compact.fields["latency/search_ms"][1])
    assert compact.fields["answer/f1"][1] == 0.25 and math.isnan(compact.fields["answer/f1"][2])
    assert list(compact.ok) == [True, False, True, False] and list(compact.skipped) == [False, False, False, True]
    assert compact.types == ("single_hop", "multi-hop", "unknown", "single_hop")  # metric_name's rule
    assert compact.fields["latency/total_ms"][0] == 1.25 and math.isnan(compact.fields["latency/total_ms"][1])


def test_compact_document_keeps_only_numbers_and_the_taxonomy_fields():
    doc = scores_document(ROWS)
    assert doc["format"] == SCORES_FORMAT
    assert set(doc) == {"format", "qid", "question_type", "status", "fields", "taxonomy"}
    assert all(set(t) <= {"qrels", "ranked_ids", "retrieved_ids"} for t in doc["taxonomy"])
    assert "contexts" not in json.dumps(doc)


BAD = [
    ("not an object", []),
    ("wrong format", {**scores_document(ROWS), "format": "other/1"}),
    ("no fields", {k: v for k, v in scores_document(ROWS).items() if k != "fields"}),
    ("short column", {**scores_document(ROWS), "fields": {"answer/f1": [1.0]}}),
    ("text in a column", {**scores_document(ROWS), "fields": {"answer/f1": [1.0, "x", None, None]}}),
    ("bool in a column", {**scores_document(ROWS), "fields": {"answer/f1": [True, 1.0, None, None]}}),
    ("short status", {**scores_document(ROWS), "status": ["ok"]}),
    ("no taxonomy", {k: v for k, v in scores_document(ROWS).items() if k != "taxonomy"}),
    ("qid not text", {**scores_document(ROWS), "qid": [1, "b", "c", "d"]}),
    ("repeated qid", {**scores_document(ROWS), "qid": ["a", "a", "c", "d"]}),
]


@pytest.mark.parametrize(("what", "doc"), BAD, ids=[b[0] for b in BAD])
def test_bad_compact_document_is_one_named_error(what, doc):
    with pytest.raises(ConfigError) as info:
        from_scores_document(doc, run_id="run9", source="mlflow", name="n", dataset="d")
    msg = str(info.value)
    assert "run9" in msg and "\n" not in msg
