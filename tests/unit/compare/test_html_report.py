"""report.html: one self-contained file; its sweep table carries sort values; its drill-down holds each
question's gold, hits with gold flags, contexts, answers and judge reasoning, every text once."""

from __future__ import annotations

import dataclasses
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
    def config(topk: int, retriever: str = "bm25.BM25") -> dict[str, str]:  # a record's config, dotted
        return {"dataset.name": "locomo", "retrieval.topk": str(topk),
                "retrieval.retriever._target_": f"ragbench.retrieval.{retriever}"}

    runs = [from_rows(a, run_id="ra", name="topk=2 dataset=locomo #0", dataset="locomo", topk=2,
                      metrics={"answer/f1": 0.6667, "retrieval/mrr": 0.7778, "cases/total": 3}, params=config(2)),
            from_rows(b, run_id="rb", name="topk=3 dataset=locomo #1", dataset="locomo", topk=3,
                      metrics={"answer/f1": 0.3333, "retrieval/mrr": 0.5, "cases/total": 3}, params=config(3)),
            from_rows(o, run_id="ro", name="retrieval=oracle topk=1 dataset=locomo #2", dataset="locomo", topk=1,
                      metrics={"answer/f1": 1.0, "retrieval/mrr": 1.0, "cases/total": 3},
                      params=config(1, "baselines.Oracle"))]
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
    assert head[:3] == ["run", "topk", "retriever"]  # the varying config keys as columns, short keys
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


def _configured(run_id: str, name: str, dataset: str = "d", **params: str):
    base = {"retrieval.topk": "5", "retrieval.retriever._target_": "ragbench.retrieval.bm25.BM25",
            "generator.model": "m", "cache.dir": f"/tmp/{run_id}", "reranker.topn": "3"}
    return from_rows([{"qid": "a"}], run_id=run_id, name=name, dataset=dataset, params={**base, **params})


def test_baseline_and_varying_params_from_the_record_not_the_run_name():
    # the names lie (topk=9, retrieval=oracle, a dataset override): the columns and baselines follow the
    # records' configs (RunCases.params, from run.json), which vary in retrieval.topk and the retriever only
    runs = [_configured("x", "retrieval=oracle topk=9 #0", **{"retrieval.topk": "3"}),
            _configured("y", "topk=9 #1", **{"retrieval.retriever._target_": "ragbench.retrieval.baselines.ClosedBook"}),
            _configured("z", "#2 dataset=e,retrieval.topk=9", **{"reranker.topn": "7"}, dataset="e"),
            _configured("w", "topk=9 #3", dataset="e")]
    assert [baseline_kind(r) for r in runs] == ["", "closed_book", "", ""]
    assert baseline_kind(runs[0], {"ragbench.baseline": "oracle"}) == "oracle"  # the record's tag first
    cols, values = varying_params(runs)
    assert cols == ["topk", "retriever", "topn"]  # cache.dir: where results go, not shown
    assert values["x"] == {"topk": "3", "retriever": "BM25", "topn": "3"}
    assert values["y"]["retriever"] == "ClosedBook"
    assert values["z"]["topn"] == "7" and values["w"]["topk"] == "5"
    edited = _configured("x", "retrieval=oracle topk=9 #0", **{"retrieval.topk": "4"})  # the record edited
    assert varying_params([edited, *runs[1:]])[1]["x"]["topk"] == "4"


def test_the_report_table_shows_the_records_params(report):
    _, comp, taxa, records = report
    runs = [dataclasses.replace(r, params={"retrieval.topk": str(r.topk), "seed": "1"}) for r in comp.runs]
    html = build_html(dataclasses.replace(comp, runs=runs), taxa, {}, records=records)
    table = re.search(r'<table class="sortable sweep".*?</table>', html, re.S).group(0)
    assert re.findall(r"<th(?:\s[^>]*)?>(.*?)</th>", table)[:2] == ["run", "topk"]
    assert '<td data-v="3">3</td>' in table and "seed" not in table


def test_the_ci_is_said_unadjusted_beside_the_holm_verdict(report):
    html = report[0]
    table = re.search(r'<table class="sortable records">.*?</table>', html, re.S).group(0)
    assert "95% CI (unadjusted)" in re.findall(r"<th(?:\s[^>]*)?>(.*?)</th>", table)
    assert "<b>not adjusted</b>" in html and "Holm-adjusted p" in html
    assert "paired CI around the baseline, unadjusted" in html  # the charts say it too
    # the question list's score columns name their run and score (rendered by the script)
    assert "'A: '+(L[a]||a)+' ('+scoreName(X,a)+')'" in html and "'judge accuracy':'F1'" in html


def test_compare_reads_each_runs_params_from_its_record(tmp_path):
    """The run list the report is built from (``select.load_cases``) takes a run's params from its record's
    config: a record edited in the artifact store changes them; the run's name and MLflow params do not."""
    from ragbench.compare.select import load_cases
    from ragbench.record import CaseRecord, case_line
    from tests.fixtures import record_runs

    client = record_runs.RecordClient(tmp_path)
    client.put("r1", record_runs.record("topk=3 #0", config={"retrieval": {"topk": 3}, "dataset": {"name": "d"}}))
    case = CaseRecord(qid="q1", question_type="t", answerable=True, question="?", gold="a", answer="a",
                      status="ok", error_type=None, error=None, retrieved_ids=[], retrieved_scores=[],
                      context_ids=[], context_parts=[], citations=[], prompt_tokens=0, completion_tokens=0,
                      scores={"answer/f1": 1.0}, latency_ms={}, fields={})
    (tmp_path / "r1" / "cases.jsonl").write_text(case_line(case))
    run = record_runs.run("r1", "topk=9 #0")
    run.data.params = {"retrieval.topk": "9"}  # what MLflow says: not read for a run with a record
    assert load_cases(client, run).params == {"retrieval.topk": "3", "dataset.name": "d"}
    client.edit("r1", config={"retrieval": {"topk": 4}, "dataset": {"name": "d"}})
    got = load_cases(client, run)
    assert got.params["retrieval.topk"] == "4" and got.topk == 4
