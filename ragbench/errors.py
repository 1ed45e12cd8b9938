"""The one exception family ragbench raises: every message names what is wrong and how to fix it."""

from __future__ import annotations


class RagbenchError(Exception):
    """Base of every error ragbench raises on purpose; the message is meant for the user."""


class ConfigError(RagbenchError):
    """A config value is invalid; the message names the key and the valid values."""


class DatasetError(RagbenchError):
    """A dataset cannot be loaded: missing file, bad JSON/CSV, wrong type, missing field."""

    def __init__(
        self,
        message: str,
        *,
        dataset: str,
        file: str | None = None,
        record: str | None = None,
        field: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.dataset = dataset
        self.file = file
        self.record = record
        self.field = field
        self.fix = fix
        where = [f"dataset '{dataset}'"]
        if file:
            where.append(f"file '{file}'")
        if record:
            where.append(f"record {record}")
        if field:
            where.append(f"field '{field}'")
        text = f"{', '.join(where)}: {message}"
        if fix:
            text += f"\n  fix: {fix}"
        super().__init__(text)


class DownloadError(RagbenchError):
    """An official dataset file could not be fetched or verified."""


class IndexMismatchError(RagbenchError):
    """A persisted index was built with other settings than the ones asked for."""


class ModelLoadError(RagbenchError):
    """An embedding or reranking model could not be loaded."""


class LLMError(RagbenchError):
    """A generation or judging call failed after its retries."""


class CacheError(RagbenchError):
    """The stage cache is misconfigured or an entry is unreadable."""


class CacheLockTimeout(CacheError):
    """Another process held a cache entry's lock for longer than ``cache.lock_timeout_s``."""


class CacheCorruptError(CacheError):
    """A cache entry failed its content check and the cache may not rebuild it (``cache.mode=read_only``)."""


class JobFailedError(RagbenchError):
    """A job ran, but too many of its cases failed for its figures to mean anything (max_failure_rate)."""


class BudgetExhaustedError(RagbenchError):
    """budget.max_usd / max_calls / max_minutes reached: no further LLM request is sent (ragbench.budget)."""


class TrackingError(RagbenchError):
    """The tracking server or its artifact store refused or failed a write; the message names the run, what
    was refused and the fix."""


class JobStopped(RagbenchError):
    """The budget stopped the job part way: its run ends KILLED, so a rerun with a larger budget runs it
    again (from the cache)."""


class Reported(BaseException):
    """An outcome already reported in one line (failed jobs of a sweep, a spent budget, a store that cannot
    open): ``__main__`` exits with ``code``. Not an ``Exception``, so it passes Hydra's guard, which turns a
    callback's exceptions into warnings."""

    def __init__(self, code: int = 1) -> None:
        super().__init__(code)
        self.code = code
