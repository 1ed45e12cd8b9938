"""A job's waves (``ragbench.llm.wave``) and provider batches (``ragbench.llm.batch``) without litellm: the
requests the cases' steps wait for, one batch per flush, the replies fed back through
``LLMClient.complete`` (fresh usage, nothing booked twice, the reply cache written), no step run twice,
failures and budget stops per request, duplicates sent once, and the budget reserved before a batch is
submitted (a stand-in for litellm's batch calls)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from ragbench.budget import Budget
from ragbench.cache.keys import reply_key
from ragbench.cache.store import StageCache
from ragbench.errors import BudgetExhaustedError, ConfigError, LLMError
from ragbench.llm.batch import STAGE, BatchReply, BatchRunner
from ragbench.llm.client import LLMClient
from ragbench.llm.errors import LLMResponseError
from ragbench.llm.wave import Wave, job_wave
from ragbench.session import LEDGER
from ragbench.types import Usage


def _reply_of(body: dict[str, Any]) -> str:
    return "re: " + body["messages"][-1]["content"]


class FakeRunner:
    """Answers each body with ``_reply_of`` and a usage; records the batches it was given."""

    def __init__(self, sent: list[dict[str, dict[str, Any]]], broken: set[str] = frozenset(),
                 stopped: set[str] = frozenset()) -> None:
        self.sent, self.broken, self.stopped = sent, broken, stopped
        self.batch_id: str | None = None

    def run(self, bodies: dict[str, dict[str, Any]]) -> dict[str, BatchReply]:
        self.sent.append(dict(bodies))
        self.batch_id = f"batch_{len(self.sent)}"
        out = {}
        for cid, body in bodies.items():
            text = _reply_of(body)
            if text in self.broken:
                out[cid] = BatchReply(None, Usage(), "server_error", batch_id=self.batch_id)
            elif text in self.stopped:
                out[cid] = BatchReply(None, Usage(), "budget", stopped="budget.max_calls=1 reached")
            else:
                out[cid] = BatchReply(text, Usage(prompt_tokens=3, completion_tokens=2, cost_usd=0.5),
                                      batch_id=self.batch_id)
        return out


@pytest.fixture()
def client(tmp_path, monkeypatch):
    c = LLMClient(model="openai/m", api_base="http://127.0.0.1:9/v1", cache=StageCache(dir=str(tmp_path / "c")),
                  role="judge", batch=True)
    sent: list[dict[str, dict[str, Any]]] = []
    monkeypatch.setattr(c, "batch_runner", lambda **_: FakeRunner(sent, c.broken, c.stopped))
    c.sent, c.broken, c.stopped = sent, set(), set()  # type: ignore[attr-defined]
    return c


def _ask(c: LLMClient, text: str, **kw: Any) -> Any:
    return c.complete([{"role": "user", "content": text}], **kw)


def run_rounds(wave: Wave, case: Any, n: int, client: Any = None) -> list[Any]:
    """Runs cases ``0..n-1`` as one wave's steps, ``client`` served by the wave."""
    with wave.serving([client] if client is not None else []):
        return wave.run([lambda i=i: case(i) for i in range(n)])


def _case(c: LLMClient, i: int) -> tuple[str, list[str]]:
    """A case: an answer, then two verdicts on it gathered into one round (as the LLM judge does)."""
    answer = _ask(c, f"question {i}").text
    asks = [([{"role": "user", "content": f"judge {m} of {answer}"}], None, None) for m in ("a", "b")]
    c.gather(asks)
    return answer, [c.complete(m).text for m, _, _ in asks]


def test_one_batch_per_round_and_replies_fed_back_as_sent_requests(client):
    LEDGER.start_job(Budget(scope="job"))
    before = LEDGER.snapshot()
    rounds = Wave()
    runs: list[int] = []

    def case(i: int) -> tuple[str, list[str]]:
        runs.append(i)
        return _case(client, i)

    results = run_rounds(rounds, case, 3, client)
    assert sorted(runs) == [0, 1, 2]  # each case ran once: its steps waited for the batches, never re-ran
    assert results == [(f"re: question {i}", [f"re: judge {m} of re: question {i}" for m in "ab"]) for i in range(3)]
    assert [len(b) for b in client.sent] == [3, 6] and rounds.rounds == 2  # answers, then verdicts
    assert rounds.batch_ids == ["batch_1", "batch_2"]
    body = next(iter(client.sent[0].values()))
    assert set(body) == {"messages", "temperature"} and "model" not in body  # the runner adds the model
    # the runner books a batch (here a stand-in): feeding its replies spends nothing
    assert LEDGER.snapshot()["spent"] == before["spent"]
    outside = LLMClient(model="openai/m", api_base="http://127.0.0.1:9/v1", cache=client.cache.store, role="judge")
    reply = _ask(outside, "question 1")  # in the reply cache: a rerun sends nothing
    assert reply.text == "re: question 1" and reply.usage.cached and reply.usage.cost_usd == 0.5


