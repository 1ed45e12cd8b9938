"""Outside RAG systems end to end (ragbench.systems): a native run exported as ``system=responses`` records
and read back reproduces every metric and passes ``verify``; the example RAG function runs as
``system=python``, its faults are counted cases, and a rerun resumes with no repeated call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragbench.export import main as export
from ragbench.verify import main as verify
from tests.fixtures.jobs import run_job

pytestmark = pytest.mark.slow
JOB = ["dataset=qasper", "dataset.sample_size=12", "retrieval.topk=3", "judge=lexical"]
NATIVE = ["retrieval=bm25", "llm=extractive"]  # not in a system= job: a group named on the command line wins
# what differs between any two runs of one configuration (timings, cache traffic), the system's own counters,
# and the native search's scope diagnostic (BM25 searched each paper alone; the system's search is its own)
VOLATILE = ("latency/", "cache/", "time/", "saved/", "ingest/", "llm/", "tokens/", "cost/", "system/", "throughput/",
            "retrieval/scope_corpus_fallbacks")


def test_responses_round_trip_reproduces_every_metric(tmp_path: Path) -> None:
    base = [*JOB, f"cache.dir={tmp_path}/cache"]
    native, _ = run_job([*base, *NATIVE], tmp_path)
    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    out = tmp_path / "out.jsonl"
    assert export([native.info.run_id, "--responses", str(out), "--tracking-uri", uri]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 12 and all(r["contexts"] and "answer" in r for r in records)

    # read back without the run's retrieval.topk: the file carries it (ragbench.exported)
    read_back = [k for k in base if not k.startswith("retrieval.topk=")]
    again, _ = run_job([*read_back, "system=responses", f"system.path={out}", "expander=parent"], tmp_path)
    assert again.data.params["retrieval.topk"] == "3"
    logged, read = native.data.metrics, again.data.metrics
    keys = sorted(k for k in logged if not k.startswith(VOLATILE))
    assert len(keys) > 50
    assert {k: read.get(k) for k in keys} == {k: logged[k] for k in keys}
    assert read["system/answered"] == 12 and read["system/contexts_matched_id"] == sum(len(r["contexts"]) for r in records)
    assert verify([again.info.run_id, "--tracking-uri", uri]) == 0


def test_a_sweep_over_system_params_asks_each_configuration_once_and_resumes(tmp_path: Path) -> None:
    """The README's example: the example RAG function swept over one of its parameters, in a subprocess."""
    from tests.test_sweeps import ragbench, runs

    sweep = ["-m", "dataset=qasper", "dataset.sample_size=6", "system=python", "system.target=examples.my_rag:answer",
             "system.params.top_k=1,2", f"cache.dir={tmp_path}/cache"]
    first = ragbench(sweep, tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    _, done = runs(tmp_path)
    jobs = [r for r in done if r.data.tags.get("ragbench.role") == "job"]
    assert sorted(r.data.params["system.params.top_k"] for r in jobs) == ["1", "2"]
    assert [r.data.metrics["llm/system_calls"] for r in jobs] == [6.0, 6.0]  # each question asked once per job
    assert all(r.data.metrics["system/contexts_matched_id"] == 6 * float(r.data.params["system.params.top_k"])
               for r in jobs)
    again = ragbench(sweep, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (again.stdout + again.stderr).count("not running it again") == 2  # both resumed, nothing asked
