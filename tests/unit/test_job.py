"""``ragbench.job.Job``: every way out of a job ends its run with one status, once, writes the record's end,
and answers the caller (objective, or the exception on its way up: ``__main__`` maps it to an exit code).
The real store and subprocess paths (SIGTERM, kill -9, resume) are in tests/test_lifecycle.py and
tests/integration."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import signal
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from omegaconf import OmegaConf

from ragbench import job as job_module
from ragbench.errors import ConfigError, JobStopped, Reported
from ragbench.interrupts import Interrupted
from ragbench.job import Job
from ragbench.judge.lexical import LexicalJudge
from ragbench.record import RUN_FILE, STORED_FILE, RunRecord, folder_files
from ragbench.tracking.mlflow_sink import FOLDER_TAG, mlflow_tags
from ragbench.tracking.run_tags import component_params, component_tags
from tests.fixtures import record_runs


class RecordingTracker:
    """Records what a job writes, in memory (the MlflowTracker methods JobRun calls)."""

    def __init__(self) -> None:
        self.params: dict[str, Any] = {}
        self.tags: dict[str, Any] = {}
        self.metrics: dict[str, float] = {}
        self.ended: list[tuple[str, str]] = []
        self.started: list[dict[str, Any]] = []

    def close_stale_runs(self) -> list[str]:
        return []

    def finished_runs_of(self, job_hash: str) -> list[Any]:
        return []

    def runs_with_tag(self, key: str, value: str) -> list[Any]:  # no concurrent sweep (ragbench.tracking.claims)
        return []

    def start_run(self, *, run_name: str, tags: Mapping[str, str], parent_run_id: str | None = None) -> str:
        self.started.append({"name": run_name, "parent": parent_run_id, **tags})
        return "run-1"

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        self.params.update(params)

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        self.tags.update(tags)

    def log_metrics(self, run_id: str, metrics: Mapping[str, float]) -> None:
        self.metrics.update(metrics)

    @contextlib.contextmanager
    def batched(self, run_id: str) -> Iterator[None]:
        yield

    def end_run(self, run_id: str, status: str) -> None:
        self.ended.append((run_id, status))

    def log_curves(self, run_id: str, curves: Mapping[str, Any]) -> None:
        pass

    uri = "sqlite:///mlruns/mlflow.db"

    def log_folder(self, run_id: str, folder: Any) -> None:
        self.artifacts = {p.name: p.read_bytes() for p in folder.iterdir()}
        self.files = sorted(self.artifacts)

    def stored_files(self, run_id: str) -> tuple[str, dict[str, int]]:
        return f"mem://{run_id}", {name: len(data) for name, data in self.artifacts.items()}

    def log_table(self, run_id: str, rows: Any, name: str) -> None:
        self.table = list(rows)

    def log_files(self, run_id: str, files: Mapping[str, str]) -> None:
        pass

    def log_dataset(self, run_id: str, **kwargs: Any) -> None:
        pass


COMPONENTS = SimpleNamespace(generator=None, embedder=None, routes={}, judges={"lexical": LexicalJudge()})
CFG = OmegaConf.create({"objective": "answer/f1", "resume": True, "stages": "all", "dataset": {"name": "d"}})


def _raise(exc: BaseException):
    def work(job: Job, components: Any) -> Mapping[str, float]:
        raise exc
    return work


def _finish(job: Job, components: Any) -> Mapping[str, float]:
    job.scored = True  # the results in the record, as Job.finished puts them: the objective reads them there
    job.record = dataclasses.replace(job.record, metrics={"answer/f1": 0.75})
    job.tracker.log_metrics(str(job.run_id), job.record.metrics)  # and in its run (log_results)
    return {"answer/f1": 0.5}  # what work returns is not the objective


# exit path -> (work, run status, in a sweep: objective or exception; alone: the exception on its way up)
PATHS = {
    "success": (_finish, "FINISHED", 0.75, 0.75),
    "budget stopped": (_raise(JobStopped("stopped by budget: max_calls")), "KILLED", "nan", JobStopped),
    "RagbenchError": (_raise(ConfigError("retrieval.topk=0: must be >= 1")), "FAILED", "nan", ConfigError),
    "bug": (_raise(RuntimeError("boom")), "FAILED", "nan", RuntimeError),
    "Ctrl-C": (_raise(KeyboardInterrupt()), "KILLED", KeyboardInterrupt, KeyboardInterrupt),
    "SIGTERM": (_raise(Interrupted(signal.SIGTERM)), "KILLED", Interrupted, Interrupted),
}


@pytest.fixture(autouse=True)
def _no_git(monkeypatch):
    monkeypatch.setattr(job_module, "job_hash", lambda resolved: "h" * 16)
    monkeypatch.setattr("ragbench.job.start_tags", lambda cfg, components: {"ragbench.stages": "all"})


def _job(tmp_path, cfg=CFG, *, multirun: bool) -> Job:
    return Job(cfg, RecordingTracker(), name="#0 x", parent="p" if multirun else None, multirun=multirun,  # type: ignore[arg-type]
               folder=tmp_path / "record")


@pytest.mark.parametrize("multirun", [True, False], ids=["sweep", "alone"])
@pytest.mark.parametrize("path", list(PATHS))
def test_every_exit_path_ends_the_run_once_with_its_status(tmp_path, path, multirun):
    work, status, in_sweep, alone = PATHS[path]
    job = _job(tmp_path, multirun=multirun)
    tracker: Any = job.tracker
    expected = in_sweep if multirun else alone
    if isinstance(expected, type):
        with pytest.raises(expected):
            job.run(work, COMPONENTS)  # type: ignore[arg-type]
    else:
        got = job.run(work, COMPONENTS)  # type: ignore[arg-type]
        assert got == expected or (expected == "nan" and got is not None and math.isnan(got))
    assert tracker.ended == [("run-1", status)]
    assert tracker.params["dataset.name"] == "d"  # the config is logged on every path
    failed = path in ("RagbenchError", "bug")
    assert ("ragbench.error" in tracker.tags) == failed
    # a job that failed before scoring logs 0 for its answer scores (RagbenchError only: a bug has no figures)
    assert (tracker.metrics.get("answer/f1") == 0.0) == (path == "RagbenchError")
    # the record's end is in its file and was logged, whatever the way out
    record = _record(tmp_path, tracker)
    assert record.status == status and record.job_hash == "h" * 16 and record.config["dataset"]["name"] == "d"
    assert tracker.files == ["cases.jsonl", "run.json"]
    assert sorted(p.name for p in (tmp_path / "record").iterdir()) == [STORED_FILE]  # stored once: a pointer


def _record(tmp_path, tracker: Any) -> RunRecord:
    """The job's record, read from its output folder (a pointer to the artifacts the tracker holds)."""
    files = folder_files(tmp_path / "record", lambda pointer, name: tracker.artifacts[name])
    return RunRecord.from_json(files[RUN_FILE])