def test_a_fed_reply_has_the_batch_usage_and_a_duplicate_is_served_like_a_cache_hit(client):
    LEDGER.start_job(Budget(scope="job"))
    saved = LEDGER.snapshot()["saved"].get("judge", {}).get("calls", 0)
    rounds = Wave()
    client.cache = None  # no reply cache: the duplicate must still be answered once, not sent again
    got = run_rounds(rounds, lambda i: _ask(client, "same question"), 2, client)
    assert [len(b) for b in client.sent] == [1]
    assert sorted((r.usage.cached, r.attempts) for r in got) == [(False, 1), (True, 0)]
    assert {r.usage.cost_usd for r in got} == {0.5}
    assert LEDGER.snapshot()["saved"]["judge"]["calls"] - saved == 1  # the second use: saved, not spent


def test_a_request_the_batch_failed_fails_its_case_and_one_past_the_budget_is_skipped(client):
    client.broken.add("re: q0")
    client.stopped.add("re: q1")
    outcomes: list[str] = []

    def case(i: int) -> str:
        try:
            return _ask(client, f"q{i}").text
        except (LLMResponseError, BudgetExhaustedError) as exc:
            outcomes.append(f"{i}:{type(exc).__name__}:{str(exc).count(chr(10))}")
            return "-"

    assert run_rounds(Wave(), case, 3, client) == ["-", "-", "re: q2"]
    assert sorted(outcomes) == ["0:LLMResponseError:0", "1:BudgetExhaustedError:0"]  # one line each
    assert len(client.sent) == 1  # neither is sent again in a later round


def test_a_chain_of_requests_waits_once_per_link_and_a_failed_flush_stops_the_wave(client):
    def case(i: int) -> str:  # a claim judge's chain: the second request depends on the first reply
        return _ask(client, _ask(client, f"claims {i}").text).text

    rounds = Wave()
    assert run_rounds(rounds, case, 2, client) == [f"re: re: claims {i}" for i in range(2)]
    assert [len(b) for b in client.sent] == [2, 2] and rounds.rounds == 2  # one batch per link

    def broken(**_: Any) -> Any:
        raise LLMError("batch of 1 requests: submission failed")

    client.batch_runner = broken
    with pytest.raises(LLMError, match="submission failed"):  # the waiting step ends, the wave's error goes up
        run_rounds(Wave(), lambda i: _ask(client, "new"), 1, client)


def test_providers_without_a_batch_api_are_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError) as info:
        LLMClient(model="ollama/llama3.1", role="llm", batch=True, cache=None)
    assert "\n" not in str(info.value) and "fix: set llm.batch=false" in str(info.value)
    gen = SimpleNamespace(client=LLMClient(model="openai/m", batch=True, cache=None))
    follower = SimpleNamespace(client=LLMClient(model="ollama/x", role="judge", cache=None))  # batch=None
    with pytest.raises(ConfigError, match=r"llm\.batch=true: judge\.model='ollama/x'.*fix: set llm\.batch=false"):
        job_wave(gen, [follower])
    assert job_wave(SimpleNamespace(client=LLMClient(model="openai/m", cache=None)), [follower]) is None
    assert job_wave(SimpleNamespace(), [SimpleNamespace()]) is None  # extractive answers, lexical judge
    assert isinstance(job_wave(gen, [SimpleNamespace(client=LLMClient(model="openai/j", role="judge",
                                                                       cache=None))]), Wave)


def test_outside_rounds_the_client_sends_at_once(client):
    assert client.wave is None
    client.gather([([{"role": "user", "content": "x"}], None, None)])  # nothing to defer into
    assert not client.sent


