"""compare splits on case tags (the custom format's ``tags``) as on question types: a ``tag=<tag>`` record per
run and metric over the paired cases carrying that tag; ``case_scores.json`` carries the tags too."""

from __future__ import annotations

import numpy as np

from ragbench.compare.analysis import analyse
from ragbench.compare.runcases import case_tags, from_scores_document, scores_document
from tests.unit.compare.synth import rows, run, scores

N = 60
TAGS = [["Travel", "piers"] if i % 3 == 0 else ["travel"] if i % 3 == 1 else [] for i in range(N)]


def _tagged(f1):
    data = rows(f1)
    for row, tags in zip(data, TAGS, strict=True):
        row["query_meta"] = {"tags": tags} if tags else {}
    return data


def test_a_record_per_tag_over_the_cases_carrying_it():
    f1 = scores(N, 3)
    better = np.clip(f1 + 0.2, 0, 1)
    comp, _ = analyse([run("a", _tagged(f1)), run("b", _tagged(better))], metrics=["answer/f1"], baseline="a",
                      resamples=200)
    by = {r.type: r for r in comp.records if r.run == "b"}
    assert by["tag=travel"].n == 40 and by["tag=piers"].n == 20  # "Travel" and "travel" are one tag
    want = float(np.mean(better[::3]) - np.mean(f1[::3]))
    assert abs(by["tag=piers"].delta - want) < 1e-12


def test_tags_round_trip_through_case_scores_and_old_documents_have_none():
    data = _tagged(scores(N, 4))
    assert case_tags(data[0]) == ["travel", "piers"] and case_tags(data[2]) == [] and case_tags({}) == []
    doc = scores_document(data)
    assert from_scores_document(doc, run_id="r", source="t", name="#0 x", dataset="custom").tags[0] == (
        "travel", "piers")
    old = {k: v for k, v in doc.items() if k != "tags"}
    assert from_scores_document(old, run_id="r", source="t", name="#0 x", dataset="custom").tags == ()
