"""The one secret-masking rule (ragbench/redact.py) and the process-liveness test behind stale-run closing."""

from __future__ import annotations

import io
import logging

import pytest

from ragbench import redact
from ragbench.errors import ConfigError

KEY = "sk-unit-test-5e6f7a8b9c0d"


@pytest.fixture(autouse=True)
def _own_registry(monkeypatch):
    """Each test registers into its own set, so no secret leaks into other tests' redaction."""
    monkeypatch.setattr(redact, "_secrets", set())
    monkeypatch.setattr(redact, "_pattern", None)


@pytest.mark.parametrize(("text", "expected"), [
    ("#1 +llm.api_key=sk-abc123,retrieval.topk=5", "#1 +llm.api_key=***,retrieval.topk=5"),
    ("llm:\n  api_key: sk-abc\n  api_key_env: OPENAI_API_KEY", "llm:\n  api_key: ***\n  api_key_env: OPENAI_API_KEY"),
    ('{"api_key": "sk-x", "n": 1}', '{"api_key": "***", "n": 1}'),  # JSON stays JSON
    ("- +judge.password=[a,b]", "- +judge.password=***"),
    ("HF_TOKEN=hf_abcdef rest", "HF_TOKEN=*** rest"),
    ("max_tokens: 256 tokens=3", "max_tokens: 256 tokens=3"),  # counts are not secrets
    ("api_key_env: OPENAI_API_KEY", "api_key_env: OPENAI_API_KEY"),  # a variable name is kept
    ("export OPENAI_API_KEY=<your key>", "export OPENAI_API_KEY=<your key>"),  # a placeholder is kept
    ('"api_key": null', '"api_key": null'),
    ("api_key=${oc.env:KEY}", "api_key=${oc.env:KEY}"),
])
def test_assignments_named_like_a_secret_are_masked(text, expected):
    assert redact.redact(text) == expected


def test_registered_values_are_masked_anywhere_longest_first():
    redact.register(KEY)
    redact.register(KEY[:10])
    assert redact.redact(f"reply: the key is {KEY}.") == "reply: the key is ***."
    assert redact.redact(f"llm.api_key_env={KEY},x") == "llm.api_key_env=***,x"
    redact.register("abc")  # too short to mask in free text (the key rule still masks it)
    assert redact.redact("abc") == "abc"


def test_environment_values_named_like_secrets_are_registered():
    redact.register_environment({"MY_SERVICE_TOKEN": "tok-env-123456789", "HOME": "/home/someone-long",
                                 "OPENAI_API_KEY": "none"})
    assert redact.redact("x tok-env-123456789 /home/someone-long none") == "x *** /home/someone-long none"


def test_overrides_register_each_sweep_value_and_pasted_env_names():
    redact.register_overrides(["+llm.api_key=sk-sweep-aaaa1111,sk-sweep-bbbb2222",
                               "llm.api_key_env=OPENAI_API_KEY,sk-pasted-cccc3333", "retrieval.topk=3,5"])
    text = "sk-sweep-aaaa1111 sk-sweep-bbbb2222 sk-pasted-cccc3333 OPENAI_API_KEY 3,5"
    assert redact.redact(text) == "*** *** *** OPENAI_API_KEY 3,5"


@pytest.mark.parametrize(("config", "message"), [
    ({"llm": {"api_key_env": "sk-pasted-dddd4444"}}, "llm.api_key_env must NAME an environment variable"),
    ({"judge": {"judges": {"llm": {"api_key_env": "has space"}}}}, "judge.judges.llm.api_key_env must NAME"),
    ({"llm": {"api_key": "sk-config-eeee5555"}}, "llm.api_key puts a secret in the config"),
    ({"embedder": {"token": "hf_ffff6666"}}, "embedder.token puts a secret in the config"),
])
def test_a_key_in_the_config_is_refused_without_echoing_it(config, message):
    with pytest.raises(ConfigError) as exc:
        redact.check_config(config)
    text = str(exc.value)
    assert message in text and "fix:" in text
    secret = {"sk-pasted-dddd4444", "has space", "sk-config-eeee5555", "hf_ffff6666"} & set(str(config).split("'"))
    assert secret and all(s not in text and redact.redact(s) == "***" for s in secret)


@pytest.mark.parametrize("config", [
    {"llm": {"api_key_env": "OPENAI_API_KEY"}}, {"llm": {"api_key_env": None}},
    {"judge": {"judges": {"llm": {"api_key_env": "${judge.api_key_env}"}}}}, {"llm": {"max_tokens": 256}},
])
def test_valid_configs_pass(config):
    redact.check_config(config)


def test_log_filter_masks_message_arguments_and_traceback():
    redact.register(KEY)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(redact.LogFilter())
    logger = logging.getLogger("ragbench.test_redact")
    logger.addHandler(handler)
    try:
        logger.warning("calling with %s", KEY)
        try:
            raise ValueError(f"server said {KEY}")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    out = stream.getvalue()
    assert KEY not in out and out.count("***") == 2 and "ValueError" in out


def test_terminal_stream_and_files_are_masked(tmp_path):
    redact.register(KEY)
    stream = io.StringIO()
    wrapped = redact.RedactingStream(stream)
    wrapped.write(f"key {KEY}\n")
    assert stream.getvalue() == "key ***\n"
    f = tmp_path / "overrides.yaml"
    f.write_text(f"- +llm.api_key={KEY}\n- retrieval.topk=3\n")
    assert redact.redact_file(f) and KEY not in f.read_text() and "retrieval.topk=3" in f.read_text()
    assert not redact.redact_file(f)  # already clean: not rewritten


