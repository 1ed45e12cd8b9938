"""``python -m ragbench.judge calibrate`` against the loopback server with scripted judge replies.

Proves the plumbing, not a judge's quality (that needs real models): a two-rubric ``-m`` sweep logs one
MLflow run per judge configuration under a sweep parent, whose kappa, accuracy and confusion matrix equal
the hand-worked values and scikit-learn's; a judge that always agrees has kappa 1; a judge that reads only
the first passage shows a position bias whose CI excludes 0; ``ragbench.compare`` compares the two runs;
the bundled ExpertQA sample runs end to end, writes its record (``run.json``, kind ``calibration``, and a
case line per item) and passes ``ragbench.verify`` (an artifact edited by 1e-7, or an edited ``run.json``,
fails it); a bad labels file is one line and exit 2.
"""

from __future__ import annotations

import json
import re

import pytest
from sklearn.metrics import cohen_kappa_score

from ragbench.judge.__main__ import main
from ragbench.record import RunRecord
from ragbench.verify import main as verify
from tests.fixtures.llm_server import Step

pytestmark = pytest.mark.slow

# hand-worked (tests/unit/judge/test_agreement.py): confusion [[3, 1], [2, 4]], accuracy 0.7, kappa 0.4
HUMAN = [0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
JUDGE = [0, 0, 0, 1, 0, 0, 1, 1, 1, 1]
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_REF1 = re.compile(r'<reference id="ref_1"[^>]*>\s*(.*?)\s*</reference>', re.DOTALL)


def scripted_judge(body):
    """default rubrics: 4 when the answer carries ``verdict=1`` and the first passage is its evidence (a
    judge that reads only the first passage); strict rubrics: the human label (a judge that always agrees)."""
    text = body["messages"][-1]["content"]
    if '"score"' not in text:
        return None
    answer = _ANSWER.search(text).group(1)
    if "Be strict" in text:
        score = 4 if "human=1" in answer else 0
    else:
        first = _REF1.search(text)
        score = 4 if "verdict=1" in answer and first and first.group(1).startswith("EVIDENCE") else 0
    return Step(text=json.dumps({"score": score, "reasoning": "scripted"}))


@pytest.fixture()
def labels_file(tmp_path):
    path = tmp_path / "labels.jsonl"
    lines = [{"id": f"q{i}", "question": f"Question {i}?", "answer": f"Answer {i} human={h} verdict={j}",
              "contexts": [f"EVIDENCE for question {i}.", {"title": "other", "text": f"Unrelated passage {i}."}],
              "question_type": "ab"[i % 2], "generator": "openai/gen", "labels": {"faithfulness": h}}
             for i, (h, j) in enumerate(zip(HUMAN, JUDGE, strict=True))]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def _args(server, store):
    return ["judge.model=openai/judge-a", f"judge.api_base={server.url}", "judge.api_key_env=null",
            "judge.num_retries=0", f"tracking.uri=sqlite:///{store}/mlflow.db", f"cache.dir={store}/cache",
            f"tracking.artifact_root={store}/artifacts", "resamples=500"]


def test_sweep_of_two_rubrics_logs_hand_worked_agreement_and_compares(llm_server, labels_file, tmp_path,
                                                                      monkeypatch, capsys):
    from mlflow import MlflowClient

    from ragbench.compare.cli import run as compare

    monkeypatch.setenv("OPENAI_API_KEY", "none")
    llm_server.rule = scripted_judge
    store = tmp_path / "mlruns"
    rc = main(["calibrate", str(labels_file), "-m", "judge.rubrics=default,strict", "probes=[position]",
               *_args(llm_server, store)])
    assert rc == 0, capsys.readouterr().err
    client = MlflowClient(tracking_uri=f"sqlite:///{store}/mlflow.db")
    exp = client.get_experiment_by_name("ragbench-calibration")
    runs = {r.data.params["judge.rubrics"]: r for r in client.search_runs([exp.experiment_id])
            if r.data.tags.get("ragbench.role") == "job"}
    parents = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("ragbench.role") == "sweep"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert {r.data.tags["mlflow.parentRunId"] for r in runs.values()} == {parents[0].info.run_id}

    m = runs["default"].data.metrics
    assert m["calibration/faithfulness/kappa"] == pytest.approx(0.4)
    assert m["calibration/faithfulness/kappa"] == pytest.approx(cohen_kappa_score(HUMAN, JUDGE))
    assert m["calibration/faithfulness/accuracy"] == pytest.approx(0.7)
    assert m["calibration/faithfulness/kappa_ci_low"] <= 0.4 <= m["calibration/faithfulness/kappa_ci_high"]
    assert m["calibration/faithfulness/n"] == 10 and m["calibration/faithfulness/judge_failed"] == 0
    # the judge reads only the first passage: reversed, the five items it passed fail
    assert m["probe/position/delta"] == pytest.approx(0.5) and m["probe/position/delta_ci_low"] > 0
    assert m["probe/position/flip_rate"] == pytest.approx(0.5)
    summary = json.loads(open(client.download_artifacts(runs["default"].info.run_id, "calibration.json",
                                                          str(tmp_path))).read())
    assert summary["agreement"]["faithfulness"]["confusion"] == [[3, 1], [2, 4]]

    strict = runs["strict"].data.metrics
    assert strict["calibration/faithfulness/kappa"] == 1.0 and strict["calibration/faithfulness/accuracy"] == 1.0
    assert runs["strict"].data.params["judge.metrics"] == '["faithfulness"]'  # narrowed to the labelled rubric

    # resumable: the same configuration again sends no request (verdicts and preflight from the cache)
    llm_server.reset()
    assert main(["calibrate", str(labels_file), "judge.rubrics=default", "probes=[position]",
                 *_args(llm_server, store)]) == 0
    assert llm_server.count == 0

    capsys.readouterr()
    out = tmp_path / "cmp.json"
    assert compare(["--tracking-uri", f"sqlite:///{store}/mlflow.db", "--experiment", "ragbench-calibration",
                    "--metric", "calibration/faithfulness/agree", "--json", str(out)]) == 0
    records = json.loads(out.read_text())["records"]
    overall = {r["run_name"].split()[1].split(",")[0]: r for r in records if r["type"] == "all"}
    assert overall["judge.rubrics=default"]["value"] == pytest.approx(0.7)
    assert overall["judge.rubrics=default"]["baseline_value"] == 1.0  # the always-agreeing strict run


def test_bundled_sample_runs_end_to_end(llm_server, tmp_path, monkeypatch, capsys):
    from mlflow import MlflowClient

    monkeypatch.setenv("OPENAI_API_KEY", "none")
    store = tmp_path / "mlruns"
    assert main(["calibrate", "sample", *_args(llm_server, store)]) == 0, capsys.readouterr().err
    client = MlflowClient(tracking_uri=f"sqlite:///{store}/mlflow.db")
    exp = client.get_experiment_by_name("ragbench-calibration")
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED"
    m = run.data.metrics
    # the fixture's default judge passes everything: accuracy = the share of passed items (40 of 80)
    assert m["calibration/faithfulness/n"] == 80 and m["calibration/faithfulness/accuracy"] == pytest.approx(0.5)
    assert m["calibration/faithfulness/kappa"] == 0.0
    for probe, stat in (("position", "delta"), ("verbosity", "delta"), ("repeat", "std")):
        assert m[f"probe/{probe}/{stat}"] == 0.0 and f"probe/{probe}/{stat}_ci_low" in m
    assert run.data.tags["ragbench.dataset"] == "labels"
    assert run.data.params["labels.n"] == "80"
    # its record, logged as a job's: run.json (kind calibration) and a case line per item; no case_scores.json
    names = {f.path for f in client.list_artifacts(run.info.run_id)}
    assert {"run.json", "cases.jsonl", "cases_table.json", "calibration.json"} <= names
    assert "case_scores.json" not in names
    record = RunRecord.from_json(_read(client, run, "run.json", tmp_path))
    assert record.kind == "calibration" and record.status == "FINISHED" and dict(record.metrics) == m
    assert {k: v for k, v in run.data.tags.items() if k.startswith("ragbench.env.")} == {
        f"ragbench.env.{k}": v for k, v in record.versions.items()}
    lines = _read(client, run, "cases.jsonl", tmp_path).splitlines()
    assert len(lines) == 80 and json.loads(lines[0])["calibration/faithfulness/agree"] in (0.0, 1.0)

    # ragbench.verify recomputes every calibration metric from the run's own artifacts
    capsys.readouterr()
    uri = ["--tracking-uri", f"sqlite:///{store}/mlflow.db"]
    assert verify([run.info.run_id, *uri]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "80 labelled items" in out and "OK: every metric matches to 1e-9" in out
    # and catches an edit of 1e-7 to an artifact
    summary = next(p for p in store.rglob("calibration.json") if run.info.run_id in str(p))
    original = summary.read_text()
    doc = json.loads(original)
    doc["agreement"]["faithfulness"]["accuracy"]["value"] += 1e-7
    summary.write_text(json.dumps(doc))
    assert verify([run.info.run_id, *uri]) == 1
    assert "calibration.json.agreement.faithfulness.accuracy.value: logged 0.5000001" in capsys.readouterr().out
    summary.write_text(original)
    cases = next(p for p in store.rglob("cases.jsonl") if run.info.run_id in str(p))
    lines = [json.loads(x) for x in cases.read_text().splitlines()]
    lines[0]["probe/repeat/std"] += 1e-7
    cases.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert verify([run.info.run_id, *uri]) == 1
    assert "cases.jsonl against cases_table.json.fields.probe/repeat/std[0]" in capsys.readouterr().out
    # and an edited run.json
    record = next(p for p in store.rglob("run.json") if run.info.run_id in str(p))
    lines[0]["probe/repeat/std"] -= 1e-7  # restored
    cases.write_text("".join(json.dumps(x) + "\n" for x in lines))
    doc = json.loads(record.read_text())
    doc["metrics"]["calibration/faithfulness/accuracy"] = 0.99
    record.write_text(json.dumps(doc))
    assert verify([run.info.run_id, *uri]) == 1
    out = capsys.readouterr().out
    assert "run.json metric calibration/faithfulness/accuracy: logged 0.99" in out


def test_a_failed_calibration_logs_its_failed_record(llm_server, labels_file, tmp_path, monkeypatch, capsys):
    """No reply parses: the configuration fails (exit 1, one line) and its run holds a FAILED record naming
    the error, as a failed job's does."""
    from mlflow import MlflowClient

    monkeypatch.setenv("OPENAI_API_KEY", "none")
    llm_server.rule = lambda body: Step(text="Looks fine to me.") if '"score"' in str(body) else None
    store = tmp_path / "mlruns"
    assert main(["calibrate", str(labels_file), "probes=[]", *_args(llm_server, store)]) == 1
    assert "0 parseable verdicts" in capsys.readouterr().err
    client = MlflowClient(tracking_uri=f"sqlite:///{store}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("ragbench-calibration").experiment_id])
    assert run.info.status == "FAILED"
    record = RunRecord.from_json(_read(client, run, "run.json", tmp_path))
    assert record.kind == "calibration" and record.status == "FAILED"
    assert record.error.startswith("[RB-JOB-001] JobFailedError: 0 parseable verdicts")
    assert run.data.tags["ragbench.error"] == record.tags["ragbench.error"] == record.error  # as a job's


def _read(client, run, name, tmp_path):
    with open(client.download_artifacts(run.info.run_id, name, str(tmp_path)), encoding="utf-8") as f:
        return f.read()


def test_bad_labels_file_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "a", "labels": {"faithfulness": "yes"}}\n', encoding="utf-8")
    assert main(["calibrate", str(bad), f"tracking.uri=sqlite:///{tmp_path}/m.db"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"labels file {bad}, line 1: labels.faithfulness must be an integer" in err
    assert main(["calibrate"]) == 2
    assert main(["calibrate", "sample", "judge=nope"]) == 2
    assert "ragbench.judge:" in capsys.readouterr().err
