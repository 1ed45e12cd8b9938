"""A sweep's life in a real subprocess: signals, kill -9, concurrent sweeps, the first store creation,
unwritable places, resume across sweeps, and secrets planted everywhere a user could put one.

Fast jobs: retrieval=bm25 (no embedding model) on the bundled Qasper sample.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
FAST = ["retrieval=bm25", "dataset=qasper"]
INTERRUPTED = "interrupted; rerun the same command to resume"


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), **(extra or {})}


def ragbench(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600):
    return subprocess.run([sys.executable, "-m", "ragbench", *args], cwd=cwd, env=_env(env), capture_output=True,
                          text=True, timeout=timeout)


class Running:
    """``python -m ragbench`` in the background, its stderr collected line by line."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "ragbench", *args], cwd=cwd,
                                     env=_env({"PYTHONFAULTHANDLER": "1", **(env or {})}),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.err: list[str] = []
        self.out: list[str] = []
        for stream, sink in ((self.proc.stderr, self.err), (self.proc.stdout, self.out)):
            threading.Thread(target=lambda s=stream, k=sink: k.extend(iter(s.readline, "")), daemon=True).start()

    def wait_for(self, text: str, timeout: float = 300) -> None:
        deadline = time.time() + timeout
        while not any(text in line for line in self.err):
            assert self.proc.poll() is None, "".join(self.err)[-3000:]
            assert time.time() < deadline, f"no {text!r} in time"
            time.sleep(0.05)

    def finish(self, timeout: float = 120) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:  # a hang: every thread's stack (PYTHONFAULTHANDLER) into the failure
            self.proc.send_signal(signal.SIGABRT)
            time.sleep(3)
            self.proc.kill()
            time.sleep(0.5)
            raise AssertionError(f"still running {timeout:.0f} s later; its stderr:\n" + "".join(self.err)[-6000:]) from None
        time.sleep(0.2)  # let the reader threads drain
        return code


def statuses(cwd: Path) -> list[tuple[str, str, str | None]]:
    """(role, status, parent id) of every run, straight from the sqlite store."""
    con = sqlite3.connect(cwd / "mlruns" / "mlflow.db")
    try:
        rows = con.execute(
            "select r.run_uuid, r.status, role.value, parent.value from runs r "
            "left join tags role on role.run_uuid = r.run_uuid and role.key = 'ragbench.role' "
            "left join tags parent on parent.run_uuid = r.run_uuid and parent.key = 'mlflow.parentRunId'"
        ).fetchall()
    finally:
        con.close()
    return [(role, status, parent) for _, status, role, parent in rows]


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_mid_sweep_leaves_no_running_run_and_one_line(tmp_path, sig, code):
    args = ["-m", *FAST, "retrieval.topk=3,5,10", f"cache.dir={tmp_path}/cache"]
    job = Running(args, tmp_path)
    job.wait_for("expand: ")  # the first wave of a job's cases
    job.proc.send_signal(sig)
    assert job.finish() == code
    err = "".join(job.err)
    assert INTERRUPTED in err and "Traceback" not in err
    runs = statuses(tmp_path)
    assert runs and all(status == "KILLED" for _, status, _ in runs), runs
    assert sorted(role for role, _, _ in runs) == ["job", "sweep"]
    rerun = ragbench(args, tmp_path)  # resumes: a new sweep with all three jobs finished
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "sweep: 3 jobs" in rerun.stdout


def test_kill_9_then_a_later_sweep_closes_the_stale_parent_and_job(tmp_path):
    job = Running(["-m", *FAST, "retrieval.topk=3,5", f"cache.dir={tmp_path}/cache"], tmp_path)
    job.wait_for("expand: ")  # the first wave of a job's cases
    job.proc.kill()
    assert job.finish() == -signal.SIGKILL
    assert {status for _, status, _ in statuses(tmp_path)} == {"RUNNING"}
    later = ragbench(["-m", *FAST, "dataset.sample_size=2", "retrieval.topk=7", f"cache.dir={tmp_path}/cache"],
                     tmp_path)
    assert later.returncode == 0, later.stderr[-3000:]
    assert "left RUNNING by a process that is gone" in later.stderr
    runs = statuses(tmp_path)
    assert not [r for r in runs if r[1] == "RUNNING"], runs
    assert sorted(s for role, s, _ in runs if role == "sweep") == ["FINISHED", "KILLED"]


