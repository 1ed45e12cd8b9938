"""The sweep table at 80 columns (what varies, the ranking metric, baselines apart), runs.csv, run names."""

from __future__ import annotations

import csv
import io

from rich.console import Console

from ragbench.compare.runcases import config_label
from ragbench.sweep import job_labels
from ragbench.tracking.run_names import job_run_name, parse_run_name, short_items
from ragbench.tracking.runs_table import csv_text, print_sweep_table


def _rows() -> list[dict]:
    rows = []
    for i, (topk, f1) in enumerate([(10, 0.41), (5, 0.38), (3, 0.30)]):
        rows.append({"label": f"retrieval.topk={topk} #{i}", "run_id": f"r{i}", "status": "FINISHED",
                     "dataset": "qasper", "baseline": "", "answer/f1": f1, "retrieval/hit_at_topk": 0.5 + i / 10,
                     "retrieval/mrr": 0.31, "context/evidence_text_recall": 0.44 + i / 100,
                     "answer/em": 0.1 * i, "retrieval/recall_at_topk": 0.6 + i / 10, "cases/failed": 0.0,
                     "cases/skipped": float(i)})
    rows.append({**rows[0], "label": "retrieval=oracle retrieval.topk=5 #3", "run_id": "r3", "baseline": "oracle",
                 "answer/f1": 0.2})
    return rows


def _render(rows: list[dict], width: int = 80) -> str:
    con = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    print_sweep_table(con, rows, "answer/f1", title="sweep: 4 jobs")
    return con.export_text()


def test_table_fits_80_columns_with_topk_and_the_ranking_metric():
    text = _render(_rows())
    assert max(len(line) for line in text.splitlines()) <= 80
    first = text.split("more metrics")[0]
    assert "qasper: 3 configurations, best answer/f1 first, 1 baseline" in first
    assert "f1 ▼" in first and all(f"topk={k}" in first for k in (10, 5, 3))
    assert "0.4100" in first and "0.3800" in first
    lines = first.splitlines()
    order = [next(i for i, line in enumerate(lines) if f"topk={k} " in line) for k in (10, 5, 3)]
    assert order == sorted(order)  # ranked as given: best F1 first
    oracle = next(i for i, line in enumerate(lines) if "oracle baseline" in line)
    assert oracle > max(order) and "├" in "".join(lines[max(order):oracle])  # below a line, unranked
    assert "│  - │ oracle baseline topk=5 #3 " in text
    more = text.split("more metrics")[1]
    table, line = more.split("the same in every job")
    assert "skipped" in table and "failed" not in table  # the rest that differs: a second table
    assert line.strip() == ": failed 0"  # a column of one value: one line, not a table


def test_more_metrics_never_is_a_table_of_equal_columns():
    rows = [{**r, "cases/skipped": 0.0} for r in _rows()]
    text = _render(rows)
    assert "more metrics" not in text
    assert text.rstrip().endswith("the same in every job: failed 0, skipped 0")


def test_tied_configurations_share_a_rank_marked_as_a_tie():
    from ragbench.tracking.report import rank_within_dataset
    from ragbench.tracking.runs_table import rank_labels

    assert rank_labels([0.5, 0.4, 0.4, 0.3]) == ["1", "=2", "=2", "4"]
    assert rank_labels([0.2, 0.2, 0.2]) == ["=1", "=1", "=1"]
    assert rank_labels([0.5, None, None]) == ["1", "2", "3"]  # no value ties no value
    rows = [{**r, "answer/f1": 0.38 if i else 0.41} for i, r in enumerate(_rows()[:3])]
    text = _render(rows)
    assert "│ =2 │ topk=5 #1" in text and "│ =2 │ topk=3 #2" in text and "│  1 │ topk=10 #0" in text
    assert "=n: tied on answer/f1" in text
    flat = [{**r, "retrieval/mrr_at_10": 0.31} for r in _rows()[:3]]  # a retrieval-only top-k sweep's MRR@10
    ranked = rank_within_dataset([dict(r) for r in flat], "retrieval/mrr_at_10")
    assert [r["rank"] for r in ranked] == [1, 1, 1] and all(r["tied"] for r in ranked)
    con = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    print_sweep_table(con, ranked, "retrieval/mrr_at_10", title="")
    out = con.export_text()
    assert "3 configurations, all tied on retrieval/mrr_at_10" in out
    assert out.split("more metrics")[0].count("│ =1 │") == 3


def test_a_wide_terminal_gets_one_table():
    text = _render(_rows(), width=140)
    assert "more metrics" not in text and "skipped" in text


def test_runs_csv_one_row_per_run_with_params_and_headline_metrics():
    runs = [{"run_id": f"r{k}", "run_name": f"topk={k} #0", "status": "FINISHED", "baseline": "",
             "params": {"dataset.name": "qasper", "retrieval.topk": str(k), "llm.model": "x", "seed": "0"},
             "metrics": {"answer/f1": 0.1 * k, "headline/answer_f1": 0.1 * k, "cases/failed": 0.0, "other/x": 1.0}}
            for k in (3, 5)]
    rows = list(csv.DictReader(io.StringIO(csv_text(runs))))
    assert [r["run_id"] for r in rows] == ["r3", "r5"]
    head = list(rows[0])
    assert head == ["run_id", "run_name", "status", "baseline", "dataset.name", "retrieval.topk", "cases/failed",
                    "answer/f1", "headline/answer_f1"]  # no param every run shares (but dataset, top-k); no duplicates
    assert float(rows[1]["answer/f1"]) == 0.5 and rows[0]["retrieval.topk"] == "3"


