"""The LLM ledger: every request the LLM client sends (or serves from its cache) is
booked here by role, and ``budget.max_usd`` / ``max_calls`` / ``max_minutes`` are a ceiling: each HTTP
request (every retry attempt too) is *reserved* before it is sent, so requests in flight count against
the limit and no concurrency goes past it. Under ``max_usd`` a request reserves its maximum cost (its
prompt tokens and ``max_tokens`` priced by litellm's cost map), adjusted to the real cost when the reply
arrives. The session owns the ledger (``ragbench.session``: ``current().ledger``, or ``LEDGER`` at the call
sites), one per process, so a sweep run by the basic launcher shares one budget across its jobs. Where
a launcher runs jobs in worker processes (joblib, Ray, submitit), a sweep budget is held in a file the
workers share (``ragbench.budget_file``): each worker's ledger reserves and settles there instead, so the
budget is one ceiling for the sweep under every launcher.

Roles: ``llm`` (generation), ``judge``, ``embedder``, ``query.transform.client`` (query rewriting), and
any other a client names. ``spent`` is what was sent to a provider, one call per HTTP request (a failed
attempt is a call with no tokens); ``saved`` is what a cache served instead (the original call's tokens
and cost), never counted as spent.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragbench.budget_file import LedgerFile, Tally
from ragbench.errors import BudgetExhaustedError, ConfigError
from ragbench.metric_info import MetricInfo
from ragbench.types import CaseResult, Usage

# metric names of the roles; any other role a client names is accounted under its own name (ROLE_NAME)
ROLES = {"llm": "generation", "judge": "judge", "embedder": "embedding", "query.transform.client": "query"}
FIELDS = ("calls", "prompt_tokens", "completion_tokens", "usd", "timeouts", "estimated_tokens", "generate_s", "generated_tokens",
          "context_truncated")  # the last three: local models (ragbench.llm.local)

_ROLE = "of one role (generation, judge, embedding, query, or the role's own name)"
_SPENT = "the ledger's difference over the job (the provider's usage; litellm's cost map for US dollars)"
_ALL = "summed over every role"


def _amount(definition: str, computed: str = _SPENT) -> MetricInfo:
    return MetricInfo(definition, "ragbench.budget ledger", higher_is_better=False, kind="diagnostic",
                      job_level=computed)


# accounting_metrics' keys: spent (requests sent) and saved (served by a cache) per role, and their totals
METRICS = {
    "llm/<name>_calls": _amount(f"requests sent {_ROLE}"),
    "tokens/<name>_prompt": _amount(f"prompt tokens spent {_ROLE}"),
    "tokens/<name>_completion": _amount(f"completion tokens spent {_ROLE}"),
    "tokens/<name>_total": _amount(f"prompt + completion tokens spent {_ROLE}"),
    "cost/<name>_usd": _amount(f"US dollars spent {_ROLE}"),
    "llm/<name>_timeouts": _amount(f"attempts that timed out {_ROLE} (counted in llm/<name>_calls; the "
                                   "server may still have done the work)"),
    "tokens/<name>_estimated": _amount(f"prompt tokens of timed-out attempts {_ROLE}, estimated from the "
                                       "prompt (litellm's token_counter); included in "
                                       "tokens/<name>_prompt"),
    "time/generate_s": _amount("seconds a local model spent generating (ragbench.llm.local), every role",
                               "the ledger's difference over the job; absent when no local model generated"),
    "counts/context_truncated": _amount("prompts whose lowest-ranked contexts were dropped to fit a local "
                                        "model's window (llm.context_overflow=truncate_contexts)",
                                        "the ledger's difference over the job; absent when no local model ran"),
    "llm/tokens_per_s": MetricInfo("tokens a local model generated per second of generation, every role",
                                   "ragbench.budget ledger", kind="diagnostic",
                                   job_level="generated tokens / time/generate_s over the job"),
    "saved/<name>_calls": MetricInfo(f"requests a cache served instead {_ROLE}", "ragbench.budget ledger",
                                     kind="diagnostic", job_level=_SPENT),
    "saved/<name>_tokens": MetricInfo(f"tokens a cache saved {_ROLE}", "ragbench.budget ledger",
                                      kind="diagnostic", job_level=_SPENT),
    "saved/<name>_usd": MetricInfo(f"US dollars a cache saved {_ROLE}", "ragbench.budget ledger",
                                   kind="diagnostic", job_level=_SPENT),
    "tokens/prompt_total": _amount("prompt tokens spent on generation (the historical name of "
                                   "tokens/generation_prompt; a cached answer's tokens are saved, not spent)"),
    "tokens/completion_total": _amount("completion tokens spent on generation (the historical name of "
                                       "tokens/generation_completion)"),
    "llm/calls_total": _amount("requests sent", f"{_SPENT}, {_ALL}"),
    "tokens/total": _amount("tokens spent", f"{_SPENT}, {_ALL}"),
    "cost/usd_total": _amount("US dollars spent", f"{_SPENT}, {_ALL}"),
    "saved/calls_total": MetricInfo("requests caches served", "ragbench.budget ledger", kind="diagnostic",
                                    job_level=f"{_SPENT}, {_ALL}"),
    "saved/tokens_total": MetricInfo("tokens caches saved", "ragbench.budget ledger", kind="diagnostic",
                                     job_level=f"{_SPENT}, {_ALL}"),
    "saved/usd_total": MetricInfo("US dollars caches saved", "ragbench.budget ledger", kind="diagnostic",
                                  job_level=f"{_SPENT}, {_ALL}"),
}


SHARED_POLL_S = 0.05  # a request waiting for other processes' requests in flight looks again this often
SHARED_STALL_S = 600.0  # ... and stops as budget reached once the shared ledger has not moved for this long


@dataclass(frozen=True)
class SharedHold:
    """A request reserved in the sweep's shared file (``reserve``'s return, for ``settle``)."""

    usd: float
    file: LedgerFile


@dataclass(frozen=True)
class Budget:
    """Limits for one job (``scope=job``) or for a whole sweep (``scope=sweep``); None = no limit."""

    max_usd: float | None = None
    max_calls: int | None = None
    max_minutes: float | None = None
    scope: str = "sweep"

    @classmethod
    def from_config(cls, node: Mapping[str, Any] | None) -> Budget:
        node = dict(node or {})
        for key in ("max_usd", "max_calls", "max_minutes"):
            value = node.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
                raise ConfigError(f"budget.{key} must be a number >= 0 or null (no limit), got {value!r}")
        scope = str(node.get("scope") or "sweep")
        if scope not in ("job", "sweep"):
            raise ConfigError(f"budget.scope={scope!r} is not valid; choose job or sweep")
        calls = node.get("max_calls")
        return cls(max_usd=node.get("max_usd"), max_calls=None if calls is None else int(calls),
                   max_minutes=node.get("max_minutes"), scope=scope)

    @property
    def limited(self) -> bool:
        return any(v is not None for v in (self.max_usd, self.max_calls, self.max_minutes))


class Ledger:
    """Thread-safe counters of spent and saved LLM work, and the budget's reservations: ``reserve``
    before each HTTP request is sent, ``settle`` when it has returned (a reply or an error)."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self.spent: dict[str, dict[str, float]] = {}
        self.saved: dict[str, dict[str, float]] = {}
        self.budget = Budget()
        self._base: dict[str, float] = {"calls": 0.0, "usd": 0.0}
        self._started = time.monotonic()
        self.stopped: str | None = None  # the budget message once a limit was reached
        self._begun = False
        self._held_calls = 0  # requests reserved and not yet settled (in flight)
        self._held_usd = 0.0  # their reserved maximum cost
        self._shared: LedgerFile | None = None  # the sweep's shared file, for a limited sweep budget

    def start_job(self, budget: Budget, shared: LedgerFile | None = None) -> None:
        """Sets the job's budget; a job budget counts from here, a sweep budget from the first job.
        ``shared``: the sweep's file where its jobs run in worker processes; a limited sweep budget then
        counts there, every worker's requests together."""
        with self._lock:
            if budget.scope == "job" or not self._begun:
                self._base = {"calls": self._total("calls"), "usd": self._total("usd")}
                self._started = time.monotonic()
                self.stopped = None
            self._begun = True
            self.budget = budget
            self._shared = shared if budget.scope == "sweep" and budget.limited else None
            if self._shared is not None:
                self._shared.begin()

    @property
    def prices_requests(self) -> bool:
        """True when ``max_usd`` is set: a request must then reserve its maximum cost."""
        return self.budget.max_usd is not None

    def _total(self, field: str) -> float:
        return sum(v.get(field, 0.0) for v in self.spent.values())

    def _book(self, book: dict[str, dict[str, float]], role: str, usage: Usage) -> None:
        row = book.setdefault(role, dict.fromkeys(FIELDS, 0.0))
        row["calls"] += 1
        row["prompt_tokens"] += usage.prompt_tokens
        row["completion_tokens"] += usage.completion_tokens
        row["usd"] += usage.cost_usd

    def record(self, role: str, usage: Usage) -> None:
        """Books one call: as saved when a cache served it, else as spent (a request sent without a
        reservation; the LLM client reserves and settles instead)."""
        with self._lock:
            self._book(self.saved if usage.cached else self.spent, role, usage)
            if self._shared is not None and not usage.cached:
                self._shared.update(lambda t: t.book(1, usage.cost_usd))

    def save(self, role: str, usage: Usage) -> None:
        """Books work a stage cache served (an answer or verdict read back) as saved."""
        with self._lock:
            self._book(self.saved, role, usage)

    def reserve(self, usd: float = 0.0) -> float | SharedHold:
        """Holds one request, and ``usd`` (its maximum cost; 0 without ``max_usd``), against the budget
        before it is sent; returns the amount held, for ``settle``. Raises BudgetExhaustedError when the
        request could go past a limit counting every request in flight. A request whose maximum cost
        fits only once requests in flight have settled at their real cost waits for them."""
        with self._lock:
            if self._shared is not None:
                return self._reserve_shared(self._shared, usd)
            while True:
                if self.stopped is None:
                    self.stopped = self._over(usd)
                if self.stopped is not None:
                    raise BudgetExhaustedError(self.stopped)
                if not self._waits(usd):
                    break
                self._lock.wait()
            self._held_calls += 1
            self._held_usd += usd
            return usd

    def _reserve_shared(self, file: LedgerFile, usd: float) -> SharedHold:
        """``reserve`` in the sweep's shared file (the caller holds ``_lock``): a request that fits only
        once requests in flight settle polls for them, and stops as budget reached when the file has not
        moved for SHARED_STALL_S (requests of a process on another host that died in flight)."""
        seen, since = -1, time.monotonic()
        while True:
            if self.stopped is None:
                taken, version, self.stopped = file.update(lambda t: self._take(t, file.owner, usd))
                if taken:
                    return SharedHold(usd, file)
            if self.stopped is not None:
                raise BudgetExhaustedError(self.stopped)
            if version != seen:
                seen, since = version, time.monotonic()
            elif time.monotonic() - since >= SHARED_STALL_S:
                tally = file.read()
                self.stopped = (f"budget.max_usd={self.budget.max_usd:g} reached (${tally.usd:.4f} spent, "
                                f"${tally.held_usd:.4f} held by requests in flight that have not settled in "
                                f"{SHARED_STALL_S:g} s, budget.scope=sweep)")
                raise BudgetExhaustedError(self.stopped)
            self._lock.wait(SHARED_POLL_S)

    def _check(self, tally: Tally, usd: float) -> str | None:
        """In the shared file: the budget message once one more request of maximum cost ``usd`` could go
        past a limit, counting every process's requests in flight (kept in the file: the sweep stops)."""
        if tally.stopped is None:
            minutes = (time.time() - (tally.started or time.time())) / 60.0
            tally.stopped = self._limit(tally.calls + tally.held_calls, tally.usd, usd, minutes)
        return tally.stopped

    def _take(self, tally: Tally, owner: str, usd: float) -> tuple[bool, int, str | None]:
        """In the shared file: (reserved?, the file's version, the budget message once a limit is reached)."""
        if self._check(tally, usd) is not None:
            return False, tally.version, tally.stopped
        if self._over_held(tally.usd, tally.held_calls, tally.held_usd, usd):
            return False, tally.version, None
        tally.hold(owner, usd)
        return True, tally.version, None

    def settle(self, role: str, usage: Usage, held: float | SharedHold) -> None:
        """Books a reserved request that has returned (``usage`` zero for an attempt with no reply) as
        spent and releases its hold."""
        with self._lock:
            self._book(self.spent, role, usage)
            if isinstance(held, SharedHold):
                file = held.file
                file.update(lambda t: t.settle(file.owner, held.usd, usage.cost_usd))
            else:
                self._held_calls -= 1
                self._held_usd = max(0.0, self._held_usd - held)
            self._lock.notify_all()

    def timed_out(self, role: str, usage: Usage) -> None:
        """Books an attempt that timed out (its call is settled as usual) as attempted work: ``usage``
        (its prompt tokens, estimated; the server may still have processed it) as spent, and counted."""
        with self._lock:
            row = self.spent.setdefault(role, dict.fromkeys(FIELDS, 0.0))
            row["prompt_tokens"] += usage.prompt_tokens
            row["usd"] += usage.cost_usd
            row["timeouts"] += 1
            row["estimated_tokens"] += usage.prompt_tokens
            if self._shared is not None:
                self._shared.update(lambda t: t.book(0, usage.cost_usd))

    def generated(self, role: str, seconds: float, tokens: int) -> None:
        """Books a local model's generation time and the tokens it generated (``time/generate_s``,
        ``llm/tokens_per_s``); its calls are reserved and settled as usual, at cost 0."""
        with self._lock:
            row = self.spent.setdefault(role, dict.fromkeys(FIELDS, 0.0))
            row["generate_s"] += seconds
            row["generated_tokens"] += tokens

    def truncated(self, role: str) -> None:
        """Counts a prompt whose lowest-ranked contexts were dropped to fit a local model's window."""
        with self._lock:
            self.spent.setdefault(role, dict.fromkeys(FIELDS, 0.0))["context_truncated"] += 1

    def admit(self) -> None:
        """Raises BudgetExhaustedError when a limit is reached (nothing is reserved)."""
        with self._lock:
            if self.stopped is None:
                shared = self._shared
                self.stopped = (self._over(0.0) if shared is None
                                else shared.update(lambda t: self._check(t, 0.0)))
            if self.stopped is not None:
                raise BudgetExhaustedError(self.stopped)

    def sweep_stopped(self, shared: LedgerFile | None) -> str | None:
        """The budget message when the sweep's budget is spent: this process's (``budget.scope=sweep``), or
        that of the sweep's shared file (another worker reached it)."""
        if self.stopped is not None and self.budget.scope == "sweep":
            return self.stopped
        return shared.read().stopped if shared is not None else None

    def _waits(self, usd: float) -> bool:
        """True when the request fits ``max_usd`` only after requests in flight settle."""
        return self._over_held(self._total("usd") - self._base["usd"], self._held_calls, self._held_usd, usd)

    def _over_held(self, spent: float, held_calls: float, held_usd: float, usd: float) -> bool:
        b = self.budget
        return b.max_usd is not None and held_calls > 0 and spent + held_usd + usd > b.max_usd

    def _over(self, usd: float) -> str | None:
        """The budget message when one more request (of maximum cost ``usd``) could go past a limit."""
        minutes = (time.monotonic() - self._started) / 60.0
        return self._limit(self._total("calls") - self._base["calls"] + self._held_calls,
                           self._total("usd") - self._base["usd"], usd, minutes)

    def _limit(self, calls: float, spent: float, usd: float, minutes: float) -> str | None:
        """The budget message when, with ``calls`` sent or in flight and ``spent`` dollars settled, one
        more request (of maximum cost ``usd``) could go past a limit."""
        b = self.budget
        where = f"budget.scope={b.scope}"
        if b.max_calls is not None and calls >= b.max_calls:
            return f"budget.max_calls={b.max_calls} reached ({int(calls)} LLM requests sent, {where})"
        if b.max_usd is not None and (spent >= b.max_usd or spent + usd > b.max_usd):
            more = f"; the next request could cost up to ${usd:.4f}" if spent < b.max_usd else ""
            return f"budget.max_usd={b.max_usd:g} reached (${spent:.4f} spent{more}, {where})"
        if b.max_minutes is not None and minutes >= b.max_minutes:
            return f"budget.max_minutes={b.max_minutes:g} reached ({minutes:.1f} min, {where})"
        return None

    def snapshot(self) -> dict[str, dict[str, dict[str, float]]]:
        with self._lock:
            return {"spent": {r: dict(v) for r, v in self.spent.items()},
                    "saved": {r: dict(v) for r, v in self.saved.items()}}



