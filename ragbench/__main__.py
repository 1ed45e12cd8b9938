"""``python -m ragbench``: the Hydra entry point (offline-safe environment set before any import)."""

from __future__ import annotations

import atexit
import os
import sys
import threading

from ragbench import offline

offline.set_defaults()  # nothing calls out of the machine unless the user's environment says so

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from ragbench import gc_tuning, interrupts, redact, session  # noqa: E402
from ragbench.cache.root import check_retired  # noqa: E402
from ragbench.compare.cli import main as compare_main  # noqa: E402
from ragbench.config_check import check_overrides, open_overrides  # noqa: E402
from ragbench.errors import RagbenchError, Reported, coded  # noqa: E402
from ragbench.tracking.full_disk import DiskFull  # noqa: E402
from ragbench.ui import main as ui_main  # noqa: E402


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def _hydra_main(cfg: DictConfig) -> float | None:
    """Runs one job (or each job of a ``-m`` sweep). A RagbenchError that reaches here was reported in one
    line by the job (a single run's failure, a store that cannot open): exit 1, without Hydra's traceback."""
    from ragbench.app import run  # deferred: startup of ragbench compare, 0.6 s

    try:
        return run(cfg)
    except RagbenchError:
        sys.exit(1)


def check_command_line() -> None:
    """A command-line key that no config file has gets one line naming the closest keys, not Hydra's
    advice to append it with ``+`` (where it would be silently ignored); see ragbench.config_check."""
    try:
        check_retired()
        check_overrides(sys.argv[1:])  # also a dataset.path that does not exist (DatasetError)
    except RagbenchError as exc:
        print(f"ragbench: {coded(exc)}", file=sys.stderr)
        leave(1)


def main() -> None:
    """``python -m ragbench`` and the ``ragbench`` script: Hydra's main, with interrupts ending in one line
    and exit 128 + the signal number (130 for Ctrl-C, 143 for SIGTERM)."""
    session.begin()  # the run state of this process: ledger, sweep parents, caches, signals (ragbench.session)
    gc_tuning.for_batch_work()
    interrupts.install()  # SIGINT, SIGTERM: stop at the next safe point (ragbench.interrupts)
    redact.register_environment()
    sys.argv[1:] = open_overrides(sys.argv[1:])  # system.params.* need no "+" (ragbench.config_check)
    redact.register_overrides(sys.argv[1:])  # before Hydra, whose own errors may echo an override
    redact.mask_terminal()
    from ragbench.plan.cli import split_plan_args  # deferred: startup of ragbench compare, 0.6 s

    asked, json_path, rest = split_plan_args(sys.argv[1:])
    if asked:  # plan=true: the sweep's bill, nothing run (ragbench.plan)
        from ragbench.plan.cli import main as plan_main  # deferred: startup of ragbench compare, 0.6 s

        leave(plan_main(rest, json_path))
        return
    check_command_line()
    try:
        _hydra_main()
        interrupts.check()  # a signal after the last safe point: the work is done, the exit code says it came
    except KeyboardInterrupt as exc:  # each job's run ended KILLED on its way out (ragbench.job)
        leave(interrupted(exc))
    except DiskFull as exc:  # the first write that found no space: the job's run ended KILLED (ragbench.job)
        leave(stopped_by_full_disk(exc))
    except Reported as exc:  # failed jobs, a spent budget: said in one line already
        leave(exc.code)
    except SystemExit as exc:
        leave(exc.code)
    except BrokenPipeError:  # `python -m ragbench --help | head`: the reader left, as Python's docs advise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        leave(1)
    leave(0)


INTERRUPTED = "interrupted; rerun the same command to resume"


def interrupted(exc: KeyboardInterrupt) -> int:
    """After an interrupt reached the top: the sweep's parent run ends KILLED (each job's run already did),
    one line is printed; returns the exit code, 128 + the signal number."""
    import signal

    interrupts.ignore()  # a second signal must not cut the closing short
    session.current().parents.close_all("KILLED")
    print(INTERRUPTED, file=sys.stderr)
    return 128 + int(getattr(exc, "signum", signal.SIGINT))


def stopped_by_full_disk(full: BaseException) -> int:
    """After a write failed for want of space: the sweep's parents still open end KILLED where the store takes
    it; the one line names the disk, the free space, the runs and the fix; returns the exit code, 1."""
    assert isinstance(full, DiskFull)
    interrupts.ignore()  # a signal must not cut the closing short
    for _ in range(100):  # each parent that the store refuses to close raises once; the others are closed
        try:
            session.current().parents.close_all("KILLED")
            break
        except DiskFull as again:
            if again.run_id is not None:
                full.left.append(again.run_id)
    print(f"ragbench: {full.line()}", file=sys.stderr)
    return 1


def leave(code: int | str | None) -> None:
    """Exit with ``code``, skipping the interpreter's teardown of the module graph.

    Tearing down what a job imported takes seconds after the work is done (measured here: 1.4 s after
    ``import sentence_transformers``, 0.8 s after opening an MLflow store): a tenth of a warm sweep.
    Every atexit handler still runs (logging's flush, MLflow's, Ray's and loky's shutdown), then stdout
    and stderr are flushed and the process ends. A normal exit happens when a non-daemon thread is
    still running, or with RAGBENCH_FAST_EXIT=0.
    """
    busy = any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread())
    fast = not busy and os.environ.get("RAGBENCH_FAST_EXIT", "1") != "0"
    if not fast or not (code is None or isinstance(code, int)):
        sys.exit(code)
    atexit._run_exitfuncs()  # noqa: SLF001 - the documented handlers, run exactly as at a normal exit
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


def cli() -> None:
    """The ``ragbench`` console script: ``ragbench compare ...`` compares runs, ``ragbench ui`` shows them,
    anything else runs jobs."""
    if sys.argv[1:2] == ["compare"]:
        session.begin()
        leave(compare_main(sys.argv[2:]))  # the same fast exit as a run
        return
    if sys.argv[1:2] == ["ui"]:  # the lean MLflow server, opened on the runs (ragbench.ui)
        sys.exit(ui_main(sys.argv[2:]))
    main()


if __name__ == "__main__":
    cli()
