"""The stand-in server's own command line (``python -m tests.fixtures.llm_server``): out of the box it serves
replies `datasets generate` can use, and a taken port is one line naming the port and the fix."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from ragbench.datasets.evalgen.prompts import (
    Draft,
    Passage,
    load_generation_prompts,
    parse_draft,
    parse_scores,
)
from tests.fixtures.llm_server import main

REPO = Path(__file__).resolve().parents[2]
FERRY = Passage(chunk_id="ferry.md#s0.p0", title="Ferry handbook",
                text="The ferry leaves the north pier at 7:15 every weekday morning. It returns at 18:30.")


def test_a_taken_port_is_one_line_naming_it_and_the_fix(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"127.0.0.1:{port}" in err and "--port 0" in err


def _chat(url: str, messages: list[dict[str, str]]) -> str:
    body = json.dumps({"model": "fixture", "messages": messages}).encode()
    req = urllib.request.Request(f"{url}/chat/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 - the loopback server of this test
        return json.loads(resp.read())["choices"][0]["message"]["content"]


@pytest.fixture()
def served():
    proc = subprocess.Popen([sys.executable, "-m", "tests.fixtures.llm_server", "--port", "0"], cwd=REPO,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        found = re.search(r"(http://127\.0\.0\.1:\d+/v1)", proc.stderr.readline())
        assert found, "the server did not print its api_base"
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_command_line_serves_generation_critic_generator_and_judge_replies(served):
    prompts = load_generation_prompts("default")
    for qtype in prompts.types:  # every question type the shipped prompt asks for parses
        draft = parse_draft(_chat(served, prompts.generate(qtype, [FERRY, FERRY])), qtype)
        assert draft.question_type == qtype
        if qtype != "unanswerable":
            assert draft.quotes and all(q in FERRY.text for q in draft.quotes)
    draft = Draft(question="When does the ferry leave?", answer="7:15", quotes=("leaves the north pier",),
                  question_type="factual", difficulty="easy")
    assert parse_scores(_chat(served, prompts.critic(draft, [FERRY]))).groundedness == 5
    answer = _chat(served, [{"role": "user", "content": '<reference id="ref_1">The ferry leaves at 7:15.</reference>'
                                                        "\nQuestion: when?"}])
    assert answer.endswith("[ref_1]") and "7:15" in answer
    assert json.loads(_chat(served, [{"role": "user", "content": 'Reply {"score": 1-5}'}]))["score"] == 4
