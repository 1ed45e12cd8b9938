"""The one secret-masking rule, applied at every sink a config string or a reply can reach.

``redact(text)`` masks (1) every value registered as a secret (the keys held by environment variables
named like a secret or named by ``*.api_key_env``, values given under a secret-named config key, a key
pasted into ``*.api_key_env``) and (2) the value of any ``key=value`` / ``key: value`` assignment whose key
is named like a secret (``api_key``, ``token``, ``secret``, ``password``, ...), so ``+llm.api_key=sk-...``
is masked in a run name, an override list or a YAML dump even before it is registered.

Sinks: MLflow run names, tags, params and artifacts (``tracking.mlflow_tracker``), Hydra's ``.hydra/*.yaml``
and ``multirun.yaml`` (``tracking.sweep``), log lines (``LogFilter`` in ``conf/hydra/ragbench.yaml``).
Other modules (the LLM reply sink, caches) call ``redact`` before they store or forward a string.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ragbench.errors import ConfigError

MASK = "***"
# a key (config leaf, override, env var name) whose value is a secret
SECRET_KEY = re.compile(r"(api_?key|access_?key|secret|password|passwd|token)$", re.IGNORECASE)
# what an environment variable NAME looks like (a value in *.api_key_env must be one)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A value shorter than this, or a placeholder key a local server accepts ("none", "EMPTY", "dummy"), is not
# masked in free text: masking "none" everywhere turned "/nonexistent/path" into "/***xistent/path". The key
# rule (``api_key=...``) still masks it where it is assigned; real provider keys are 20+ characters.
MIN_SECRET = 8
PLACEHOLDERS = frozenset({"none", "null", "empty", "dummy", "placeholder", "changeme", "not-needed", "notneeded",
                          "no-key", "nokey", "sk-no-key-required", "unused", "anything", "password"})
_ASSIGNMENT = re.compile(
    r"(?P<key>(?<![\w.\-+~])[+~]*[\w.\-]*(?:api_?key|access_?key|secret|password|passwd|token))"
    r"(?P<q>[\"']?)(?P<sep>[ \t]*[:=][ \t]*)"
    r"(?P<val>\"[^\"\n]*\"|'[^'\n]*'|\[[^\]\n]*\]|[^\s,'\"\]}]+)",
    re.IGNORECASE,
)
# cheap first passes over lower-cased text (a substring search, then a case-sensitive regex): only lines
# where a secret-named key is directly followed by ':' or '=' go through _ASSIGNMENT
_KEYWORDS = ("apikey", "api_key", "accesskey", "access_key", "secret", "password", "passwd", "token")
_TRIGGER = re.compile(r"(?:api_?key|access_?key|secret|password|passwd|token)[\"']?[ \t]*[:=]")
_AFTER_KEYWORD = re.compile(r"[\"']?[ \t]*[:=]")  # what follows a keyword in _TRIGGER
_KEYWORDS_B = tuple(k.encode() for k in _KEYWORDS)
_AFTER_KEYWORD_B = re.compile(_AFTER_KEYWORD.pattern.encode())

_lock = threading.Lock()
_secrets: set[str] = set()


class _Masker(NamedTuple):
    """The registered secrets (longest first) and their alternation, replaced together on each register."""

    regex: re.Pattern[str]
    secrets: tuple[str, ...]


_pattern: _Masker | None = None


@functools.lru_cache(maxsize=4096)  # the same few dozen keys, once per record of every logged table
def is_secret_key(key: str) -> bool:
    """True for a key (dotted or not, ``+``/``~`` prefixes allowed) whose value is a secret."""
    return bool(SECRET_KEY.search(key.lstrip("+~").rsplit(".", 1)[-1]))


def register(value: Any) -> None:
    """Masks ``value`` in every later ``redact`` call (short values and placeholders are ignored)."""
    global _pattern
    if not isinstance(value, str):
        return
    value = value.strip()
    if len(value) < MIN_SECRET or value == MASK or value.lower() in PLACEHOLDERS:
        return
    with _lock:
        if value not in _secrets:
            _secrets.add(value)
            ordered = sorted(_secrets, key=len, reverse=True)  # a longer secret first, never half-masked
            _pattern = _Masker(re.compile("|".join(map(re.escape, ordered))), tuple(ordered))


def mask_secrets(text: str) -> str:
    """``text`` with every registered secret masked (a model's reply: its wording is kept otherwise)."""
    masker = _pattern
    if not text or masker is None:
        return text
    # the alternation regex tries every position of a multi-megabyte artifact; a substring test per
    # secret finds first whether there is anything to mask at all
    return masker.regex.sub(MASK, text) if any(s in text for s in masker.secrets) else text


def redact(text: str) -> str:
    """``text`` with every registered secret and every secret-named assignment's value masked."""
    if not text:
        return text
    text = mask_secrets(text)
    if not _has_keyword(text):
        return text
    return "".join(_ASSIGNMENT.sub(_mask_assignment, line) if _has_keyword(line) else line
                   for line in text.splitlines(keepends=True))


# the only characters outside ASCII whose lower case holds ASCII letters: U+0130 (-> "i" + U+0307, which
# ends no keyword and so never completes a match) and the Kelvin sign U+212A (-> "k", as in "token")
_LOWERS_TO_ASCII = ("\u212a",)


def _has_keyword(text: str) -> bool:
    """``_TRIGGER.search(text.lower())``, found by looking only where a keyword occurs (str.find is fast on
    a multi-megabyte artifact; the alternation regex tries every position). Every keyword and what must
    follow it is ASCII, so outside a Kelvin sign the search runs on the ASCII-lowered UTF-8 bytes: the same
    answer as on ``text.lower()``, without lower-casing megabytes of non-ASCII text."""
    if text.isascii() or any(c in text for c in _LOWERS_TO_ASCII):
        return _keyword_in(text.lower(), _KEYWORDS, _AFTER_KEYWORD)
    return _keyword_in(text.encode("utf-8", "surrogatepass").lower(), _KEYWORDS_B, _AFTER_KEYWORD_B)


def _keyword_in(low: Any, keywords: Sequence[Any], after: re.Pattern[Any]) -> bool:
    for k in keywords:
        at = low.find(k)
        while at != -1:
            if after.match(low, at + len(k)):
                return True
            at = low.find(k, at + 1)
    return False


def _mask_assignment(m: re.Match[str]) -> str:
    val = m.group("val")
    bare = val.strip("\"'")
    if bare in (MASK, "", "null", "None", "~") or bare.startswith(("<", "${")):  # a placeholder, not a value
        return m.group(0)
    quote = val[0] if val[0] in "\"'" else ""
    return f"{m.group('key')}{m.group('q')}{m.group('sep')}{quote}{MASK}{quote}"


def redact_obj(obj: Any) -> Any:
    """A JSON-like value with every string redacted and every secret-named key's value masked."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, Mapping):
        return {k: (MASK if is_secret_key(str(k)) and v not in (None, "") else redact_obj(v)) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [redact_obj(v) for v in obj]
    return obj


_SCALARS = frozenset({int, float, bool, type(None)})


def redact_objs(objs: Sequence[Any]) -> tuple[list[Any], bool]:
    """``[redact_obj(o) for o in objs]`` (a logged table's rows), and whether they came back untouched.
    Values of JSON's own types only (str, int, float, bool, None, list, dict with str keys) are checked in
    one pass over all their strings and keys first: a secret or secret-named assignment inside one string
    is inside their joined text too, so where that text holds none and no key is secret-named, every
    object comes back as it is (True) -- and JSON written from them holds no secret either, so a file of
    it needs no second pass. Otherwise (something to mask, a tuple, which ``redact_obj`` turns into a
    list, a Mapping subclass, another type) ``redact_obj`` runs value by value (False: keys are not
    masked there, so text written from the result goes through ``redact`` too)."""
    found = json_strings(objs)
    if found is not None:
        joined = "\n".join(found[0])
        if not (any(is_secret_key(k) for k in found[1]) or mask_secrets(joined) != joined or _has_keyword(joined)):
            return list(objs), True
    return [redact_obj(o) for o in objs], False


def json_strings(objs: Sequence[Any]) -> tuple[list[str], set[str]] | None:
    """(every string, every key) of values made of JSON's own types only, else None."""
    strings: list[str] = []
    keys: set[str] = set()
    stack = list(objs)
    while stack:
        obj = stack.pop()
        kind = type(obj)
        if kind is str:
            strings.append(obj)
        elif kind is dict:
            if not all(type(k) is str for k in obj):
                return None
            keys.update(obj)
            strings.extend(obj)  # a key's text is checked as its values are
            stack.extend(obj.values())
        elif kind is list:
            stack.extend(obj)
        elif kind not in _SCALARS:
            return None
    return strings, keys


# ``scheme://user:password@host``: the URL's credentials (a basic-auth ``system.url``)
_URL_CREDENTIALS = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://(?P<user>[^/@\s:]*):(?P<password>[^/@\s]+)@")


def register_url_credentials(text: Any) -> None:
    """Registers the ``user:password`` of every URL in ``text`` (``http://user:key@host``), and the password."""
    if not isinstance(text, str) or "@" not in text:
        return
    for m in _URL_CREDENTIALS.finditer(text):
        register(f"{m.group('user')}:{m.group('password')}")
        register(m.group("password"))


def register_environment(environ: Mapping[str, str] | None = None) -> None:
    """Registers the values of environment variables named like a secret (OPENAI_API_KEY, HF_TOKEN, ...)."""
    for name, value in (os.environ if environ is None else environ).items():
        if is_secret_key(name):
            register(value)


def register_overrides(overrides: Iterable[str]) -> None:
    """Registers secrets in raw command-line overrides, sweep lists included (``+llm.api_key=a,b``)."""
    for item in overrides:
        key, sep, value = str(item).partition("=")
        if not sep:
            continue
        pieces = [p.strip().strip("\"'[]") for p in value.split(",")]
        register_url_credentials(value)
        if is_secret_key(key):
            register(value)
            for piece in pieces:
                register(piece)
        elif key.endswith("api_key_env"):
            for piece in pieces:
                if piece and piece != "null" and not ENV_NAME.fullmatch(piece):
                    register(piece)
                elif piece:
                    register(os.environ.get(piece, ""))


def check_config(config: Any, path: str = "") -> None:
    """Registers the secrets a job config holds and refuses a key in the config or in ``*.api_key_env``.

    ``config`` is the unresolved plain container (``OmegaConf.to_container(cfg)``): interpolations are
    skipped here and checked where they point. The error never echoes the value.
    """
    problems: list[ConfigError] = []
    _walk(config, path, problems)
    if problems:
        raise problems[0]


def _walk(node: Any, path: str, problems: list[ConfigError]) -> None:
    if isinstance(node, Mapping):
        for key, value in node.items():
            _walk(value, f"{path}.{key}" if path else str(key), problems)
        return
    if isinstance(node, list | tuple):
        for i, value in enumerate(node):
            _walk(value, f"{path}.{i}", problems)
        return
    if not isinstance(node, str) or not node or "${" in node:
        return
    register_url_credentials(node)
    group = path.rsplit(".", 1)[0] if "." in path else path
    if path.endswith("api_key_env"):
        if ENV_NAME.fullmatch(node):
            register(os.environ.get(node, ""))
            return
        register(node)
        problems.append(ConfigError(
            f"{path} must NAME an environment variable (like OPENAI_API_KEY), but its value is not a variable "
            f"name (not shown: it looks like a key pasted by mistake)\n  fix: export OPENAI_API_KEY=<your key> "
            f"and set {path}=OPENAI_API_KEY"))
    elif is_secret_key(path):
        register(node)
        problems.append(ConfigError(
            f"{path} puts a secret in the config (not shown); ragbench reads keys only from the environment\n"
            f"  fix: drop {path}, export the key (e.g. OPENAI_API_KEY=<your key>) and set "
            f"{group}.api_key_env=OPENAI_API_KEY"))


def redact_file(path: str | Path) -> bool:
    """Rewrites a text file (Hydra's ``.hydra/*.yaml``, ``multirun.yaml``) redacted; True if it changed."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    clean = redact(text)
    if clean == text:
        return False
    tmp = p.with_name(f".{p.name}.redact-{os.getpid()}")
    tmp.write_text(clean, encoding="utf-8")
    os.replace(tmp, p)
    return True


class RedactingStream:
    """``sys.stdout`` / ``sys.stderr`` with secrets masked: what Hydra, rich and warnings print directly.
    Everything but ``write`` (encoding, buffer, isatty, fileno, ...) is the wrapped stream's."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, buffer, flush ...
        return getattr(self._stream, name)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return bool(self._stream.isatty())

    def fileno(self) -> int:
        return int(self._stream.fileno())


def mask_terminal() -> None:
    """Wraps ``sys.stdout`` and ``sys.stderr`` (once) so nothing printed shows a registered secret."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactingStream):
            setattr(sys, name, RedactingStream(stream))


class LogFilter(logging.Filter):
    """A handler filter masking secrets in every record (message, arguments and traceback text)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: leave the record to logging's own error path
            return True
        clean = redact(message)
        if clean != message or record.args:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True
