"""A team's setup, for real: ``mlflow server`` on PostgreSQL with its artifact proxy
(tests/fixtures/team_server.py), and ragbench's commands against it. One server for the module; the smallest jobs (the Qasper sample's first
questions, BM25, ``stages=retrieval``: no model, no LLM). Skips, naming why, without PostgreSQL or the
``team`` extra; fails instead under RAGBENCH_REQUIRE_TEAM=1 (CI)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.fixtures.jobs import python_module
from tests.fixtures.team_server import Proxy, team_server

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
SMALL = ["dataset=qasper", "dataset.max_queries=3", "retrieval=bm25", "stages=retrieval"]
# a server that refuses is said at once: MLflow's HTTP retries (7, with backoff: minutes) cut to one
FAST_FAIL = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0"}


@pytest.fixture(scope="module")
def team():
    with team_server() as server:
        yield server


def sweep_args(url: str, experiment: str, topk: str, *more: str) -> list[str]:
    return ["ragbench", "-m", *SMALL, f"retrieval.topk={topk}", f"tracking.uri={url}",
            f"tracking.experiment={experiment}", *more]


def runs_of(url: str, experiment: str, view: str = "ACTIVE_ONLY") -> list:
    from mlflow import MlflowClient
    from mlflow.entities import ViewType

    client = MlflowClient(tracking_uri=url)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no experiment {experiment} on {url}"
    return list(client.search_runs([exp.experiment_id], max_results=1000,
                                   run_view_type=getattr(ViewType, view)))


def one_line(text: str) -> str:
    """The text's one line naming a fix (log prefixes allowed); fails where there are more, or a traceback."""
    assert "Traceback" not in text, text[-3000:]
    lines = [line for line in text.splitlines() if "fix:" in line]
    assert len(lines) == 1, text[-3000:]
    return lines[0]


