"""A generation that keeps nothing is a failure naming the dominant drop reason and its fix, and `inspect` of an
empty evaluation set says it is empty (non-zero exit)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from ragbench.datasets.__main__ import main
from ragbench.datasets.evalgen.cli import no_samples
from ragbench.datasets.evalgen.dedup import Deduplicator
from ragbench.datasets.evalgen.journal import Journal, Outcome
from ragbench.datasets.evalgen.plan import Slot
from ragbench.datasets.evalgen.runner import LLM_ERROR, Settings, drop_fix, run


def _dropped(reasons: list[str]):
    def worker(slot: Slot) -> Outcome:
        reason = reasons[slot.index]
        if reason.startswith(f"{LLM_ERROR}:"):
            return Outcome(slot=slot.index, question_type="factual", status="dropped", reason=LLM_ERROR,
                           detail=reason.split(":", 1)[1])
        return Outcome(slot=slot.index, question_type="factual", status="dropped", reason=reason)
    return worker


@pytest.mark.parametrize("reasons,dominant,fix", [
    (["malformed_reply"] * 3 + ["quote_not_found"], "malformed_reply", "use a model that follows instructions"),
    ([f"{LLM_ERROR}:LLMReplyTooLargeError"] * 3 + ["malformed_reply"], f"{LLM_ERROR}:LLMReplyTooLargeError",
     "lower llm.max_tokens"),
    (["critic_low_groundedness", "critic_low_groundedness", "quote_too_short"], "critic_low_groundedness",
     "lower critic.threshold"),
    (["quote_not_found", "quote_outside_passages", "quote_not_found"], "quote_not_found", "copies text verbatim"),
], ids=["not-json", "too-large", "critic", "quotes"])
def test_zero_kept_names_the_dominant_drop_reason_and_its_fix(tmp_path, reasons, dominant, fix):
    slots = [Slot(index=i, question_type="factual", chunk_ids=("d#s0.p0",)) for i in range(len(reasons))]
    journal = Journal(tmp_path / "eval.json", {"x": 1})
    result = run(slots, _dropped(reasons), journal, Deduplicator(method="lexical", threshold=0.9),
                 Settings(n=len(reasons), max_concurrency=1))
    assert not result.kept
    line = no_samples(result.dropped(), tried=len(reasons), out=tmp_path / "eval.json")
    assert "\n" not in line and f"dropped as {dominant}" in line and fix in line.split("; fix: ", 1)[1]
    assert "raise max_attempts" not in line  # more attempts of the same unusable replies keep nothing either
    assert drop_fix(dominant) in line


def test_an_unknown_reason_still_has_a_fix():
    assert drop_fix(f"{LLM_ERROR}:NoSuchError") and drop_fix("something_new")
    assert drop_fix("critic_low_standalone") == drop_fix("critic_low_answerability")


@pytest.mark.parametrize("content", [[], {"metadata": {"counts": {"kept": 0}}, "samples": []}],
                         ids=["empty-array", "empty-samples"])
def test_inspect_of_an_empty_set_says_it_is_empty(tmp_path, capsys, content):
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(content), encoding="utf-8")
    assert main(["inspect", str(path)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "is empty" in err and str(path) in err and "fix:" in err


def test_a_counter_with_no_drops_still_reads():
    assert "raise max_attempts" in no_samples(Counter(), tried=0, out=Path("e.json"))
