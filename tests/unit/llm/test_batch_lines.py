"""Issue 45.3: a malformed line in a provider batch's output fails only its own request, and a rerun moves
on: the batch is not resumed again, the requests it answered come from the reply cache and the failed one
goes in a new batch (a stand-in for litellm's batch calls; no litellm)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from ragbench.budget import Budget
from ragbench.cache.store import StageCache
from ragbench.llm.batch import BatchRunner
from ragbench.llm.client import LLMClient
from ragbench.llm.errors import LLMResponseError
from ragbench.llm.wave import Wave
from ragbench.session import LEDGER


class Lib:
    """litellm's batch calls; the output line of a request whose prompt is in ``broken`` is cut short
    (``garbled``: a line that names no request at all)."""

    class exceptions:  # noqa: N801 - litellm's attribute name
        ModelNotMappedError = KeyError

    def __init__(self, broken: set[str], garbled: bool = False) -> None:
        self.broken, self.garbled = broken, garbled
        self.uploads: list[list[dict[str, Any]]] = []

    def create_file(self, *, file: Any, purpose: str, **_: Any) -> Any:
        self.uploads.append([json.loads(line) for line in file.getvalue().decode().splitlines()])
        return SimpleNamespace(id=f"file-{len(self.uploads)}")

    def create_batch(self, **_: Any) -> Any:
        return SimpleNamespace(id=f"batch_{len(self.uploads)}")

    def retrieve_batch(self, *, batch_id: str, **_: Any) -> Any:
        return SimpleNamespace(
            status="completed",
            output_file_id=f"out-{batch_id}",
            error_file_id=None,
            request_counts=SimpleNamespace(completed=1, total=1),
        )

    def file_content(self, *, file_id: str, **_: Any) -> Any:
        n = int(file_id.rsplit("_", 1)[1])
        lines = []
        for row in self.uploads[n - 1]:
            prompt = row["body"]["messages"][-1]["content"]
            line = json.dumps(
                {
                    "custom_id": row["custom_id"],
                    "response": {
                        "status_code": 200,
                        "body": {
                            "choices": [{"message": {"content": "re: " + prompt}}],
                            "usage": {"prompt_tokens": 4, "completion_tokens": 2},
                        },
                    },
                }
            )
            lines.append(line[:-20] if prompt in self.broken else line)
        if self.garbled:
            lines.append("{not json at all")
        return SimpleNamespace(content="\n".join(lines).encode())

    def get_model_info(self, model: str) -> dict[str, float]:
        return {"input_cost_per_token_batches": 0.0, "output_cost_per_token_batches": 0.0}


def _install(monkeypatch: pytest.MonkeyPatch, lib: Lib) -> Lib:
    for user in ("ragbench.llm.batch", "ragbench.llm.client", "ragbench.llm.usage"):  # each binds loader.litellm
        monkeypatch.setattr(f"{user}.litellm", lambda: lib)
    return lib


def _bodies(*prompts: str) -> dict[str, dict[str, Any]]:
    return {f"r{i}": {"messages": [{"role": "user", "content": p}]} for i, p in enumerate(prompts)}


def test_a_malformed_line_fails_only_its_request_and_the_batch_is_not_resumed(tmp_path, monkeypatch):
    LEDGER.start_job(Budget(scope="job"))
    lib = _install(monkeypatch, Lib({"b"}, garbled=True))
    store = StageCache(dir=str(tmp_path / "c"))
    replies = BatchRunner(model="openai/m", store=store, poll_s=0.0).run(_bodies("a", "b", "c"))
    assert [replies[c].text for c in ("r0", "r2")] == ["re: a", "re: c"]
    assert replies["r1"].text is None and "malformed result line" in str(replies["r1"].error)
    again = BatchRunner(model="openai/m", store=store, poll_s=0.0)
    again.run(_bodies("a", "b", "c"))
    assert not again.resumed and len(lib.uploads) == 2  # the same set is submitted anew, not polled forever


def test_a_job_fails_only_the_case_of_the_bad_line_and_its_rerun_sends_that_request_alone(
    tmp_path, monkeypatch
):
    LEDGER.start_job(Budget(scope="job"))
    lib = _install(monkeypatch, Lib({"q1"}))
    store = StageCache(dir=str(tmp_path / "c"))

    def job() -> list[str]:
        client = LLMClient(
            model="openai/m", api_base="http://127.0.0.1:9/v1", cache=store, batch=True, batch_poll_s=0.01
        )

        def case(i: int) -> str:
            try:
                return client.complete([{"role": "user", "content": f"q{i}"}]).text
            except LLMResponseError as exc:
                return "failed: " + str(exc)

        wave = Wave(sleep=lambda _: None)
        with wave.serving([client]):
            return wave.run([lambda i=i: case(i) for i in range(3)])

    first = job()
    assert first[0] == "re: q0" and first[2] == "re: q2"
    assert first[1].startswith("failed: ") and "malformed result line" in first[1]
    assert "fix: rerun (the request is sent again in a new batch)" in first[1]
    lib.broken.clear()  # the provider's output is whole this time
    assert job() == ["re: q0", "re: q1", "re: q2"]
    assert [[r["body"]["messages"][0]["content"] for r in up] for up in lib.uploads] == [
        ["q0", "q1", "q2"],
        ["q1"],
    ]