@pytest.fixture(scope="module")
def first_sweep(team, tmp_path_factory):
    work = tmp_path_factory.mktemp("team-sweep")
    proc = python_module(sweep_args(team.url, "team", "1,2"), work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return work, proc


def test_a_sweep_logs_its_runs_and_artifacts_to_the_team_server(team, first_sweep):
    work, proc = first_sweep
    runs = runs_of(team.url, "team")
    parents = [r for r in runs if r.data.tags.get("ragbench.role") == "sweep"]
    children = [r for r in runs if r.data.tags.get("ragbench.role") == "job"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(children) == 2 and {c.info.status for c in children} == {"FINISHED"}
    assert not (work / "mlruns").exists()  # nothing fell back to a local store
    for c in children:  # the record went through the artifact proxy onto the server's disk
        assert c.info.artifact_uri.startswith("mlflow-artifacts:")
        stored = team.artifacts / c.info.experiment_id / c.info.run_id / "artifacts"
        assert {"run.json", "cases.jsonl"} <= {p.name for p in stored.iterdir()}
    pointers = [json.loads(p.read_text()) for p in work.glob("multirun/*/*/*/record/stored.json")]
    assert len(pointers) == 2 and {p["tracking_uri"] for p in pointers} == {team.url}
    last = proc.stdout.strip().splitlines()[-1]  # the sweep's last line: the team server's page of its jobs
    assert last.startswith(f"this sweep's jobs in MLflow: open {team.url}/#/experiments/"), last
    assert parents[0].info.run_id in last


def test_ui_opens_the_servers_page_of_the_latest_sweep_and_starts_no_server(team, first_sweep, capsys):
    from ragbench import ui

    parent = next(r for r in runs_of(team.url, "team") if r.data.tags.get("ragbench.role") == "sweep")
    assert ui.run(["--tracking-uri", team.url, "--experiment", "team", "--no-browser"]) == 0
    out = capsys.readouterr().out
    assert f"{team.url} is a tracking server: no local server started" in out
    exp = parent.info.experiment_id
    assert f"latest sweep {parent.info.run_id}, its jobs: {team.url}/#/experiments/{exp}/runs?" in out
    assert f"viewStateShareKey=ragbench-sweep-{parent.info.run_id}" in out  # the view the sweep saved
    assert (f"its report: {team.url}/#/experiments/{exp}/runs/{parent.info.run_id}/artifacts/compare/"
            "report.html") in out


def test_compare_verify_and_the_report_read_from_the_server(team, first_sweep, tmp_path, capsys):
    from mlflow import MlflowClient

    from ragbench import verify
    from ragbench.compare import cli

    assert cli.run(["--tracking-uri", team.url, "--experiment", "team", "--metric", "retrieval/mrr_at_10",
                    "--report", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "report.html").exists()
    runs = runs_of(team.url, "team")
    jobs = [r for r in runs if r.data.tags.get("ragbench.role") == "job"]
    assert verify.main([jobs[0].info.run_id, "--tracking-uri", team.url]) == 0
    assert "OK: every metric matches" in capsys.readouterr().out
    parent = next(r for r in runs if r.data.tags.get("ragbench.role") == "sweep")
    report = Path(MlflowClient(tracking_uri=team.url).download_artifacts(
        parent.info.run_id, "compare/report.html", str(tmp_path)))
    html = report.read_text()  # the sweep's report, as the server's artifact proxy serves it
    assert html.lstrip().lower().startswith("<!doctype html>")
    assert all(r.info.run_id in html for r in jobs)


def test_three_sweeps_at_once_run_each_job_once(team, tmp_path):
    """Three processes, one experiment, overlapping grids (each config in two sweeps): every job runs once,
    each sweep shows all of its jobs FINISHED (the shared ones as copies of the run that ran them)."""
    grids = {"a": "3,4", "b": "4,5", "c": "3,5"}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = {}
    for name, grid in grids.items():
        (tmp_path / name).mkdir()
        procs[name] = subprocess.Popen([sys.executable, "-m", *sweep_args(team.url, "concurrent", grid)],
                                       cwd=tmp_path / name, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)
    results = {name: p.communicate(timeout=600) for name, p in procs.items()}
    for name, p in procs.items():
        assert p.returncode == 0, results[name][1][-3000:]
    runs = runs_of(team.url, "concurrent")
    parents = [r for r in runs if r.data.tags.get("ragbench.role") == "sweep"]
    children = [r for r in runs if r.data.tags.get("ragbench.role") == "job"]
    assert len(parents) == 3 and {p.info.status for p in parents} == {"FINISHED"}
    assert len(children) == 6 and {c.info.status for c in children} == {"FINISHED"}
    for parent in parents:  # each sweep: its own grid, complete
        mine = sorted(c.data.params["retrieval.topk"] for c in children
                      if c.data.tags["mlflow.parentRunId"] == parent.info.run_id)
        assert len(mine) == 2 and len(set(mine)) == 2
    ran = [c for c in children if "ragbench.reused_from" not in c.data.tags]
    runs_per_job = Counter(c.data.tags["ragbench.job_hash"] for c in ran)
    assert sorted(runs_per_job.values()) == [1, 1, 1], runs_per_job  # no duplicate: each job ran once
    copies = [c for c in children if "ragbench.reused_from" in c.data.tags]
    ids = {c.info.run_id for c in ran}
    assert len(copies) == 3 and all(c.data.tags["ragbench.reused_from"] in ids for c in copies)
    every = runs_of(team.url, "concurrent", "ALL")  # withdrawn runs (deleted) included
    assert [r.info.run_id for r in every if r.info.status == "RUNNING"] == []
    print(f"three concurrent sweeps: {len(children)} jobs in {len(parents)} sweeps, {len(ran)} ran, "
          f"{len(copies)} reused, duplicates 0, RUNNING 0, withdrawn {len(every) - len(runs)}")


def test_a_sweep_killed_mid_job_is_closed_by_the_next_sweep(team, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", *sweep_args(team.url, "killed", "1,2,3")], cwd=tmp_path,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not any(r.data.tags.get("ragbench.role") == "job" and r.info.status == "RUNNING"
                      for r in _runs_if_any(team.url, "killed")):
            assert proc.poll() is None, "the sweep ended before a job was seen running"
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    left = {r.info.run_id for r in runs_of(team.url, "killed") if r.info.status == "RUNNING"}
    assert len(left) >= 2  # the parent and the job it was running
    again = python_module(sweep_args(team.url, "killed", "1"), tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    runs = {r.info.run_id: r for r in runs_of(team.url, "killed")}
    assert all(runs[i].info.status == "KILLED" for i in left)
    assert [i for i, r in runs.items() if r.info.status == "RUNNING"] == []


def _runs_if_any(url: str, experiment: str) -> list:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=url)
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else list(client.search_runs([exp.experiment_id], max_results=100))


def test_a_wrong_postgresql_password_is_one_line(team, tmp_path):
    uri = team.pg.uri(password="not-the-password")
    proc = python_module(["ragbench.compare", "--tracking-uri", uri], tmp_path)
    assert proc.returncode == 2
    line = one_line(proc.stderr)
    assert f"postgresql://127.0.0.1:{team.pg.port}/mlflow: the database refused the login" in line
    assert "fix: correct the user and password" in line and "not-the-password" not in proc.stderr


def test_a_database_of_an_older_mlflow_schema_is_one_line_naming_mlflow_db_upgrade(team, tmp_path):
    import psycopg
    from alembic.script import ScriptDirectory
    from mlflow.store.db.utils import _get_alembic_config

    uri = team.pg.create_database("older")
    head = ScriptDirectory.from_config(_get_alembic_config(uri)).get_current_head()
    older = ScriptDirectory.from_config(_get_alembic_config(uri)).get_revision(head).down_revision

    with psycopg.connect(host="127.0.0.1", port=team.pg.port, user="ragbench", password=team.pg.password,
                         dbname="older", autocommit=True) as con:  # the version an older MLflow left
        con.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)")
        con.execute("INSERT INTO alembic_version VALUES (%s)", (older,))
    proc = python_module(sweep_args(uri, "older", "1"), tmp_path)
    assert proc.returncode == 1
    line = one_line(proc.stderr)
    assert f"the database has another MLflow's schema (revision {older}; this MLflow uses {head})" in line
    assert f"run `mlflow db upgrade postgresql://127.0.0.1:{team.pg.port}/older`" in line
    assert team.pg.password not in proc.stderr + proc.stdout


def test_an_artifact_proxy_that_refuses_uploads_keeps_the_record_in_the_folder(team, tmp_path):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=team.url)
    exp_id = client.create_experiment("refused")
    (team.artifacts / exp_id).parent.mkdir(parents=True, exist_ok=True)
    (team.artifacts / exp_id).write_text("a file where the proxy keeps this experiment's folder")
    proc = subprocess.run([sys.executable, "-m", *sweep_args(team.url, "refused", "1")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO), **FAST_FAIL})
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    record = list(tmp_path.glob("multirun/*/*/0/record"))
    assert len(record) == 1 and {"run.json", "cases.jsonl"} <= {p.name for p in record[0].iterdir()}
    assert not (record[0] / "stored.json").exists()  # the folder's copy stays: the only one
    refused = [line for line in proc.stderr.splitlines() if "did not take" in line]
    assert refused and all("fix: check the server's artifact destination" in line for line in refused)
    assert any(f"(the record stays in {record[0]})" in line for line in refused), proc.stderr[-3000:]
    job = next(r for r in runs_of(team.url, "refused") if r.data.tags.get("ragbench.role") == "job")
    assert job.info.status == "FAILED"
    (team.artifacts / exp_id).unlink()  # the proxy takes uploads again: the rerun runs the job and stores it
    again = python_module(sweep_args(team.url, "refused", "1"), tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    runs = [r for r in runs_of(team.url, "refused") if r.data.tags.get("ragbench.role") == "job"]
    done = [r for r in runs if r.info.status == "FINISHED"]
    assert len(done) == 1
    assert {"run.json", "cases.jsonl"} <= {a.path for a in client.list_artifacts(done[0].info.run_id)}
    failed = next(r for r in runs if r.info.run_id == job.info.run_id)  # its kept record, stored by the rerun
    assert failed.data.tags.get("ragbench.record_kept") == "true"
    assert {"run.json", "cases.jsonl"} <= {a.path for a in client.list_artifacts(job.info.run_id)}
    assert (record[0] / "stored.json").exists() and not (record[0] / "cases.jsonl").exists()


def test_a_server_gone_mid_sweep_keeps_the_record_in_the_folder_and_the_rerun_stores_it(team, tmp_path):
    """The server goes away as the job uploads its record: the job's cases stay in its output folder, the
    sweep exits 1 in a line naming the fix; the rerun, the server back, stores that record on the run."""
    from urllib.parse import urlsplit

    proxy = Proxy(("127.0.0.1", int(urlsplit(team.url).port or 0)), cut_at=b"PUT /api/2.0/mlflow-artifacts/")
    try:
        env = {**os.environ, "PYTHONPATH": str(REPO), **FAST_FAIL}
        proc = subprocess.run([sys.executable, "-m", *sweep_args(proxy.url, "gone", "1")], cwd=tmp_path,
                              capture_output=True, text=True, timeout=600, env=env)
        assert proxy.gone.is_set() and proc.returncode == 1, proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        record = list(tmp_path.glob("multirun/*/*/0/record"))
        assert len(record) == 1 and {"run.json", "cases.jsonl"} <= {p.name for p in record[0].iterdir()}
        assert not (record[0] / "stored.json").exists()  # the folder's copy stays: the only one
        cases = (record[0] / "cases.jsonl").read_bytes()
        assert len(cases.splitlines()) == 3
        [job] = [r for r in runs_of(team.url, "gone") if r.data.tags.get("ragbench.role") == "job"]
        assert job.info.status == "RUNNING"  # its end could not reach the server either
        proxy.restart()
        again = python_module(sweep_args(proxy.url, "gone", "1"), tmp_path)
        assert again.returncode == 0, again.stderr[-3000:]
    finally:
        proxy.go_away()
    runs = {r.info.run_id: r for r in runs_of(team.url, "gone")}
    old = runs[job.info.run_id]
    assert old.info.status == "KILLED" and old.data.tags.get("ragbench.record_kept") == "true"
    from mlflow import MlflowClient

    stored = Path(MlflowClient(tracking_uri=team.url).download_artifacts(old.info.run_id, "cases.jsonl",
                                                                           str(tmp_path)))
    assert stored.read_bytes() == cases  # the cases the folder kept, now in the store
    assert (record[0] / "stored.json").exists() and not (record[0] / "cases.jsonl").exists()
    assert [r for r in runs.values() if r.info.status == "RUNNING"] == []
    assert any(r.info.status == "FINISHED" and r.data.tags.get("ragbench.role") == "job"
               for r in runs.values())
