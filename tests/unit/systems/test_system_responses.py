"""``system=responses`` on the toy dataset: the bad-input table (each one named line, or a counted outcome)
and matched contexts feeding the same metrics as a native run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragbench import redact
from ragbench.cache.store import StageCache
from ragbench.components import Components
from ragbench.errors import ConfigError
from ragbench.ingest.hierarchical import HierarchicalChunker
from ragbench.judge.lexical import LexicalJudge
from ragbench.pipeline import Pipeline
from ragbench.systems.components import SystemExpander, SystemGenerator, SystemRetriever, system_metrics
from ragbench.systems.records import RecordError
from ragbench.systems.responses import ResponsesSource, read_responses
from tests.fixtures.toy import ToyAdapter

OK = {"qid": "q1", "answer": "Tom", "contexts": [{"id": "A1", "text": "Alice adopted a cat."}]}


def _write(tmp_path: Path, lines: list[Any]) -> Path:
    path = tmp_path / "out.jsonl"
    path.write_bytes(b"".join(line if isinstance(line, bytes) else (json.dumps(line) + "\n").encode() for line in lines))
    return path


@pytest.mark.parametrize(("line", "message"), [
    ({**OK, "answer": 3}, r"line 1: answer must be a string, got int"),
    ({**OK, "contexts": {"id": "A1"}}, r"line 1: contexts must be a list"),
    ({**OK, "contexts": [{"id": "A1", "text": "x", "score": "high"}]}, r"contexts\[0\]: score must be a finite number"),
    ({**OK, "contexts": [{"id": ["A1"], "text": "x"}]}, r"contexts\[0\]: id must be a string"),
    ({**OK, "contexts": [{"score": 1.0}]}, r"contexts\[0\]: a context needs an id or a text"),
    ({**OK, "contexts": [7]}, r"contexts\[0\]: a context must be an object"),
    ({**OK, "latency_ms": -1}, r"latency_ms must be a non-negative number"),
    ({**OK, "usage": {"prompt_tokens": 1.5}}, r"usage.prompt_tokens must be a non-negative integer"),
    ({"answer": "Tom", "contexts": []}, r"line 1: qid is missing"),
    ({"qid": "q1", "contexts": []}, r"line 1: field 'answer' is missing"),
    ({"qid": "q1", "answer": "Tom"}, r"line 1: field 'contexts' is missing"),
    (["q1", "Tom"], r"line 1: a record must be a JSON object"),
    (b"{not json\n", r"line 1: not JSON"),
    (b'{"qid": "q1", "answer": "caf\xe9", "contexts": []}\n', r"line 1: not UTF-8 \(byte 28\)"),
    (b'{"qid": "q1", "metadata": ' + b"[" * 100_000 + b"}\n",
     r"line 1: nested too deep \(more than 100 levels"),
])
def test_a_malformed_line_is_one_named_error(tmp_path: Path, line: Any, message: str) -> None:
    path = _write(tmp_path, [line])
    with pytest.raises(RecordError, match=message) as err:
        read_responses(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_a_100_mb_line_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    with path.open("wb") as fh:
        fh.write(b'{"qid": "q1", "answer": "' + b"x" * 100_000_000 + b'", "contexts": []}\n')
    with pytest.raises(RecordError, match=r"line 1: longer than system.max_record_chars=16,000,000 bytes"):
        read_responses(path)


def _components(source: ResponsesSource) -> Components:
    return Components(dataset=ToyAdapter(), chunker=HierarchicalChunker(), embedder=None,
                      retriever=SystemRetriever(source=source), topk=2, rerankers=[], candidates=0,
                      expander=SystemExpander(source=source), generator=SystemGenerator(source=source),
                      judges={"lexical": LexicalJudge()})


def test_missing_unknown_duplicate_and_empty_are_counted_outcomes(tmp_path: Path) -> None:
    path = _write(tmp_path, [
        OK,  # q1: matched by the dataset's own paragraph id (A1)
        {"qid": "q2", "answer": "", "contexts": [{"text": "held in Lisbon in May"}, {"text": "not in the corpus"}]},
        {"qid": "q2", "answer": "Lisbon", "contexts": []},  # q2 twice: its case fails
        {"qid": "zz", "answer": "?", "contexts": []},  # no such question
    ])  # q3: no record
    source = ResponsesSource(path=str(path))
    c = _components(source)
    result = Pipeline(c, cache=StageCache(mode="off")).run()
    by_qid = {case.query.qid: case for case in result.cases}
    assert by_qid["q1"].status == "ok" and by_qid["q1"].answer is not None and by_qid["q1"].answer.text == "Tom"
    assert by_qid["q1"].scores["answer/em"] == 1.0 and by_qid["q1"].scores["retrieval/hit_at_1"] == 1.0
    assert (by_qid["q2"].status, by_qid["q2"].error_type) == ("failed", "DuplicateResponseError")
    assert (by_qid["q3"].status, by_qid["q3"].error_type) == ("failed", "MissingResponseError")
    assert result.metrics["answer/em"] == pytest.approx(1 / 3)  # a failed case scores 0 end to end
    got = system_metrics(c.retriever)
    assert got == {"system/answered": 1.0, "system/contexts": 1.0, "system/contexts_matched_exact": 0.0,
                   "system/contexts_matched_id": 1.0, "system/contexts_matched_soft": 0.0,
                   "system/contexts_unmatched": 0.0, "system/duplicate_qids": 1.0, "system/empty_answers": 0.0,
                   "system/failed": 2.0, "system/missing": 1.0, "system/questions": 3.0, "system/unknown_qids": 1.0}


def test_unmatched_contexts_still_reach_the_generator_and_judges(tmp_path: Path) -> None:
    path = _write(tmp_path, [
        {"qid": "q1", "answer": "", "contexts": [{"text": "Nothing about cats."}, {"id": "a", "text": "Pets"}]},
        {"qid": "q2", "answer": "Lisbon", "contexts": [{"text": "A talk. The conference was held in Lisbon."},
                                                       {"text": "The conference was held in Lisbon in May"}]},
        {"qid": "q3", "answer": "", "contexts": [{"id": "A2"}]},
    ])
    c = _components(ResponsesSource(path=str(path)))
    result = Pipeline(c, cache=StageCache(mode="off")).run()
    q1, q2, q3 = result.cases
    assert [x.text for x in q1.contexts] == ["Nothing about cats.", "Pets"]  # unmatched first: text kept, no hit
    assert [h.chunk_id for h in q1.hits] == [q1.contexts[1].chunk_id] and q1.contexts[0].chunk_id.startswith("system:")
    assert q2.scores["answer/em"] == 1.0 and q3.contexts[0].text == "Bob bought a red bicycle last spring."
    got = system_metrics(c.retriever)
    # q1: "Nothing about cats." unmatched, "a" a document id; q2: soft (token coverage), exact; q3: the id A2
    assert (got["system/contexts_unmatched"], got["system/contexts_matched_id"], got["system/contexts_matched_soft"],
            got["system/contexts_matched_exact"], got["system/empty_answers"]) == (1.0, 2.0, 1.0, 1.0, 2.0)


def test_secrets_in_a_responses_file_are_masked_before_the_answers_cache(tmp_path: Path, monkeypatch) -> None:
    """A registered key and a secret-named assignment in an answer: masked as the file is read, so the
    answer scored, the stage cache (cache/answers) and every sink hold one masked text."""
    monkeypatch.setattr(redact, "_secrets", set())
    monkeypatch.setattr(redact, "_pattern", None)
    key = "sk-live-0123456789abcdef"
    redact.register(key)
    path = _write(tmp_path, [
        {**OK, "answer": f"Tom (asked with {key})", "metadata": {"api_key": "meta-secret-123456"}},
        {"qid": "q2", "answer": "Lisbon, password: opensesame99",
         "contexts": [{"text": f"held in Lisbon {key}"}]},
    ])
    records = read_responses(path).records
    assert records["q1"].answer == "Tom (asked with ***)" and records["q1"].metadata == {"api_key": "***"}
    assert records["q2"].answer == "Lisbon, password: ***" and key not in records["q2"].contexts[0].text
    cache = StageCache(dir=str(tmp_path / "c"))
    result = Pipeline(_components(ResponsesSource(path=str(path))), cache=cache).run()
    stored = [p.read_text(encoding="utf-8") for p in (tmp_path / "c" / "answers").rglob("*.json")]
    assert len(stored) == 2 and all(key not in t and "opensesame99" not in t and "***" in t for t in stored)
    assert {c.query.qid: c.answer.text for c in result.cases if c.answer} == {
        "q1": "Tom (asked with ***)", "q2": "Lisbon, password: ***"}


def test_contexts_that_match_nothing_warn_with_the_count_and_the_fix(tmp_path: Path, caplog) -> None:
    path = _write(tmp_path, [OK, {"qid": "q2", "answer": "Lisbon", "contexts": [{"text": "another corpus"}]},
                             {"qid": "q3", "answer": "", "contexts": [{"text": "nothing of the dataset"}]}])
    with caplog.at_level("WARNING", logger="ragbench.systems.components"):
        Pipeline(_components(ResponsesSource(path=str(path))), cache=StageCache(mode="off")).run()
    warned = [r.getMessage() for r in caplog.records if "match no chunk" in r.getMessage()]
    assert len(warned) == 1
    assert "system=responses: 2 of 3 contexts (67%) match no chunk of the dataset" in warned[0]
    assert "fix: give contexts the dataset's chunk, document or paragraph ids" in warned[0]
    assert all(len(line) <= 80 for line in warned[0].splitlines())


def test_ids_that_name_nothing_of_the_dataset_fail_the_job(tmp_path: Path) -> None:
    """Every context unmatched although each carries an id (another dataset's or chunking's ids): every
    retrieval metric would be 0, so the job fails with one line, not an empty result and rc 0."""
    lines = [{"qid": q, "answer": "x", "contexts": [{"id": f"other:{q}:{n}"} for n in range(3)]}
             for q in ("q1", "q2", "q3")]
    path = _write(tmp_path, lines)
    match = r"9 of 9 contexts match no chunk of the dataset \(ids like 'other:q1:0'\): every retrieval metric"
    with pytest.raises(ConfigError, match=match + " would be 0; fix: ") as err:
        Pipeline(_components(ResponsesSource(path=str(path))), cache=StageCache(mode="off")).run()
    assert "\n" not in str(err.value)


def test_text_only_contexts_that_all_match_nothing_only_warn(tmp_path: Path, caplog) -> None:
    path = _write(tmp_path, [{"qid": q, "answer": "Tom", "contexts": [{"text": "the system's own passage"}]}
                             for q in ("q1", "q2", "q3")])
    with caplog.at_level("WARNING", logger="ragbench.systems.components"):
        result = Pipeline(_components(ResponsesSource(path=str(path))), cache=StageCache(mode="off")).run()
    assert result.metrics["answer/em"] == pytest.approx(1 / 3)  # q1's answer still scored
    assert any("3 of 3 contexts (100%) match no chunk" in r.getMessage() for r in caplog.records)
