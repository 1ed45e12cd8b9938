"""report.html: one self-contained file; its sweep table carries sort values; its drill-down holds each
question's gold, hits with gold flags, contexts, answers and judge reasoning, every text once."""

from __future__ import annotations

import json
import re

import pytest

from ragbench.compare.analysis import analyse
from ragbench.compare.html import build_html
from ragbench.compare.html_data import baseline_kind, drilldown, varying_params
from ragbench.compare.runcases import from_rows
from ragbench.compare.taxonomy import ANSWERED_RIGHT, ANSWERED_WRONG, BELOW_K, NOT_RETRIEVED

TEXT = {"c1": "Paris is the capital of France.", "c2": "Berlin is in Germany.", "c3": "Rome is old."}


def _row(qid: str, ranked: list[str], answer: str, f1: float, *, gold: str = "c1", topk: int = 2) -> dict:
    return {
        "qid": qid, "question_type": "single_hop" if qid != "q2" else "multi_hop", "status": "ok",
        "question": f"Where is {qid}?", "gold": "Paris", "answers": ["Paris"], "answer": answer,
        "topk": topk, "ranked_ids": ranked, "ranked_doc_ids": [f"doc-{c}" for c in ranked],
        "retrieved_ids": ranked[:topk], "topk_texts": [TEXT[c] for c in ranked[:topk]],
        "qrels": {"chunk": {gold: 1}, "unit": {}}, "evidence": {"matched": True, "texts": ["capital of France"]},
        "contexts": [{"chunk_id": c, "title": f"doc-{c}", "text": TEXT[c], "has_evidence": c == gold}
                     for c in ranked[:topk]],
        "judge_notes": {"llm": {"rubric": "accuracy", "reasoning": f"{answer} vs Paris"}},
        "answer/f1": f1, f"retrieval/hit_at_{topk}": float(gold in ranked[:topk]), "retrieval/hit_at_1": float(ranked[0] == gold),
        "retrieval/mrr": 1.0 / (ranked.index(gold) + 1) if gold in ranked else 0.0,
        "context/evidence_text_recall": float(gold in ranked[:topk]), "context/tokens": 100.0,
    }


@pytest.fixture(scope="module")
def report():
    a = [_row("q0", ["c1", "c2", "c3"], "Paris", 1.0), _row("q1", ["c2", "c3", "c1"], "Berlin", 0.0),
         _row("q2", ["c1", "c3", "c2"], "Paris", 1.0)]
    b = [_row("q0", ["c2", "c1", "c3"], "Paris", 1.0, topk=3), _row("q1", ["c3", "c2", "c1"], "Rome", 0.0, topk=3),
         _row("q2", ["c3", "c2", "c1"], "no idea", 0.0, topk=3)]
    o = [_row(q, ["c1"], "Paris", 1.0, topk=1) for q in ("q0", "q1", "q2")]
    runs = [from_rows(a, run_id="ra", name="topk=2 dataset=locomo #0", dataset="locomo", topk=2,
                      metrics={"answer/f1": 0.6667, "retrieval/mrr": 0.7778, "cases/total": 3}),
            from_rows(b, run_id="rb", name="topk=3 dataset=locomo #1", dataset="locomo", topk=3,
                      metrics={"answer/f1": 0.3333, "retrieval/mrr": 0.5, "cases/total": 3}),
            from_rows(o, run_id="ro", name="retrieval=oracle topk=1 dataset=locomo #2", dataset="locomo", topk=1,
                      metrics={"answer/f1": 1.0, "retrieval/mrr": 1.0, "cases/total": 3})]
    comp, taxa = analyse(runs, resamples=200, baseline="ra")
    labels = {"ra": "topk=2 #0", "rb": "topk=3 #1", "ro": "retrieval=oracle topk=1 #2"}
    records = {"ra": a, "rb": b, "ro": o}
    html = build_html(comp, taxa, labels, records=records, tags={"ro": {"ragbench.baseline": "oracle"}})
    return html, comp, taxa, records