def role_name(role: str) -> str:
    """The metric name of a role: ``ROLES``' name, else the role with every non-alphanumeric run as ``_``."""
    return ROLES.get(role) or re.sub(r"[^0-9A-Za-z]+", "_", role).strip("_") or "other"


def _diff(after: Mapping[str, Mapping[str, float]], before: Mapping[str, Mapping[str, float]],
          role: str, field: str) -> float:
    return after.get(role, {}).get(field, 0.0) - before.get(role, {}).get(field, 0.0)


def accounting_metrics(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, float]:
    """One job's accounting from two ledger snapshots: per role (generation, judge, embedding, query and
    any other role booked) the calls, tokens and cost spent, their totals over every role, and what
    caches saved."""
    out: dict[str, float] = {}
    totals = {"calls": 0.0, "tokens": 0.0, "usd": 0.0}
    saved = {"calls": 0.0, "tokens": 0.0, "usd": 0.0}
    others = sorted({r for book in ("spent", "saved") for r in (*after[book], *before[book])} - set(ROLES))
    for role, name in (*ROLES.items(), *((r, role_name(r)) for r in others)):
        spent = {f: _diff(after["spent"], before["spent"], role, f) for f in FIELDS}
        kept = {f: _diff(after["saved"], before["saved"], role, f) for f in FIELDS}
        tokens = spent["prompt_tokens"] + spent["completion_tokens"]
        out[f"llm/{name}_calls"] = spent["calls"]
        out[f"tokens/{name}_prompt"] = spent["prompt_tokens"]
        out[f"tokens/{name}_completion"] = spent["completion_tokens"]
        out[f"tokens/{name}_total"] = tokens
        out[f"cost/{name}_usd"] = spent["usd"]
        out[f"llm/{name}_timeouts"] = spent["timeouts"]
        out[f"tokens/{name}_estimated"] = spent["estimated_tokens"]
        out[f"saved/{name}_calls"] = kept["calls"]
        out[f"saved/{name}_tokens"] = kept["prompt_tokens"] + kept["completion_tokens"]
        out[f"saved/{name}_usd"] = kept["usd"]
        for k, v in (("calls", spent["calls"]), ("tokens", tokens), ("usd", spent["usd"])):
            totals[k] += v
        for k, v in (("calls", kept["calls"]), ("tokens", out[f"saved/{name}_tokens"]), ("usd", kept["usd"])):
            saved[k] += v
    seconds = sum(_diff(after["spent"], before["spent"], r, "generate_s") for r in {*after["spent"]})
    truncated = sum(_diff(after["spent"], before["spent"], r, "context_truncated") for r in {*after["spent"]})
    if seconds > 0 or truncated > 0:  # a local model's prompts cut to its window (llm.context_overflow)
        out["counts/context_truncated"] = truncated
    if seconds > 0:  # a local model generated (ragbench.llm.local): its time and speed
        out["time/generate_s"] = seconds
        out["llm/tokens_per_s"] = sum(_diff(after["spent"], before["spent"], r, "generated_tokens")
                                      for r in {*after["spent"]}) / seconds
    # the historical names, now spent generation only (a cached answer's tokens are saved, not spent)
    out["tokens/prompt_total"] = out["tokens/generation_prompt"]
    out["tokens/completion_total"] = out["tokens/generation_completion"]
    out["llm/calls_total"] = totals["calls"]
    out["tokens/total"] = totals["tokens"]
    out["cost/usd_total"] = totals["usd"]
    out["saved/calls_total"] = saved["calls"]
    out["saved/tokens_total"] = saved["tokens"]
    out["saved/usd_total"] = saved["usd"]
    return out


def budget_stop(cases: Sequence[CaseResult]) -> str | None:
    """The budget message when some case was skipped for the budget, else None."""
    return next((c.error or "budget reached" for c in cases if c.skipped), None)
