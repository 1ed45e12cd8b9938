"""``python -m ragbench`` leaves without the interpreter's slow teardown, losing nothing on the way."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **env}, timeout=60)


def test_fast_exit_runs_atexit_handlers_flushes_output_and_keeps_the_code():
    code = ("import atexit, sys\n"
            "atexit.register(lambda: print('handler ran', file=sys.stderr))\n"
            "from ragbench.__main__ import leave\n"
            "print('buffered line', end='')\n"
            "leave(3)\n")
    proc = _python(code)
    assert proc.returncode == 3
    assert proc.stdout == "buffered line" and "handler ran" in proc.stderr
    assert _python(code.replace("leave(3)", "leave(None)")).returncode == 0


def test_normal_exit_when_asked_or_when_a_thread_still_runs():
    from ragbench.__main__ import leave

    with pytest.raises(SystemExit) as exc:
        leave("a message")  # a string code is printed by Python's own exit
    assert exc.value.code == "a message"
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, daemon=False)
    worker.start()
    try:
        with pytest.raises(SystemExit) as exc:
            leave(4)
        assert exc.value.code == 4
    finally:
        stop.set()
        worker.join()
    proc = _python("from ragbench.__main__ import leave\nleave(5)", RAGBENCH_FAST_EXIT="0")
    assert proc.returncode == 5
