"""The one key function: every record kind of the one store (stage entries, answers, verdicts, LLM replies)
is keyed by ``make_key``, and the keys stay what they are (a changed key silently recomputes every entry
and re-pays every LLM call)."""

from __future__ import annotations

from ragbench.cache import keys
from ragbench.cache.files import json_sha256
from ragbench.cache.store import SCHEMA, StageCache, make_key
from ragbench.types import Answer, Context, Level, Query

QUERY = Query(qid="q1", text="Where is 北京?", answers=("China",), question_type="factual")
CONTEXTS = (Context(chunk_id="c1", text="北京 is in China", title="t", level=Level.PARAGRAPH, hit_ids=("c1",)),)


def test_stage_keys_are_pinned():
    parts = {"stage": "answers", "question": "Wo ist 北京? café", "contexts": [["t", "x"]], "n": 1.5}
    assert make_key(parts) == "952da27c8875469290a1630ed1792b3d83e0e4dc7c7f93a65450029aee2b7f24"


def test_llm_reply_keys_are_pinned():
    """Changed once, when LLM replies became records of the one store (a one-time miss for query
    transforms and API embeddings; answers and verdicts keep their keys)."""
    request = {"model": "m", "messages": [{"role": "user", "content": "北京 café"}], "params": {"temperature": 0.0}}
    assert keys.reply_key("chat", request) == "3f06568ecf1a235993ebd7098d1f0bdcb518f4fe6e7cd7f6d0a87f7e4e022dd4"


def test_one_key_function_and_one_schema_for_every_record_kind():
    request = {"model": "m", "api_base": None, "messages": [{"role": "user", "content": "hi"}], "params": {}}
    answer = Answer(text="China", model="m")
    akey = keys.answer_key("gen", QUERY, CONTEXTS)
    built = {
        "answers": (akey, {"generator": "gen", "qid": "q1", "question": QUERY.text, "type": "factual",
                           "contexts": [["t", "北京 is in China"]]}),
        "verdicts": (keys.verdict_key("judge", akey, answer, QUERY),
                     {"judge": "judge", "answer": akey, "answer_text": "China", "gold": ["China"], "answerable": True}),
        "llm": (keys.reply_key("chat", request), {"kind": "chat", "request": request}),
        "retrieval": (keys.retrieval_key("fp", ["q"], 10),
                      {"index": "fp", "queries": keys.texts_digest(["q"]), "k": 10,
                       "libraries": keys.library_versions()}),
    }
    for stage, (key, parts) in built.items():
        assert key == make_key({"stage": stage, **parts}), stage
        assert key == json_sha256({"schema": SCHEMA, "stage": stage, **parts}, ascii=True), stage


def test_llm_replies_are_records_of_the_same_store(tmp_path):
    store = StageCache(dir=str(tmp_path))
    key = keys.reply_key("chat", {"model": "m"})
    store.put_record("llm", key, {"kind": "chat"}, {"text": "Paris"})
    assert (tmp_path / "llm" / key[:2] / f"{key}.json").is_file()  # the layout of answers and verdicts
    assert store.get_record("llm", key) == {"text": "Paris"}
    assert store.counters() == {"cache/llm/hits": 1.0, "cache/llm/misses": 0.0}


def test_content_hash_survives_a_json_round_trip():
    import json

    value = {"text": "北京 [1]", "scores": [0.1, 1e-300, 2.5], "nested": {"b": 1, "a": None}, "t": (1, 2)}
    assert json_sha256(json.loads(json.dumps(value))) == json_sha256(value)