def _logged_tags(tracker: Any) -> dict[str, Any]:
    """Every tag the job gave its run: at its creation, then set (not MLflow's bookkeeping: where the record
    folder is, as the owner tag, ragbench.tracking.mlflow_sink)."""
    return {**{k: v for k, v in tracker.started[0].items() if k not in ("name", "parent", FOLDER_TAG)},
            **tracker.tags}


@pytest.mark.parametrize("path", list(PATHS))
def test_the_record_holds_every_tag_and_score_its_run_gets(tmp_path, path):
    """Issue 38.2: the start tags, the error tag and a failed job's zero scores were MLflow's only."""
    job = _job(tmp_path, multirun=True)
    tracker: Any = job.tracker
    with contextlib.suppress(BaseException):
        job.run(PATHS[path][0], COMPONENTS)  # type: ignore[arg-type]
    record = _record(tmp_path, tracker)
    assert _logged_tags(tracker) == mlflow_tags(record)
    assert {"ragbench.role", "ragbench.overrides", "ragbench.job_hash", "ragbench.stages"} <= set(record.tags)
    assert tracker.metrics == dict(record.metrics)
    assert (record.metrics.get("answer/f1") == 0.0) == (path == "RagbenchError")
    assert ("ragbench.error" in record.tags) == (path in ("RagbenchError", "bug"))


def test_a_build_error_in_a_sweep_is_a_failed_run_with_its_config_and_no_scores(tmp_path):
    job = _job(tmp_path, multirun=True)
    tracker: Any = job.tracker
    got = job.run(_finish, ConfigError("retrieval.topk=0: must be >= 1"))
    assert got is not None and math.isnan(got)
    assert tracker.ended == [("run-1", "FAILED")]
    assert tracker.tags["ragbench.error"].startswith("[RB-CONFIG-001] ConfigError: retrieval.topk=0")
    assert tracker.params["dataset.name"] == "d" and not tracker.metrics


def test_a_wrong_objective_name_is_one_line_and_keeps_the_finished_run(tmp_path):
    cfg = OmegaConf.merge(CFG, {"objective": "answer/nope"})
    job = _job(tmp_path, cfg, multirun=False)
    tracker: Any = job.tracker
    with pytest.raises(ConfigError):
        job.run(_finish, COMPONENTS)  # type: ignore[arg-type]
    assert tracker.ended == [("run-1", "FINISHED")]
    assert "objective='answer/nope'" in tracker.tags["ragbench.error"]
    record = _record(tmp_path, tracker)  # the record says it too, its figures standing
    assert record.status == "FINISHED" and record.tags["ragbench.error"] == tracker.tags["ragbench.error"]


def test_an_interrupt_exit_code_is_128_plus_the_signal(monkeypatch, capsys):
    import ragbench.__main__ as entry

    handlers: list[Any] = []
    monkeypatch.setattr(signal, "signal", lambda sig, handler: handlers.append((sig, handler)))
    assert entry.interrupted(Interrupted(signal.SIGTERM)) == 143
    assert entry.interrupted(KeyboardInterrupt()) == 130
    assert {h for _, h in handlers} == {signal.SIG_IGN}  # a second signal cannot cut the closing short
    assert capsys.readouterr().err.count(entry.INTERRUPTED) == 2