def _data(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    assert m and html.count('id="report-data"') == 1  # the data is embedded once
    return json.loads(m.group(1))


def test_self_contained(report):
    html = report[0]
    assert "http://" not in html and "https://" not in html and "//" not in re.sub(r"<script>.*?</script>", "", html,
                                                                                     flags=re.S)
    assert not re.search(r"<(?:link|img|iframe)\b|\bsrc=", html)  # nothing loaded from anywhere
    assert html.startswith("<!DOCTYPE html>") and "<style>" in html and "<svg" in html


def test_sweep_table_sort_values_and_baselines_apart(report):
    html = report[0]
    table = re.search(r'<table class="sortable sweep".*?</table>', html, re.S).group(0)
    head = re.findall(r"<th(?:\s[^>]*)?>(.*?)</th>", table)
    assert head[:3] == ["run", "topk", "retrieval"]  # the varying params as columns, short keys
    assert "F1" in head and "MRR" in head
    configs, bases = re.findall(r"<tbody[^>]*>(.*?)</tbody>", table, re.S)
    assert 'class="baselines"' in table and "ro" in bases and "ro" not in configs
    f1 = head.index("F1")
    values = [re.findall(r'data-v="([^"]*)"', tr)[f1] for tr in re.findall(r"<tr.*?</tr>", configs, re.S)]
    assert values == ["0.6667", "0.3333"]  # best first, numbers the script sorts on


def test_drilldown_holds_each_question_once_with_hits_gold_flags_and_reasoning(report):
    _, comp, taxa, records = report
    data = _data(report[0])["drill"]
    ds = data["datasets"]["locomo"]
    texts = data["texts"]
    assert len(texts) == len(set(texts))  # each text once, however many runs show it
    assert [q["q"] for q in ds["questions"]] == ["q0", "q1", "q2"]
    q1 = ds["questions"][1]
    assert q1["text"] == "Where is q1?" and q1["gold"] == ["Paris"] and texts[q1["ev"][0]] == "capital of France"
    a1 = ds["cases"]["ra"][1]
    assert a1["a"] == "Berlin" and a1["s"]["answer/f1"] == 0.0 and a1["r"] is False
    assert [(h[0], h[2]) for h in a1["h"]] == [("c2", 0), ("c3", 0), ("c1", 1)]  # ranked, gold flagged
    assert texts[a1["h"][0][3]] == TEXT["c2"] and a1["h"][2][3] == -1  # below top-k: no text stored
    assert a1["c"] == BELOW_K  # gold at rank 3, top-k 2
    assert [texts[x[0]] for x in a1["x"]] == [TEXT["c2"], TEXT["c3"]]
    assert a1["j"]["llm"]["reasoning"] == "Berlin vs Paris"
    assert ds["cases"]["ra"][0]["c"] == ANSWERED_RIGHT and ds["cases"]["rb"][2]["c"] in (ANSWERED_WRONG, NOT_RETRIEVED)
    # without records: scores only, no texts
    bare = drilldown(comp, taxa, {})
    assert bare["texts"] == [] and bare["datasets"]["locomo"]["cases"]["rb"][0]["a"] is None


def test_no_chart_panel_for_a_metric_that_does_not_vary(report):
    html = report[0]
    panels = re.findall(r'<text x="4" y="16" font-weight="600">locomo: ([^<]+)</text>', html)
    assert "answer/f1" in panels and "context/tokens" not in panels  # 100 tokens in every run
    assert "Same value in every run, no panel: context/tokens (locomo)" in html
    assert all(int(w) <= 1600 for w in re.findall(r'<svg width="(\d+)"', html))
    assert "k (cut-off rank)" in html  # the @k curves put k on the axis


def test_script_cannot_be_closed_by_data(report):
    _, comp, taxa, records = report
    evil = {k: [{**r, "answer": "</script><script>alert(1)</script>"} for r in v] for k, v in records.items()}
    html = build_html(comp, taxa, {}, records=evil)
    assert html.count("</script>") == 2  # the data block's and the script's own
    assert _data(html)["drill"]["datasets"]["locomo"]["cases"]["ra"][0]["a"].startswith("</script>")


def test_baseline_and_varying_params_from_run_names():
    runs = [from_rows([{"qid": "a"}], run_id=i, name=n, dataset="d") for i, n in
            [("x", "retrieval=none topk=3 #0"), ("y", "retrieval=bm25 topk=5 #1"), ("z", "#2 dataset=d,retrieval.topk=5")]]
    assert [baseline_kind(r) for r in runs] == ["none", "", ""]
    assert baseline_kind(runs[1], {"ragbench.baseline": "oracle"}) == "oracle"
    cols, values = varying_params(runs)
    assert cols == ["retrieval", "topk", "dataset"] and values["z"] == {"retrieval": "", "topk": "5", "dataset": "d"}


def test_the_ci_is_said_unadjusted_beside_the_holm_verdict(report):
    html = report[0]
    table = re.search(r'<table class="sortable records">.*?</table>', html, re.S).group(0)
    assert "95% CI (unadjusted)" in re.findall(r"<th(?:\s[^>]*)?>(.*?)</th>", table)
    assert "<b>not adjusted</b>" in html and "Holm-adjusted p" in html
    assert "paired CI around the baseline, unadjusted" in html  # the charts say it too
    # the question list's score columns name their run and score (rendered by the script)
    assert "'A: '+(L[a]||a)+' ('+scoreName(X,a)+')'" in html and "'judge accuracy':'F1'" in html
