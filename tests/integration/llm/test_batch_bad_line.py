"""Issue 45.3 on a real job against the stand-in batch API (tests/fixtures/batch_server): one malformed line
in a batch's output fails only its own case (one line naming the fix, no traceback), and the same command
run again moves on: the batch is not resumed, the replies it brought come from the reply cache, and only
the failed request goes out again, in a new batch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.batch_server import BatchServer

QUESTIONS = 3


class CutServer(BatchServer):
    """Cuts short the output line of the first request of the first batch (a provider's truncated file)."""

    def _retrieve(self, batch_id: str) -> dict[str, Any] | None:
        batch = super()._retrieve(batch_id)
        if (
            batch is not None
            and batch_id == "batch_1"
            and batch["status"] == "completed"
            and not batch.get("cut")
        ):
            file_id = batch["output_file_id"]
            lines = self.files[file_id].decode().splitlines()
            self.cut_id = json.loads(lines[0])["custom_id"]
            lines[0] = lines[0][: len(lines[0]) // 2]
            self.files[file_id] = ("\n".join(lines) + "\n").encode()
            batch["cut"] = True
        return batch


@pytest.fixture()
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "none")
    with CutServer(polls_before_done=0) as s:
        yield s


def _job(server: BatchServer, tmp_path: Path) -> Any:
    from ragbench.build import build
    from ragbench.outcome import preflight
    from ragbench.pipeline import Pipeline
    from tests.fixtures.jobs import compose_cfg

    overrides = [
        "dataset=locomo",
        f"dataset.sample_size={QUESTIONS}",
        "retrieval=bm25",
        f"cache.dir={tmp_path / 'cache'}",
        "llm=openai_compatible",
        "llm.model=openai/gpt-4o-mini",
        f"llm.api_base={server.url}",
        "llm.batch=true",
        "llm.batch_poll_s=0.05",
        "judge=lexical",
    ]
    components, cache = build(compose_cfg(overrides, tmp_path))
    preflight(components)
    return Pipeline(components, cache=cache).run()


def test_a_bad_line_fails_its_case_alone_and_the_rerun_sends_that_request_in_a_new_batch(server, tmp_path):
    first = _job(server, tmp_path)
    failed = [c for c in first.cases if c.failed]
    assert len(failed) == 1 and sum(not c.failed for c in first.cases) == QUESTIONS - 1
    assert failed[0].error_type == "LLMResponseError" and "malformed result line" in failed[0].error
    assert "fix: rerun (the request is sent again in a new batch)" in failed[0].error
    assert server.submitted == 1
    again = _job(server, tmp_path)
    assert not any(c.failed for c in again.cases) and len(again.cases) == QUESTIONS
    assert server.submitted == 2  # a new batch, not the recorded one polled again
    second_input = server.files[server.batches["batch_2"]["input_file_id"]].decode().splitlines()
    assert [json.loads(line)["custom_id"] for line in second_input if line.strip()] == [server.cut_id]
