"""A job's identity (resume): its resolved config, the code version and the content of its input files."""

from __future__ import annotations

from ragbench import identity


def test_a_rewritten_input_file_is_another_job(tmp_path, monkeypatch):
    """Resume goes by content: recorded answers or a ranking rewritten at the same path run again."""
    monkeypatch.setattr("ragbench.identity.git_commit", lambda: "c0ffee")
    responses = tmp_path / "out.jsonl"
    responses.write_text('{"qid": "1", "answer": "a", "contexts": []}\n')
    resolved = {"dataset": {"name": "qasper"}, "system": {"path": str(responses)}, "retrieval": {"path": None}}
    first = identity.job_hash(resolved)
    assert identity.job_hash(resolved) == first
    responses.write_text('{"qid": "1", "answer": "b", "contexts": []}\n')
    assert identity.job_hash(resolved) != first
    assert identity.input_fingerprints({"system": {"path": str(tmp_path / "absent.jsonl")}}) == {}
    assert list(identity.input_fingerprints(resolved)) == ["system.path"]