class FakeLib:
    """litellm's batch calls, answering every line; checks the budget was reserved before the upload."""

    class exceptions:  # noqa: N801 - litellm's attribute name
        ModelNotMappedError = KeyError

    def __init__(self) -> None:
        self.uploads: list[list[dict[str, Any]]] = []
        self.held_at_upload: list[int] = []

    def create_file(self, *, file: Any, purpose: str, **_: Any) -> Any:
        self.held_at_upload.append(LEDGER._held_calls)
        self.uploads.append([json.loads(line) for line in file.getvalue().decode().splitlines()])
        return SimpleNamespace(id=f"file-{len(self.uploads)}")

    def create_batch(self, **_: Any) -> Any:
        return SimpleNamespace(id=f"batch_{len(self.uploads)}")

    def retrieve_batch(self, *, batch_id: str, **_: Any) -> Any:
        return SimpleNamespace(status="completed", output_file_id=f"out-{batch_id}", error_file_id=None,
                               request_counts=SimpleNamespace(completed=1, total=1))

    def file_content(self, *, file_id: str, **_: Any) -> Any:
        lines = [{"custom_id": r["custom_id"], "response": {"status_code": 200, "body": {
            "choices": [{"message": {"content": "ok"}}], "usage": {"prompt_tokens": 10, "completion_tokens": 2}}}}
            for r in self.uploads[-1]]
        return SimpleNamespace(content="\n".join(json.dumps(x) for x in lines).encode())

    def get_model_info(self, model: str) -> dict[str, float]:
        return {"input_cost_per_token_batches": 0.01, "output_cost_per_token_batches": 0.1}


@pytest.fixture()
def lib(monkeypatch):
    fake = FakeLib()
    for user in ("ragbench.llm.batch", "ragbench.llm.client", "ragbench.llm.usage"):  # each binds loader.litellm
        monkeypatch.setattr(f"{user}.litellm", lambda: fake)
    return fake


def _bodies(n: int) -> dict[str, dict[str, Any]]:
    return {f"r{i}": {"messages": [{"role": "user", "content": f"q{i}"}]} for i in range(n)}


def test_the_budget_is_reserved_before_submission_and_requests_past_it_are_not_sent(lib, tmp_path):
    LEDGER.start_job(Budget(max_calls=2, scope="job"))
    before = LEDGER.snapshot()
    runner = BatchRunner(model="openai/m", store=StageCache(dir=str(tmp_path / "c")), poll_s=0.0)
    replies = runner.run(_bodies(3))
    assert lib.held_at_upload == [2] and [r["custom_id"] for r in lib.uploads[0]] == ["r0", "r1"]
    assert [replies[c].text for c in ("r0", "r1")] == ["ok", "ok"] and replies["r2"].stopped
    spent = LEDGER.snapshot()["spent"]["llm"]
    assert spent["calls"] - before["spent"].get("llm", {}).get("calls", 0) == 2
    assert spent["usd"] == pytest.approx(2 * (10 * 0.01 + 2 * 0.1))  # the batch price
    assert LEDGER._held_calls == 0


def test_a_recorded_batch_is_polled_not_submitted_and_booked_once(lib, tmp_path):
    LEDGER.start_job(Budget(scope="job"))
    store = StageCache(dir=str(tmp_path / "c"))
    first = BatchRunner(model="openai/m", store=store, poll_s=0.0)
    first.run(_bodies(2))
    assert list((tmp_path / "c" / STAGE).rglob("*.json")) and len(lib.uploads) == 1
    before = LEDGER.snapshot()["spent"]["llm"]["calls"]
    again = BatchRunner(model="openai/m", store=store, poll_s=0.0)
    assert again.run(_bodies(2))["r1"].text == "ok"
    assert again.resumed and again.batch_id == first.batch_id and len(lib.uploads) == 1
    assert LEDGER.snapshot()["spent"]["llm"]["calls"] - before == 2 and LEDGER._held_calls == 0


def test_reply_key_is_the_custom_id(client):
    rounds = Wave()
    request = client._request([{"role": "user", "content": "hello"}], None)
    run_rounds(rounds, lambda i: _ask(client, "hello"), 1, client)
    assert list(client.sent[0]) == [reply_key("chat", request)] and rounds.answered(reply_key("chat", request))


def test_a_large_wave_runs_in_slices_of_max_steps(client, monkeypatch):
    monkeypatch.setattr("ragbench.llm.wave.MAX_STEPS", 2)
    assert run_rounds(Wave(), lambda i: _ask(client, f"s{i}").text, 5, client) == [f"re: s{i}" for i in range(5)]
    assert [len(b) for b in client.sent] == [2, 2, 1]  # one batch per slice of MAX_STEPS steps