def test_two_sweeps_started_together_each_get_their_own_parent_and_all_children(tmp_path):
    args = ["-m", *FAST, "dataset.sample_size=4", "retrieval.topk=3,5,10", f"cache.dir={tmp_path}/cache"]
    jobs = [Running(args, tmp_path) for _ in range(2)]  # a fresh folder: the first store creation races too
    assert [j.finish(600) for j in jobs] == [0, 0], "".join(jobs[0].err + jobs[1].err)[-3000:]
    runs = statuses(tmp_path)
    parents = [r for r in runs if r[0] == "sweep"]
    assert len(parents) == 2 and all(s == "FINISHED" for _, s, _ in runs)
    con = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    ids = [r[0] for r in con.execute("select run_uuid from tags where key='ragbench.role' and value='sweep'")]
    for parent in ids:
        children = con.execute("select count(*) from tags where key='mlflow.parentRunId' and value=?",
                               (parent,)).fetchone()[0]
        jobs_metric = con.execute("select value from latest_metrics where run_uuid=? and key='sweep/jobs'",
                                  (parent,)).fetchone()[0]
        assert children == 3 and jobs_metric == 3
    con.close()
    assert len(list((tmp_path / "multirun").glob("*/*"))) == 2  # two sweep folders, two parent-id files
    assert all("sweep: 3 jobs" in "".join(j.out) for j in jobs)


def test_resume_copies_a_finished_run_into_the_new_sweep_and_leaves_the_old_sweep_whole(tmp_path):
    base = ["-m", *FAST, "dataset.sample_size=2", f"cache.dir={tmp_path}/cache"]
    assert ragbench([*base, "retrieval.topk=3,5"], tmp_path).returncode == 0
    second = ragbench([*base, "retrieval.topk=5,10"], tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    exp = client.get_experiment_by_name("ragbench")
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    first_parent, second_parent = [r.info.run_id for r in runs if r.data.tags.get("ragbench.role") == "sweep"]
    kids = {p: [r for r in runs if r.data.tags.get("mlflow.parentRunId") == p] for p in (first_parent, second_parent)}
    assert len(kids[first_parent]) == 2 and len(kids[second_parent]) == 2  # the first sweep lost nothing
    [copy] = [r for r in kids[second_parent] if "ragbench.reused_from" in r.data.tags]
    [origin] = [r for r in kids[first_parent] if r.info.run_id == copy.data.tags["ragbench.reused_from"]]
    assert copy.info.run_name.startswith("topk=5 ") and copy.info.run_name.endswith(" #0")  # this sweep's label
    assert origin.info.run_name.endswith(" #1")
    assert copy.data.metrics == origin.data.metrics and copy.data.params == origin.data.params
    assert copy.info.status == "FINISHED"
    # the copy's cases are its origin's: the sweep's comparison report and verify read them from there
    from ragbench.compare.select import load_cases

    assert load_cases(client, copy).qids == load_cases(client, origin).qids
    assert "no cases.jsonl artifact" not in second.stderr + second.stdout


def _half_made_store(db: Path) -> None:
    """The store an interrupt leaves mid-migration: a schema version, and the next step's table already made."""
    import sqlalchemy
    from alembic import command
    from mlflow.store.db.utils import InitialBase, _get_alembic_config

    db.parent.mkdir(parents=True)
    engine = sqlalchemy.create_engine(f"sqlite:///{db}")
    InitialBase.metadata.create_all(engine)
    config = _get_alembic_config(str(engine.url))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "181f10493468")
        connection.exec_driver_sql("create table experiment_tags (key varchar(250), value varchar(5000), "
                                   "experiment_id integer)")
    engine.dispose()


