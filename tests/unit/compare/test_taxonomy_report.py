"""The failure taxonomy (from qrels and ranked ids, or from per-case metrics), the report files, the CLI's usage errors."""

from __future__ import annotations

import json
import os

import pytest

from ragbench.compare import taxonomy as tx
from ragbench.compare.analysis import analyse
from ragbench.compare.cli import run as cli
from ragbench.compare.plots import pareto_front
from ragbench.compare.report import write_json, write_report
from ragbench.compare.runcases import from_rows

TESTS = os.getpid()


def _case(qid: str, **fields) -> dict:
    return {"qid": qid, "question_type": fields.pop("question_type", "single-hop"), "status": "ok", **fields}


# per-case metrics only (today's cases.jsonl): top-k 3, the job also scores ranks 1, 3, 5
METRIC_CASES = [
    (_case("a", **{"retrieval/hit_at_3": 0.0, "retrieval/hit_at_5": 0.0, "retrieval/mrr": 0.0}), tx.NOT_RETRIEVED),
    (_case("b", **{"retrieval/hit_at_3": 0.0, "retrieval/hit_at_5": 1.0, "retrieval/mrr": 0.25}), tx.BELOW_K),
    (_case("c", **{"retrieval/hit_at_3": 1.0, "retrieval/hit_at_5": 1.0, "retrieval/mrr": 1.0,
                   "context/evidence_text_recall": 0.0}), tx.LOST_BY_EXPANSION),
    (_case("d", **{"retrieval/hit_at_3": 1.0, "retrieval/hit_at_5": 1.0, "retrieval/mrr": 1.0,
                   "context/evidence_text_recall": 1.0, "answer/f1": 0.1}), tx.ANSWERED_WRONG),
    (_case("e", **{"retrieval/hit_at_3": 1.0, "retrieval/hit_at_5": 1.0, "retrieval/mrr": 0.5,
                   "context/evidence_text_recall": 1.0, "answer/f1": 0.1, "judge/accuracy": 1.0}), tx.ANSWERED_RIGHT),
    (_case("f", **{"answer/f1": 0.0}), tx.NO_GOLD),  # no matched evidence: no retrieval scores
    ({**_case("g", **{"retrieval/hit_at_3": 1.0, "retrieval/mrr": 1.0}), "status": "failed"}, tx.FAILED),
]


def test_taxonomy_from_per_case_metrics():
    rows = [r for r, _ in METRIC_CASES]
    run = from_rows(rows, run_id="r", name="#0 x=1", dataset="locomo", topk=3)
    t = tx.taxonomy(run)
    assert [tx.classify(run, i, 3, 5)[0] for i in range(len(rows))] == [c for _, c in METRIC_CASES]
    assert t.counts["all"] == {c: 1 for _, c in METRIC_CASES}
    assert t.depth == 5 and t.notes == () and "per-case retrieval metrics" in t.source


def test_taxonomy_says_when_below_k_is_not_observable():
    rows = [_case("a", **{"retrieval/hit_at_5": 0.0, "retrieval/mrr": 0.0})]
    t = tx.taxonomy(from_rows(rows, run_id="r", name="r", dataset="d", topk=5))
    assert t.counts["all"] == {tx.NOT_RETRIEVED: 1}
    assert "cannot be told apart" in t.notes[0]


# qrels and a deeper ranked list (the extended cases.jsonl): ids decide, at top-k 2
QREL_CASES = [
    (_case("a", ranked_ids=["x", "y", "z", "w"], qrels={"g": 1}), tx.NOT_RETRIEVED),
    (_case("b", ranked_ids=["x", "y", "g"], qrels={"chunk": {"g": 2, "h": 0}, "unit": {"u": 1}}), tx.BELOW_K),
    (_case("c", ranked_ids=["g", "y"], qrels=["g"], **{"context/evidence_text_recall": 0.0}), tx.LOST_BY_EXPANSION),
    (_case("d", ranked_ids=["y", "g"], qrels={"g": 1}, **{"context/evidence_text_recall": 0.5, "answer/f1": 0.9}),
     tx.ANSWERED_RIGHT),
    (_case("e", ranked_ids=["y"], qrels={}), tx.NO_GOLD),
    (_case("f", ranked_ids=["y", "h"], qrels={"h": 0}), tx.NO_GOLD),  # grade 0 is not relevant
]


def test_taxonomy_from_qrels_and_ranked_ids():
    rows = [r for r, _ in QREL_CASES]
    run = from_rows(rows, run_id="r", name="r", dataset="d", topk=2)
    assert [tx.classify(run, i, 2, 0) for i in range(len(rows))] == [(c, True) for _, c in QREL_CASES]
    t = tx.taxonomy(run)
    assert t.depth == 4 and t.notes == () and "qrels" in t.source


