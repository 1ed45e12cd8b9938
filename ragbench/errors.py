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


# Every RagbenchError class's stable code, by the class's ``module.QualifiedName`` (one registry here, so no
# module needs to import anything for it). A code is never reused: a class that goes has its code moved to
# RETIRED. docs/failures.md lists every code (tests/unit/test_error_codes.py checks both ways).
CODES: dict[str, str] = {
    "ragbench.errors.RagbenchError": "RB-GENERAL-001",
    "ragbench.errors.ConfigError": "RB-CONFIG-001",
    "ragbench.metric_info.UndeclaredMetricError": "RB-CONFIG-002",
    "ragbench.errors.DatasetError": "RB-DATA-001",
    "ragbench.errors.DownloadError": "RB-DATA-002",
    "ragbench.retrieval.run_file.RunFileError": "RB-DATA-003",
    "ragbench.jsonio.NestedTooDeep": "RB-DATA-004",
    "ragbench.errors.IndexMismatchError": "RB-INDEX-001",
    "ragbench.errors.ModelLoadError": "RB-MODEL-001",
    "ragbench.rerank.fallback.RerankerSkipped": "RB-MODEL-002",
    "ragbench.errors.LLMError": "RB-LLM-001",
    "ragbench.llm.errors.LLMRateLimitError": "RB-LLM-002",
    "ragbench.llm.errors.LLMTimeoutError": "RB-LLM-003",
    "ragbench.llm.errors.LLMConnectionError": "RB-LLM-004",
    "ragbench.llm.errors.LLMServerError": "RB-LLM-005",
    "ragbench.llm.errors.LLMAuthError": "RB-LLM-006",
    "ragbench.llm.errors.LLMRequestError": "RB-LLM-007",
    "ragbench.llm.errors.LLMResponseError": "RB-LLM-008",
    "ragbench.llm.errors.LLMReplyTooLargeError": "RB-LLM-009",
    "ragbench.llm.errors.LLMCircuitOpenError": "RB-LLM-010",
    "ragbench.llm.local.client.LLMContextError": "RB-LLM-011",
    "ragbench.systems.client.SystemFunctionError": "RB-SYSTEM-001",
    "ragbench.systems.responses.MissingResponseError": "RB-SYSTEM-002",
    "ragbench.systems.responses.DuplicateResponseError": "RB-SYSTEM-003",
    "ragbench.systems.records.RecordError": "RB-SYSTEM-004",
    "ragbench.judge.labels.LabelsError": "RB-JUDGE-001",
    "ragbench.errors.CacheError": "RB-CACHE-001",
    "ragbench.errors.CacheLockTimeout": "RB-CACHE-002",
    "ragbench.errors.CacheCorruptError": "RB-CACHE-003",
    "ragbench.errors.JobFailedError": "RB-JOB-001",
    "ragbench.errors.BudgetExhaustedError": "RB-BUDGET-001",
    "ragbench.errors.JobStopped": "RB-BUDGET-002",
    "ragbench.budget_file.LedgerFileError": "RB-BUDGET-003",
    "ragbench.errors.TrackingError": "RB-TRACKING-001",
    "ragbench.tracking.traces.TracesUnsupported": "RB-TRACKING-002",
    "ragbench.record.RecordError": "RB-RECORD-001",
}
RETIRED: frozenset[str] = frozenset()  # codes of classes that are gone: never given to another class


def code_of(error: BaseException | type[BaseException]) -> str | None:
    """The stable code of an error (or error class): its own class's, else its nearest ancestor's in
    ``CODES``; None for what is not a RagbenchError (a bug, an OSError)."""
    cls = error if isinstance(error, type) else type(error)
    for base in cls.__mro__:
        code = CODES.get(f"{base.__module__}.{base.__qualname__}")
        if code is not None:
            return code
    return None


def coded(error: BaseException) -> str:
    """The one-line message as printed: ``[RB-CONFIG-001] retrieval.topk=0 ...`` (the message alone for what
    has no code)."""
    code = code_of(error)
    return f"[{code}] {error}" if code else str(error)


def described(error: BaseException) -> str:
    """A failure as the ``ragbench.error`` tag and a record's ``error`` hold it:
    ``[RB-CONFIG-001] ConfigError: retrieval.topk=0 ...`` (``ValueError: ...`` for what has no code)."""
    text = f"{type(error).__name__}: {error}"
    code = code_of(error)
    return f"[{code}] {text}" if code else text
