"""``ragbench ui``: the URLs it prints, the sweep's saved view, what it reads from a sqlite store, its errors."""

from __future__ import annotations

import json
import sqlite3
from urllib.parse import parse_qs, unquote

from ragbench import ui


def test_runs_url_selects_the_machine_learning_workflow():
    assert ui.runs_url("http://127.0.0.1:5000", "7") == (
        "http://127.0.0.1:5000/#/experiments/7/runs?workflowType=machine_learning")
    url = ui.sweep_url("http://h:1", "7", "abc")
    query = parse_qs(url.split("?", 1)[1])
    assert query["searchFilter"] == ["tags.mlflow.parentRunId = 'abc'"]
    assert query["orderByKey"] == ["metrics.`headline/answer_f1`"] and query["orderByAsc"] == ["false"]
    assert unquote(ui.view_url("http://h:1", "7", "ragbench-sweep-abc")).endswith(
        "runs?workflowType=machine_learning&viewStateShareKey=ragbench-sweep-abc")


def test_sweep_view_shows_its_jobs_with_headline_metrics_and_varying_params():
    view = json.loads(ui.sweep_view("abc", ["retrieval.topk"], ["headline/answer_f1", "headline/mrr_at_10", "other/x"]))
    assert view["searchFilter"] == "tags.mlflow.parentRunId = 'abc'"
    assert view["selectedColumns"] == ["metrics.`headline/answer_f1`", "metrics.`headline/mrr_at_10`",
                                       "params.`retrieval.topk`"]
    assert view["columnOrder"][0] == ui.NAME_COLUMN and set(view["columnWidths"]) == {ui.NAME_COLUMN,
                                                                                      *view["selectedColumns"]}


class _Client:
    def __init__(self) -> None:
        self.tags: dict[tuple[str, str], str] = {}

    def set_experiment_tag(self, exp: str, key: str, value: str) -> None:
        self.tags[(exp, key)] = value


def test_save_sweep_view_is_an_experiment_tag():
    client = _Client()
    key = ui.save_sweep_view(client, "3", "abc", ["a"] * 20, ["headline/answer_f1"])
    value = json.loads(client.tags[("3", ui.VIEW_TAG + key)])
    assert key == "ragbench-sweep-abc" and len(value["selectedColumns"]) == 9  # 8 params at most


def test_store_ids_reads_the_experiment_latest_sweep_and_views(tmp_path):
    db = tmp_path / "mlflow.db"
    con = sqlite3.connect(db)
    con.executescript("""
        CREATE TABLE experiments (experiment_id INTEGER, name TEXT, lifecycle_stage TEXT);
        CREATE TABLE runs (run_uuid TEXT, experiment_id INTEGER, lifecycle_stage TEXT, start_time INTEGER);
        CREATE TABLE tags (key TEXT, value TEXT, run_uuid TEXT);
        CREATE TABLE experiment_tags (key TEXT, value TEXT, experiment_id INTEGER);
        INSERT INTO experiments VALUES (0, 'Default', 'active'), (4, 'ragbench', 'active');
        INSERT INTO runs VALUES ('old', 4, 'active', 1), ('new', 4, 'active', 2), ('job', 4, 'active', 3);
        INSERT INTO tags VALUES ('ragbench.role', 'sweep', 'old'), ('ragbench.role', 'sweep', 'new'),
                                ('ragbench.role', 'job', 'job');
        INSERT INTO experiment_tags VALUES ('mlflow.sharedViewState.ragbench-sweep-new', '{}', 4);
    """)
    con.commit()
    con.close()
    assert ui.store_ids(db, "ragbench") == ("4", "new", {"ragbench-sweep-new"})
    assert ui.store_ids(db, "nope") == (None, None, set())


def test_no_store_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert ui.run(["--no-browser"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no MLflow store at" in err and "run from the folder the jobs ran in" in err
    assert ui.run(["--tracking-uri", "http://127.0.0.1:5000"]) == 2
    assert "not a sqlite store" in capsys.readouterr().err