def test_taxonomy_per_type():
    rows = [_case("a", question_type="temporal", **{"retrieval/hit_at_5": 0.0, "retrieval/mrr": 0.0}),
            _case("b", question_type="multi hop", **{"retrieval/hit_at_5": 0.0, "retrieval/mrr": 0.0})]
    t = tx.taxonomy(from_rows(rows, run_id="r", name="r", dataset="d", topk=5))
    assert list(t.counts) == ["all", "multi_hop", "temporal"]
    assert t.counts["temporal"] == {tx.NOT_RETRIEVED: 1}


@pytest.mark.parametrize("points,front", [
    ([(1, 0.5), (2, 0.6), (3, 0.55), (1.5, 0.4)], [0, 1]),
    ([(1, 0.5), (1, 0.5)], [0, 1]),  # equal points dominate nothing
    ([(5, 0.9)], [0]),
])
def test_pareto_front(points, front):
    assert pareto_front(points) == front


def _runs():
    def rows(shift):
        return [_case(f"q{i}", question_type=["temporal", "single-hop"][i % 2],
                      **{"answer/f1": min(1.0, (i % 7) / 7 + shift), "retrieval/hit_at_5": float(i % 3 > 0),
                         "retrieval/mrr": (i % 3) / 3, "context/tokens": 100.0 + i + 50 * shift,
                         "latency/generate_ms": 5.0 + i % 4, "context/evidence_text_recall": float(i % 2)})
                for i in range(60)]
    return [from_rows(rows(s), run_id=f"run{j}", name=f"#{j} retrieval.topk={j}", dataset="locomo", topk=5)
            for j, s in enumerate((0.0, 0.2, -0.1))]


def test_report_and_json_files(tmp_path):
    comp, taxa = analyse(_runs(), resamples=300)
    files = write_report(tmp_path / "rep", comp, taxa)
    names = {p.name for p in files}
    assert {"report.md", "comparison.json", "metrics_ci.png", "pareto.png", "by_type_heatmap.png",
            "taxonomy.png"} <= names
    assert all(p.stat().st_size > 0 for p in files)
    assert (tmp_path / "rep" / "metrics_ci.png").read_bytes()[:4] == b"\x89PNG"
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "Holm" in md and "## Failure taxonomy" in md and "![pareto](pareto.png)" in md
    write_json(tmp_path / "c.json", comp, taxa)
    doc = json.loads((tmp_path / "c.json").read_text())
    keys = {"run", "baseline", "metric", "type", "n", "value", "baseline_value", "delta", "ci_low", "ci_high",
            "p_value", "verdict"}
    assert doc["records"] and all(keys <= set(r) for r in doc["records"])
    # one record per (run, metric, type)
    assert len({(r["run"], r["metric"], r["type"]) for r in doc["records"]}) == len(doc["records"])
    assert {t["run"] for t in doc["taxonomy"]} == {"run0", "run1", "run2"}
    assert "Holm" in doc["correction"]


PLOTS = ("metrics_ci.png", "pareto.png", "by_type_heatmap.png", "taxonomy.png")


def test_the_plots_are_four_png_files_drawn_the_same_each_time(tmp_path):
    """The four plots, in their order, as PNG files; drawn twice from one comparison, byte-identical."""
    from ragbench.compare import plots

    comp, taxa = analyse(_runs(), resamples=300)
    labels = {f"run{j}": f"r{j}" for j in range(3)}
    drawn = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        drawn.append(plots.write_plots(tmp_path / name, comp, taxa, labels))
    assert [p.name for p in drawn[0]] == list(PLOTS) and all(p.read_bytes()[:4] == b"\x89PNG" for p in drawn[0])
    assert [p.read_bytes() for p in drawn[0]] == [p.read_bytes() for p in drawn[1]]


@pytest.mark.parametrize("argv,message", [
    (["--runs", "a", "--sweep", "b"], "not allowed with argument"),
    (["--baseline", "a", "--baseline-file", "b.json"], "not allowed with argument"),
    (["--resamples", "10"], "--resamples 10: use 100 to 1,000,000"),
    (["--tolerance", "-1"], "--tolerance -1: use a finite number >= 0"),
    (["--frobnicate"], "unrecognized arguments"),
])
def test_cli_usage_errors_exit_2(argv, message, capsys):
    try:
        code = cli(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_cli_missing_store_is_one_line(tmp_path, capsys):
    code = cli(["--tracking-uri", f"sqlite:///{tmp_path}/nothing/mlflow.db"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "no MLflow store at" in err and "--tracking-uri" in err and "\n" not in err
    assert not (tmp_path / "nothing").exists()  # looking never creates a store
