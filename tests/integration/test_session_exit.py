"""A sweep parent the process leaves open is ended on the way out, by the session that opened it (not by an
exit handler ``ragbench.sweep`` registered when imported): FAILED on a crash or an exit, KILLED on an
interrupt, never twice, and a process that opened none registers nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

OPEN_A_PARENT = """
import sys
from ragbench import session
from ragbench.__main__ import interrupted, leave

class Tracker:
    def end_run(self, run_id, status):
        print(f"ended {run_id} {status}", flush=True)

s = session.begin()
s.parents.opened("/sweeps/a", "parent-1", Tracker())
"""


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "RAGBENCH_FAST_EXIT": "1"}, timeout=60)


@pytest.mark.parametrize(("ending", "code", "ended"), [
    ("raise RuntimeError('a crash')", 1, ["ended parent-1 FAILED"]),
    ("sys.exit(2)", 2, ["ended parent-1 FAILED"]),
    ("leave(0)", 0, ["ended parent-1 FAILED"]),  # __main__'s fast exit runs the handlers
    ("leave(interrupted(KeyboardInterrupt()))", 130, ["ended parent-1 KILLED"]),  # once, not FAILED after
    ("s.parents.closing('parent-1'); leave(0)", 0, []),  # the sweep closed it itself
], ids=["crash", "exit", "fast-exit", "interrupt", "closed-by-its-sweep"])
def test_an_open_parent_ends_once_with_the_status_of_the_way_out(ending: str, code: int,
                                                                 ended: list[str]) -> None:
    proc = _python(OPEN_A_PARENT + ending + "\n")
    assert proc.returncode == code, proc.stderr
    assert proc.stdout.splitlines() == ended


def test_importing_the_sweep_and_beginning_a_session_register_no_exit_handler() -> None:
    proc = _python("import atexit\nseen = []\nreal = atexit.register\n"
                   "atexit.register = lambda fn, *a, **k: (seen.append(fn), real(fn, *a, **k))[1]\n"
                   "import ragbench.sweep\nfrom ragbench import session\nsession.begin()\n"
                   "print([f.__qualname__ for f in seen if f.__module__.startswith('ragbench')])\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
