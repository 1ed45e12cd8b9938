"""``ragbench.tracking.background.StagedFiles``: a forked child writes a job's case files, and whatever
goes wrong in the child (an exception, a signal, no exit in time) ends with the same files written by
the process itself. Each case forks a real child (a few milliseconds)."""

from __future__ import annotations

import logging
import os
import signal
import time

import pytest

from ragbench.tracking import background
from ragbench.tracking.background import StagedFiles

pytestmark = pytest.mark.skipif(not background.can_fork(), reason="fork-based writer: Linux only")
FILES = {"cases.jsonl": '{"qid": "q1"}\n{"qid": "ünï"}\n', "case_scores.json": "{}", "sub/t.json": "[1]"}
PARENT = os.getpid()


def _in_child() -> bool:
    return os.getpid() != PARENT


def _folder(staged: StagedFiles) -> dict[str, str]:
    return {str(p.relative_to(staged.folder)): p.read_text(encoding="utf-8")
            for p in sorted(staged.folder.rglob("*")) if p.is_file()}


def _child_fault(fault: str):
    """make() that misbehaves only in the child, and returns FILES in the process."""
    def make():
        if _in_child():
            if fault == "raises":
                raise ValueError("disk full")
            if fault == "signal":
                os.kill(os.getpid(), signal.SIGKILL)
            if fault == "hangs":
                time.sleep(30)
            if fault == "partial":
                raise KeyboardInterrupt
        return FILES
    return make


@pytest.mark.parametrize("fork", [True, False], ids=["child", "in-process"])
def test_the_files_are_the_functions_output(fork):
    staged = StagedFiles(lambda: FILES, fork=fork)
    assert staged.pending == fork
    staged.wait()
    assert staged.complete and not staged.pending
    assert _folder(staged) == FILES
    staged.discard()
    assert not staged.folder.exists()


def test_the_child_does_the_work_and_the_process_state_is_untouched():
    seen: list[int] = []

    def make():
        seen.append(os.getpid())
        return {"pid": str(os.getpid()), "sigint": str(signal.getsignal(signal.SIGINT))}

    staged = StagedFiles(make, fork=True)
    staged.wait()
    files = _folder(staged)
    assert int(files["pid"]) != PARENT and seen == []  # ran in the child; the parent's list is unchanged
    assert files["sigint"] == str(signal.SIG_DFL)  # Ctrl-C stops the child with the job
    staged.discard()


# fault in the child -> what the warning names; the files are then written by the process, the same
@pytest.mark.parametrize(("fault", "named"), [
    ("raises", "exited with status 70 (ValueError: disk full)"),
    ("signal", "was stopped by signal 9"),
    ("hangs", "(no exit in time)"),
    ("partial", "exited with status 70 (KeyboardInterrupt: )"),
])
def test_a_failing_child_leaves_the_files_to_the_process(fault, named, caplog):
    staged = StagedFiles(_child_fault(fault), fork=True)
    with caplog.at_level(logging.WARNING, logger="ragbench.tracking.background"):
        staged.wait(timeout_s=1.0)
    assert staged.complete and _folder(staged) == FILES
    assert named in caplog.text and "writing them in this process" in caplog.text
    staged.discard()


def test_a_function_that_fails_everywhere_raises_its_own_error():
    def make():
        raise ValueError("a record holds an object JSON cannot write")

    staged = StagedFiles(make, fork=True)
    with pytest.raises(ValueError, match="JSON cannot write"):
        staged.wait()
    assert not staged.complete
    staged.discard()
    with pytest.raises(ValueError, match="JSON cannot write"):
        StagedFiles(make, fork=False)  # in the process: at once, the same error


def test_cancel_stops_a_child_still_writing_and_keeps_a_finished_one():
    slow = StagedFiles(_child_fault("hangs"), fork=True)
    started = time.monotonic()
    assert slow.cancel() is False and not slow.pending
    assert time.monotonic() - started < 5
    slow.discard()
    done = StagedFiles(lambda: FILES, fork=True)
    time.sleep(0.3)
    assert done.cancel() is True and _folder(done) == FILES
    done.discard()
    assert StagedFiles(lambda: FILES, fork=False).cancel() is True


def test_no_fork_on_this_platform_writes_at_once(monkeypatch):
    monkeypatch.setattr(background, "can_fork", lambda: False)
    staged = StagedFiles(lambda: FILES, fork=True)
    assert not staged.pending and staged.complete and _folder(staged) == FILES
    staged.discard()


def test_a_fork_that_fails_writes_at_once(monkeypatch, caplog):
    def no_fork():
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    with caplog.at_level(logging.WARNING, logger="ragbench.tracking.background"):
        staged = StagedFiles(lambda: FILES, fork=True)
    assert not staged.pending and _folder(staged) == FILES
    assert "Resource temporarily unavailable" in caplog.text
    staged.discard()


_SIGNAL_IN_AT_FORK = {"armed": False}


def _signal_from_an_at_fork_hook() -> None:
    if _SIGNAL_IN_AT_FORK["armed"]:
        _SIGNAL_IN_AT_FORK["armed"] = False
        os.kill(os.getpid(), signal.SIGTERM)  # its handler runs inside the hook, where raising is "ignored"


os.register_at_fork(after_in_parent=_signal_from_an_at_fork_hook)


def test_a_signal_during_the_fork_is_raised_after_it_not_lost():
    from ragbench import signals

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signals.install_handlers()
    try:
        _SIGNAL_IN_AT_FORK["armed"] = True
        with pytest.raises(signals.Interrupted) as raised:
            background.Child(lambda: b"")
        assert raised.value.signum == signal.SIGTERM
    finally:
        _SIGNAL_IN_AT_FORK["armed"] = False
        for sig, handler in before.items():
            signal.signal(sig, handler)