def test_a_store_half_made_by_an_interrupt_is_rebuilt(tmp_path):
    db = tmp_path / "mlruns" / "mlflow.db"
    _half_made_store(db)
    from mlflow import MlflowClient

    shutil.copy(db, tmp_path / "copy.db")
    from sqlalchemy.exc import OperationalError

    with pytest.raises(OperationalError, match="already exists"):  # what MLflow alone does on every later run
        MlflowClient(f"sqlite:///{tmp_path}/copy.db").search_experiments()
    proc = ragbench([*FAST, "dataset.sample_size=2", f"cache.dir={tmp_path}/cache"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "left half-made by an interrupted first run" in proc.stderr
    assert [s for _, s, _ in statuses(tmp_path)] == ["FINISHED"]


def test_kill_9_during_the_first_store_creation_then_a_rerun_works(tmp_path):
    # no store template: MLflow migrates in place, seconds in which the kill lands
    job = Running([*FAST, "dataset.sample_size=2", f"cache.dir={tmp_path}/cache"], tmp_path,
                  env={"RAGBENCH_STORE_TEMPLATES": "off"})
    deadline = time.time() + 120
    while not list((tmp_path / "mlruns").glob(".mlflow.db.creating-*")):
        assert time.time() < deadline and job.proc.poll() is None, "".join(job.err)[-3000:]
        time.sleep(0.005)
    job.proc.kill()
    job.finish()
    assert not (tmp_path / "mlruns" / "mlflow.db").exists()  # never a half-made store in place
    proc = ragbench([*FAST, "dataset.sample_size=2", f"cache.dir={tmp_path}/cache"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [s for _, s, _ in statuses(tmp_path)] == ["FINISHED"]


def test_a_new_store_is_a_copy_of_the_migrated_template_and_works(tmp_path):
    from ragbench.tracking.store import _head, _schema_version

    templates = tmp_path / "templates"
    env = {"RAGBENCH_STORE_TEMPLATES": str(templates)}
    made = []
    for folder in ("first", "second"):  # the first migrates the template, the second only copies it
        (tmp_path / folder).mkdir()
        proc = ragbench([*FAST, "dataset.sample_size=2", f"cache.dir={tmp_path}/cache"], tmp_path / folder, env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert [s for _, s, _ in statuses(tmp_path / folder)] == ["FINISHED"]
        [template] = templates.glob("empty-*.db")
        made.append(template.stat().st_mtime_ns)
    assert made[0] == made[1]  # built once
    assert _schema_version(template) == (_head(), 0)  # the template stays empty
    schema = {}
    for db in (template, tmp_path / "first" / "mlruns" / "mlflow.db", tmp_path / "second" / "mlruns" / "mlflow.db"):
        con = sqlite3.connect(db)
        schema[db] = sorted(con.execute("select type, name, sql from sqlite_master").fetchall())
        con.close()
    assert len(set(map(tuple, schema.values()))) == 1


def _read_only_folder(tmp_path: Path) -> Path:
    if os.geteuid() == 0:  # root writes through permission bits; /proc is read-only for everyone
        return Path("/proc")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    return ro


@pytest.mark.parametrize("case", ["tracking_uri", "read_only_folder", "read_only_folder_sweep"])
def test_an_unwritable_place_is_one_line_naming_it_and_the_fix(tmp_path, case):
    cwd, args = tmp_path, [*FAST, "dataset.sample_size=2", f"cache.dir={tmp_path}/cache"]
    if case == "tracking_uri":
        (tmp_path / "a_file").write_text("")
        args.append(f"tracking.uri=sqlite:///{tmp_path}/a_file/mlflow.db")
        where = f"{tmp_path}/a_file"
    else:
        cwd = _read_only_folder(tmp_path)
        where = str(cwd)
        if case.endswith("sweep"):
            args = ["-m", *args]
    proc = ragbench(args, cwd, timeout=300)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    [line] = [ln for ln in proc.stderr.splitlines() if "cannot write to" in ln]
    assert where in line and "fix:" in line


def test_a_key_planted_everywhere_reaches_no_file_and_no_terminal(tmp_path):
    from tests.fixtures.llm_server import LLMServer

    keys = {"override": "sk-override-1f2e3d4c5b6a7788", "pasted": "sk-pasted-9a8b7c6d5e4f3322",
            "env": "sk-envvar-0a1b2c3d4e5f6677", "password": "pw-hunter-5566778899aa"}
    env = {"OPENAI_API_KEY": keys["env"]}
    common = [*FAST, "dataset.sample_size=2", f"cache.dir={tmp_path}/cache"]
    with LLMServer() as server:
        procs = [
            # the env key is really used against the server; the second job pastes a key into api_key_env
            ragbench(["-m", *common, "llm=openai_compatible", f"llm.api_base={server.url}",
                      f"llm.api_key_env=OPENAI_API_KEY,{keys['pasted']}"], tmp_path, env),
            ragbench(["-m", *common, f"+llm.api_key={keys['override']}", f"+judge.password={keys['password']}",
                      "retrieval.topk=3,5"], tmp_path, env),
            ragbench([*common, f"+llm.api_key={keys['override']}"], tmp_path, env),
            ragbench([*common, f"llm.api_key_env={keys['pasted']}"], tmp_path, env),  # Hydra's own error
            ragbench([*common, "llm=openai", f"llm.api_key_env={keys['pasted']}"], tmp_path, env),
        ]
        assert server.count > 0  # the first sweep's good job really called the server, with the env key
        assert any(keys["env"] in header for header in server.auth_headers)
    assert [p.returncode for p in procs] == [1, 1, 1, 1, 1]
    assert "llm.api_key_env must NAME an environment variable" in procs[4].stderr
    assert "llm.api_key puts a secret in the config" in procs[2].stderr
    produced = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "mlflow.db" for p in produced) and any(p.parent.name == ".hydra" for p in produced)
    assert any(p.name == "multirun.yaml" for p in produced) and any("llm" in p.parts for p in produced)
    for name, key in keys.items():
        hits = [str(p) for p in produced if key.encode() in p.read_bytes()]
        hits += [f"process {i} output" for i, p in enumerate(procs) if key in p.stdout + p.stderr]
        assert not hits, f"the {name} key leaked into {hits}"