def test_run_names_lead_with_what_the_sweep_varies():
    name = job_run_name(4, "dataset=qasper,reranker=[mmr,diversity],retrieval.topk=5", ["retrieval.topk", "reranker"])
    assert name == "topk=5 reranker=[mmr,diversity] dataset=qasper #4"
    assert parse_run_name(name) == ("#4", ["topk=5", "reranker=[mmr,diversity]", "dataset=qasper"])
    assert parse_run_name("#4 dataset=qasper,retrieval.topk=5") == ("#4", ["dataset=qasper", "retrieval.topk=5"])
    # the same last key segment twice, or a key that says where results go: kept whole
    assert short_items(["retrieval.topk=5", "reranker.topk=3", "cache.dir=/x"]) == [
        "retrieval.topk=5", "reranker.topk=3", "cache.dir=/x"]
    assert config_label("topk=5 dataset=qasper cache.dir=/x #4") == "dataset=qasper,topk=5"
    assert job_labels({"a": "topk=5 dataset=qasper #0", "b": "topk=3 dataset=qasper #1"}) == {
        "a": "topk=5 #0", "b": "topk=3 #1"}


def test_the_columns_and_ranking_come_from_the_metric_declarations():
    from ragbench.metric_keys import metric_info
    from ragbench.tracking import runs_table

    # the design-card sweep's columns, in order, with their labels: each supplied by its key's declaration
    assert runs_table.KEY_METRICS == {
        "answer/f1": "f1", "retrieval/hit_at_topk": "hit@k", "retrieval/mrr_at_10": "mrr@10",
        "context/evidence_text_recall": "ctx.rec", "judge/accuracy": "judge", "answer/em": "em",
        "retrieval/recall_at_topk": "rec@k", "cases/failed": "failed", "cases/skipped": "skipped"}
    for key, label in runs_table.KEY_METRICS.items():
        assert any(c.key == key and c.label == label for c in metric_info(key).columns)
    assert runs_table.DOC_LEAD == ("retrieval/doc/ndcg_at_10", "retrieval/doc/ndcg_at_topk")
    assert (runs_table.AUTO_ANSWER, runs_table.RANK_FALLBACK) == ("answer/f1", "retrieval/mrr_at_10")
    doc = {"status": "FINISHED", "retrieval/doc/ndcg_at_topk": 0.5, "answer/f1": 0.1}
    assert runs_table.ranking_metric([doc, {**doc}]) == "retrieval/doc/ndcg_at_topk"
    assert runs_table.ranking_metric([{"answer/f1": 0.2, "retrieval/mrr_at_10": 0.3}]) == "answer/f1"
    assert runs_table.ranking_metric([{"retrieval/mrr_at_10": 0.3}]) == "retrieval/mrr_at_10"


def test_a_count_prints_as_an_integer_by_its_declaration():
    from ragbench.tracking.runs_table import _fmt

    assert _fmt(1234.0, "cases/total") == "1,234" and _fmt(3.0, "evidence/unmatched") == "3"
    assert _fmt(0.25, "cases/failure_rate") == "0.2500"  # a rate, not a count
    assert _fmt(0.25, "answer/f1") == "0.2500" and _fmt(0.25, "my/own_key") == "0.2500"


def _design_card_params() -> list[dict[str, str]]:
    return [{"dataset.name": ds, "dataset._target_": f"ragbench.datasets.{ds}.Adapter",
             "retrieval.topk": str(k), "judge.judges.lexical.dataset": ds, "llm.model": "x"}
            for k in (3, 5, 10) for ds in ("locomo", "qasper")]


def test_one_param_per_swept_axis():
    from ragbench.tracking.runs_table import axis_params

    params = _design_card_params()
    assert axis_params(params, ["retrieval.topk", "dataset"]) == ["retrieval.topk", "dataset.name"]
    assert axis_params(params) == ["dataset.name", "retrieval.topk"]  # no swept keys known: each axis once
    # a group whose options differ only by class: its _target_; a swept key without a param: the other axes
    bm = [{"retrieval.retriever._target_": t, "retrieval.retriever.k1": k1, "experiment": "", "seed": s}
          for t, k1, s in (("Dense", "", "1"), ("BM25", "1.2", "2"))]
    assert axis_params(bm, ["retrieval"]) == ["retrieval.retriever._target_"]
    assert axis_params(bm, ["experiment"]) == ["retrieval.retriever._target_"]  # seed splits them alike


def test_runs_csv_keeps_the_swept_keys_and_writes_counts_as_integers():
    runs = [{"run_id": f"r{i}", "run_name": f"#{i}", "status": "FINISHED", "baseline": "", "params": p,
             "metrics": {"cases/total": 233.0, "cases/failed": 0.0, "answer/f1": 0.25, "answer/em": 0.0}}
            for i, p in enumerate(_design_card_params())]
    head, first = csv_text(runs, ["retrieval.topk", "dataset"]).splitlines()[:2]
    assert head == ("run_id,run_name,status,baseline,dataset.name,retrieval.topk,cases/total,cases/failed,"
                    "answer/f1,answer/em")
    assert first == "r0,#0,FINISHED,,locomo,3,233,0,0.25,0.0"  # counts as integers, a score as a float
