"""The cache lock: a bounded, logged wait that names the holder; cache.lock_timeout_s validated."""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from ragbench.cache.lock import describe_holder, hold, holder_path
from ragbench.cache.store import StageCache
from ragbench.errors import CacheLockTimeout, ConfigError

KEY = "cd" * 32


@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf, "abc", None, True, "600"])
def test_lock_timeout_must_be_a_finite_positive_number(tmp_path, value):
    with pytest.raises(ConfigError, match=r"^cache\.lock_timeout_s=.* is not valid: use a finite number > 0 \(default: cache\.lock_timeout_s=600\)$"):
        StageCache(dir=str(tmp_path), lock_timeout_s=value)


@pytest.mark.parametrize("value", [0.5, 1, 600, 86400.0])
def test_lock_timeout_accepts_seconds(tmp_path, value):
    assert StageCache(dir=str(tmp_path), lock_timeout_s=value).lock_timeout_s == float(value)


def _holding(lock: Path, release: threading.Event, started: threading.Event) -> threading.Thread:
    def run() -> None:
        with hold(lock, timeout_s=5, what="building index entry for the test"):
            started.set()
            release.wait(30)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10)
    return thread


def _folder(cache: StageCache) -> tuple[str, bool]:
    return cache.folder("index", KEY, {}, build=lambda: "built", save=lambda v, f: (f / "v").write_text(v),
                        load=lambda f, m: (f / "v").read_text())


def test_a_held_lock_ends_in_a_named_error_naming_the_holder(tmp_path, caplog):
    lock = tmp_path / "index" / f"{KEY}.lock"
    lock.parent.mkdir(parents=True)
    release, started = threading.Event(), threading.Event()
    thread = _holding(lock, release, started)
    holder = json.loads(holder_path(lock).read_text())
    assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
    cache = StageCache(dir=str(tmp_path), lock_timeout_s=0.3)
    start = time.monotonic()
    with caplog.at_level(logging.WARNING), pytest.raises(CacheLockTimeout) as err:
        _folder(cache)
    assert time.monotonic() - start < 10  # bounded (0.3 s asked; a loose correctness bound)
    message = str(err.value)
    assert str(lock) in message and f"pid {os.getpid()} on host {socket.gethostname()}" in message
    assert "building index entry for the test" in message and "cache.lock_timeout_s" in message
    assert f"waiting up to 0.3 s (cache.lock_timeout_s) for the cache lock {lock}" in caplog.text
    assert f"pid {os.getpid()}" in caplog.text
    release.set()
    thread.join(10)
    assert not holder_path(lock).exists()  # the holder note goes with the lock
    assert _folder(cache) == ("built", False)


def test_a_waiting_job_gets_the_entry_once_the_holder_finishes(tmp_path, caplog):
    lock = tmp_path / "index" / f"{KEY}.lock"
    lock.parent.mkdir(parents=True)
    release, started = threading.Event(), threading.Event()
    thread = _holding(lock, release, started)
    threading.Timer(0.3, release.set).start()
    with caplog.at_level(logging.INFO):
        assert _folder(StageCache(dir=str(tmp_path), lock_timeout_s=30)) == ("built", False)
    thread.join(10)
    assert "got the cache lock" in caplog.text


@pytest.mark.parametrize(("content", "says"), [
    (None, "an unknown process (no holder file"),
    ("{broken", "an unknown process (unreadable holder file"),
    ('{"pid": 1}', "an unknown process (unreadable holder file"),
])
def test_an_unknown_holder_is_said_to_be_unknown(tmp_path, content, says):
    lock = tmp_path / "x.lock"
    if content is not None:
        holder_path(lock).write_text(content)
    assert describe_holder(lock).startswith(says)


def test_read_only_takes_no_lock(tmp_path):
    cache = StageCache(dir=str(tmp_path / "c"), mode="read_only", lock_timeout_s=0.1)
    assert _folder(cache) == ("built", False)
    assert not (tmp_path / "c").exists()
