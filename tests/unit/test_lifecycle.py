"""``ragbench.lifecycle.JobRun``: every way out of a job ends its run with one status, once, and answers the
caller (objective, exit code, or the exception on its way up). The real store and subprocess paths (SIGTERM,
kill -9, resume) are in tests/test_lifecycle.py and tests/integration."""

from __future__ import annotations

import contextlib
import math
import signal
from collections.abc import Iterator, Mapping
from types import SimpleNamespace
from typing import Any

import pytest
from omegaconf import OmegaConf

from ragbench import lifecycle
from ragbench.errors import ConfigError
from ragbench.judge.lexical import LexicalJudge
from ragbench.lifecycle import Interrupted, JobRun, JobStopped


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

    def runs_with_tag(self, key: str, value: str) -> list[Any]:
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


COMPONENTS = SimpleNamespace(generator=None, embedder=None, routes={}, judges={"lexical": LexicalJudge()})
CFG = OmegaConf.create({"objective": "answer/f1", "resume": True, "stages": "all", "dataset": {"name": "d"}})


def _raise(exc: BaseException):
    def work(job: JobRun, components: Any) -> Mapping[str, float]:
        raise exc
    return work


def _finish(job: JobRun, components: Any) -> Mapping[str, float]:
    job.scored = True
    return {"answer/f1": 0.75}


# exit path -> (work, run status, in a sweep: objective or exception; alone: exception or exit code)
PATHS = {
    "success": (_finish, "FINISHED", 0.75, 0.75),
    "budget stopped": (_raise(JobStopped("stopped by budget: max_calls")), "KILLED", "nan", SystemExit),
    "RagbenchError": (_raise(ConfigError("retrieval.topk=0: must be >= 1")), "FAILED", "nan", SystemExit),
    "bug": (_raise(RuntimeError("boom")), "FAILED", "nan", RuntimeError),
    "Ctrl-C": (_raise(KeyboardInterrupt()), "KILLED", KeyboardInterrupt, KeyboardInterrupt),
    "SIGTERM": (_raise(Interrupted(signal.SIGTERM)), "KILLED", Interrupted, Interrupted),
}


@pytest.fixture(autouse=True)
def _no_git(monkeypatch):
    monkeypatch.setattr(lifecycle, "job_hash", lambda resolved: "h" * 16)
    monkeypatch.setattr(lifecycle, "start_tags", lambda cfg, components: {"ragbench.stages": "all"})


@pytest.mark.parametrize("multirun", [True, False], ids=["sweep", "alone"])
@pytest.mark.parametrize("path", list(PATHS))
def test_every_exit_path_ends_the_run_once_with_its_status(path, multirun):
    work, status, in_sweep, alone = PATHS[path]
    tracker = RecordingTracker()
    job = JobRun(CFG, tracker, name="#0 x", parent="p" if multirun else None, multirun=multirun)  # type: ignore[arg-type]
    expected = in_sweep if multirun else alone
    if isinstance(expected, type):
        with pytest.raises(expected) as raised:
            job.run(work, COMPONENTS)  # type: ignore[arg-type]
        if expected is SystemExit:
            assert raised.value.code == 1
    else:
        got = job.run(work, COMPONENTS)  # type: ignore[arg-type]
        assert got == expected or (expected == "nan" and got is not None and math.isnan(got))
    assert tracker.ended == [("run-1", status)]
    assert tracker.params["dataset.name"] == "d"  # the config is logged on every path
    failed = path in ("RagbenchError", "bug")
    assert ("ragbench.error" in tracker.tags) == failed
    # a job that failed before scoring logs 0 for its answer scores (RagbenchError only: a bug has no figures)
    assert (tracker.metrics.get("answer/f1") == 0.0) == (path == "RagbenchError")


def test_a_build_error_in_a_sweep_is_a_failed_run_with_its_config_and_no_scores():
    tracker = RecordingTracker()
    job = JobRun(CFG, tracker, name="#1 x", parent="p", multirun=True)  # type: ignore[arg-type]
    got = job.run(_finish, ConfigError("retrieval.topk=0: must be >= 1"))
    assert got is not None and math.isnan(got)
    assert tracker.ended == [("run-1", "FAILED")]
    assert tracker.tags["ragbench.error"].startswith("ConfigError: retrieval.topk=0")
    assert tracker.params["dataset.name"] == "d" and not tracker.metrics


def test_a_wrong_objective_name_is_one_line_and_keeps_the_finished_run():
    cfg = OmegaConf.merge(CFG, {"objective": "answer/nope"})
    tracker = RecordingTracker()
    job = JobRun(cfg, tracker, name="x", parent=None, multirun=False)  # type: ignore[arg-type]
    with pytest.raises(SystemExit):
        job.run(_finish, COMPONENTS)  # type: ignore[arg-type]
    assert tracker.ended == [("run-1", "FINISHED")]
    assert "objective='answer/nope'" in tracker.tags["ragbench.error"]


def test_an_interrupt_exit_code_is_128_plus_the_signal(monkeypatch, capsys):
    handlers: list[Any] = []
    monkeypatch.setattr(signal, "signal", lambda sig, handler: handlers.append((sig, handler)))
    assert lifecycle.interrupted(Interrupted(signal.SIGTERM)) == 143
    assert lifecycle.interrupted(KeyboardInterrupt()) == 130
    assert {h for _, h in handlers} == {signal.SIG_IGN}  # a second signal cannot cut the closing short
    assert capsys.readouterr().err.count(lifecycle.INTERRUPTED) == 2


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
    assert lifecycle.component_params(comps) == {"llm/prompt_hash": "abc", "judge/rubrics_hash": "def"}  # type: ignore[arg-type]
    assert lifecycle.component_tags(comps) == {"judge.same_model": "False"}  # type: ignore[arg-type]