def test_a_store_that_cannot_open_is_one_line_and_ends_a_sweep(tmp_path, caplog):
    job = _job(tmp_path, multirun=True)

    def broken() -> list[Any]:
        raise ConfigError("cannot write to /ro/mlflow.db; fix: point tracking.uri at a writable folder")

    job.tracker.finished_runs_of = lambda job_hash: broken()  # type: ignore[method-assign]
    with pytest.raises(Reported) as raised:
        job.run(_finish, COMPONENTS)  # type: ignore[arg-type]
    assert raised.value.code == 1 and "cannot write to /ro/mlflow.db" in caplog.text


def test_logged_params_and_tags_come_from_the_components_that_declare_them():
    from ragbench.generate.llm import LLMGenerator
    from ragbench.judge.llm import LLMJudge
    from ragbench.protocols import LoggedParams, LoggedTags

    assert issubclass(LLMGenerator, LoggedParams) and not issubclass(LLMGenerator, LoggedTags)
    assert issubclass(LLMJudge, LoggedParams) and issubclass(LLMJudge, LoggedTags)
    assert not issubclass(LexicalJudge, LoggedParams | LoggedTags)

    class Generator:
        def log_params(self) -> dict[str, str]:
            return {"llm/prompt_hash": "abc"}

    class Judge:
        def log_params(self) -> dict[str, str]:
            return {"judge/rubrics_hash": "def"}

        def log_tags(self) -> dict[str, object]:
            return {"judge.same_model": False}

    class OldStyle:  # the former duck-typed names are no capability
        def params(self) -> dict[str, str]:
            return {"x": "y"}

    comps = SimpleNamespace(generator=Generator(), judges={"a": Judge(), "b": OldStyle(), "c": LexicalJudge()})
    assert component_params(comps) == {"llm/prompt_hash": "abc", "judge/rubrics_hash": "def"}  # type: ignore[arg-type]
    assert component_tags(comps) == {"judge.same_model": "False"}  # type: ignore[arg-type]



def test_the_job_life_reads_top_to_bottom_in_one_short_module():
    """Issue 28: start, resume, record and every way out in one module a newcomer reads in one sitting."""
    from pathlib import Path

    assert len(Path(job_module.__file__).read_text().splitlines()) <= 200


class ResumingTracker(RecordingTracker):
    """A store holding one FINISHED run of the job (``old``), its record with ``tags`` (a ``stages=encode``
    run: its shard's key) and ``metrics``, kept under ``root`` (``tests.fixtures.record_runs``)."""

    def __init__(self, tags: Mapping[str, str], root: Path,
                 metrics: Mapping[str, float] | None = None) -> None:
        super().__init__()
        self.done = record_runs.run("old", tags=tags)
        self.client = record_runs.RecordClient(root)
        self.client.put("old", record_runs.record(tags=dict(tags), metrics=metrics, job_hash="h" * 16))
        self.copies: list[str] = []

    def finished_runs_of(self, job_hash: str) -> list[Any]:
        return [self.done]

    def copy_run(self, source: Any, **kwargs: Any) -> str:
        self.copies.append(source.info.run_id)
        return "copy"


ENCODED = {"ragbench.stages": "encode", "ragbench.cache_key.index_shard": "k" * 16}


@pytest.mark.parametrize(("tags", "in_cache", "reused"), [
    (ENCODED, True, True),  # its shard is in this cache.dir: finished
    (ENCODED, False, False),  # encoded into another cache.dir (or pruned): not in this one, so it runs
    ({"ragbench.stages": "all"}, False, True),  # a scored job: its results are in MLflow, whatever the cache
], ids=["shard-here", "shard-elsewhere", "scored-job"])
def test_resume_follows_the_cache_for_an_encode_job(tmp_path, caplog, tags, in_cache, reused):
    """Issue 45.8b: rerunning a shard-encode sweep with a new cache.dir skipped every job as finished,
    wrote no shard, and the search job then encoded the whole corpus with no word."""
    cache = tmp_path / "cache"
    if in_cache:
        (cache / "index_shard" / ("k" * 16)).mkdir(parents=True)
        (cache / "index_shard" / ("k" * 16) / "manifest.json").write_text("{}")
    cfg = OmegaConf.merge(CFG, {"objective": None, "cache": {"dir": str(cache)}})
    tracker = ResumingTracker(tags, tmp_path / "artifacts")
    job = Job(cfg, tracker, name="#0 x", parent="p", multirun=True,  # type: ignore[arg-type]
              folder=tmp_path / "record")
    with caplog.at_level("INFO"):
        job.run(_finish, COMPONENTS)  # type: ignore[arg-type]
    assert tracker.copies == (["old"] if reused else [])
    assert tracker.ended == ([] if reused else [("run-1", "FINISHED")])  # not reused: it ran, in its own run
    assert ("its index shard is not in the cache at" in caplog.text) == (not reused)