@pytest.mark.parametrize("placeholder", ["none", "None", "EMPTY", "dummy", "sk-no-key-required", "not-needed", "1234567"])
def test_placeholder_and_short_keys_never_mangle_free_text(placeholder: str) -> None:
    # a local OpenAI-compatible server takes any key; masking "none" turned /nonexistent into /***xistent
    redact.register(placeholder)
    redact.register_environment({"OPENAI_API_KEY": placeholder})
    text = f"could not load '/nonexistent/path' {placeholder.lower()}x"
    assert redact.redact(text) == text
    if placeholder.lower() not in ("none", "null"):  # the key rule still masks it where it is assigned
        assert redact.redact(f"llm.api_key={placeholder}") == "llm.api_key=***"


def test_keyword_scan_equals_the_trigger_regex() -> None:
    """``_has_keyword`` (str.find at each keyword, then the tail) decides exactly as ``_TRIGGER.search``
    on the lower-cased text: a table of edge cases plus random strings over the characters that matter."""
    import random

    from ragbench.redact import _TRIGGER, _has_keyword

    table = ["", "api_key=x", "APIKEY: x", "api key=x", "access_key =x", "accesskey\t: y", "my_secret=1",
             "password'=1", 'token"= 1', "tokens=3", "context/tokens: 5", "token\n=1", "token  :", "passwd",
             "tok en=1", "secret", "x" * 50 + "Token=" + "y" * 50, "api_token:1", "token'\"=1", "TOKEN\t\t="]
    rng = random.Random(7)
    # non-ASCII text takes the byte path: the Kelvin sign lower-cases to "k", U+0130 to "i" + U+0307,
    # lone surrogates, combining marks, CJK and a final sigma around the keywords
    table += ["to\u212aen=1", "apI\u212aey: x", "ap\u0130key=1", "api\u0307key=1", "caf\u00e9 token=1",
              "\u4f1a\u8bae token: 1", "\ud800 secret=1", "\u03a3ECRET=1", "\u00e9" * 40 + "PASSWORD:",
              "pass\u00e9word=1", "t\u00f6ken=1", "\u212a" * 3]
    alphabet = ["token", "api_", "key", "secret", "passwd", "password", "access", "_", "s", "'", '"', " ",
                "\t", ":", "=", "\n", "x", "K", "E", "Y", "\u212a", "\u0130", "\u00e9", "\u4f1a", "\ud800"]
    table += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(6000)]
    for text in table:
        assert _has_keyword(text) == (_TRIGGER.search(text.lower()) is not None), repr(text)
    assert _has_keyword("to\u212aen=1") and not _has_keyword("t\u00f6ken=1")


def test_registered_secrets_are_masked_by_the_substring_precheck(monkeypatch: pytest.MonkeyPatch) -> None:
    """The substring test before the alternation regex changes no answer: a text holding a secret, two
    secrets where one contains the other, and a text holding none."""
    from ragbench import redact as r

    monkeypatch.setattr(r, "_secrets", set())
    monkeypatch.setattr(r, "_pattern", None)
    r.register("sk-abcdefghijkl")
    r.register("sk-abcdefghijkl-long")
    assert r.mask_secrets("x sk-abcdefghijkl-long y sk-abcdefghijkl") == f"x {r.MASK} y {r.MASK}"
    assert r.mask_secrets("\u00e9 nothing here") == "\u00e9 nothing here"


def test_is_secret_key_table() -> None:
    from ragbench.redact import is_secret_key

    secret = ("api_key", "+llm.api_key", "llm.apiKey", "OPENAI_API_KEY", "HF_TOKEN", "db.password", "secret",
              "~judge.access_key")
    plain = ("tokens", "token_budget", "context/tokens", "model", "api_key_env", "max_tokens")
    for _ in range(2):  # the second pass answers from the cache
        assert all(is_secret_key(k) for k in secret)
        assert not any(is_secret_key(k) for k in plain)


def test_redact_objs_is_redact_obj_of_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one joined check of a table's rows gives what redact_obj gives row by row: clean rows, a
    registered secret, a secret-named assignment in text, a secret-named key, tuples and nested values."""
    from collections import OrderedDict

    from ragbench import redact as r

    monkeypatch.setattr(r, "_secrets", set())
    monkeypatch.setattr(r, "_pattern", None)
    r.register("sk-0123456789abcdef")
    clean = [{"qid": "q1", "question": "how many tokens?", "ids": ["a", "b"], "n": 3, "x": None},
             {"qid": "q2", "answer": "caf\u00e9", "nested": {"k": ["v", {"w": "z"}]}}]
    tables = [
        clean,
        [*clean, {"qid": "q3", "answer": "the key is sk-0123456789abcdef"}],
        [*clean, {"qid": "q4", "error": "bad request: api_key=abc123"}],
        [*clean, {"qid": "q5", "api_key": "plain"}],
        [*clean, {"qid": "q6", "ids": ("a", "b")}],
        [*clean, {"qid": "q7", "meta": OrderedDict(password="x")}],
        [{"qid": "q8", "lines": "one\npassword: hunter2\nthree"}],
        [],
    ]
    for rows in tables:
        assert r.redact_objs(rows)[0] == [r.redact_obj(row) for row in rows], rows
    safe, untouched = r.redact_objs(clean)
    assert safe[0] is clean[0] and untouched  # nothing to mask: the rows themselves, all of JSON's own types
    assert not any(r.redact_objs(rows)[1] for rows in tables[1:7])  # masked, a tuple, an OrderedDict
    assert not r.redact_objs([{1: "x"}])[1]  # a non-str key
