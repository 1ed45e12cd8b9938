"""The process-wide LLM ledger: every request the LLM client sends (or serves from its cache) is
booked here by role, and ``budget.max_usd`` / ``max_calls`` / ``max_minutes`` are checked before each
request is sent. One ledger per process, so a sweep run by the basic launcher shares one budget across
its jobs (launchers that run jobs in worker processes give each worker its own ledger).

Roles: ``llm`` (generation), ``judge``, ``embedder``. ``spent`` is what was sent to a provider;
``saved`` is what a cache served instead (the original call's tokens and cost), never counted as spent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragbench.errors import BudgetExhaustedError, ConfigError
from ragbench.types import CaseResult, Usage

ROLES = {"llm": "generation", "judge": "judge", "embedder": "embedding"}
FIELDS = ("calls", "prompt_tokens", "completion_tokens", "usd")


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
    """Thread-safe counters of spent and saved LLM work, and the budget check before each request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.spent: dict[str, dict[str, float]] = {}
        self.saved: dict[str, dict[str, float]] = {}
        self.budget = Budget()
        self._base: dict[str, float] = {"calls": 0.0, "usd": 0.0}
        self._started = time.monotonic()
        self.stopped: str | None = None  # the budget message once a limit was reached
        self._begun = False

    def start_job(self, budget: Budget) -> None:
        """Sets the job's budget; a job budget counts from here, a sweep budget from the first job."""
        with self._lock:
            if budget.scope == "job" or not self._begun:
                self._base = {"calls": self._total("calls"), "usd": self._total("usd")}
                self._started = time.monotonic()
                self.stopped = None
            self._begun = True
            self.budget = budget

    def _total(self, field: str) -> float:
        return sum(v.get(field, 0.0) for v in self.spent.values())

    def _book(self, book: dict[str, dict[str, float]], role: str, usage: Usage) -> None:
        row = book.setdefault(role, dict.fromkeys(FIELDS, 0.0))
        row["calls"] += 1
        row["prompt_tokens"] += usage.prompt_tokens
        row["completion_tokens"] += usage.completion_tokens
        row["usd"] += usage.cost_usd

    def record(self, role: str, usage: Usage) -> None:
        """Books one call: as saved when a cache served it, else as spent."""
        with self._lock:
            self._book(self.saved if usage.cached else self.spent, role, usage)

    def save(self, role: str, usage: Usage) -> None:
        """Books work a stage cache served (an answer or verdict read back) as saved."""
        with self._lock:
            self._book(self.saved, role, usage)

    def admit(self) -> None:
        """Raises BudgetExhaustedError when the next request would go over the budget."""
        with self._lock:
            if self.stopped is None:
                self.stopped = self._over()
            if self.stopped is not None:
                raise BudgetExhaustedError(self.stopped)

    def _over(self) -> str | None:
        b = self.budget
        calls = self._total("calls") - self._base["calls"]
        usd = self._total("usd") - self._base["usd"]
        minutes = (time.monotonic() - self._started) / 60.0
        where = f"budget.scope={b.scope}"
        if b.max_calls is not None and calls >= b.max_calls:
            return f"budget.max_calls={b.max_calls} reached ({int(calls)} LLM requests sent, {where})"
        if b.max_usd is not None and usd >= b.max_usd:
            return f"budget.max_usd={b.max_usd:g} reached (${usd:.4f} spent, {where})"
        if b.max_minutes is not None and minutes >= b.max_minutes:
            return f"budget.max_minutes={b.max_minutes:g} reached ({minutes:.1f} min, {where})"
        return None

    def snapshot(self) -> dict[str, dict[str, dict[str, float]]]:
        with self._lock:
            return {"spent": {r: dict(v) for r, v in self.spent.items()},
                    "saved": {r: dict(v) for r, v in self.saved.items()}}


LEDGER = Ledger()


def _diff(after: Mapping[str, Mapping[str, float]], before: Mapping[str, Mapping[str, float]],
          role: str, field: str) -> float:
    return after.get(role, {}).get(field, 0.0) - before.get(role, {}).get(field, 0.0)


def accounting_metrics(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, float]:
    """One job's accounting from two ledger snapshots: per role (generation, judge, embedding) the
    calls, tokens and cost spent, their totals, and what caches saved."""
    out: dict[str, float] = {}
    totals = {"calls": 0.0, "tokens": 0.0, "usd": 0.0}
    saved = {"calls": 0.0, "tokens": 0.0, "usd": 0.0}
    for role, name in ROLES.items():
        spent = {f: _diff(after["spent"], before["spent"], role, f) for f in FIELDS}
        kept = {f: _diff(after["saved"], before["saved"], role, f) for f in FIELDS}
        tokens = spent["prompt_tokens"] + spent["completion_tokens"]
        out[f"llm/{name}_calls"] = spent["calls"]
        out[f"tokens/{name}_prompt"] = spent["prompt_tokens"]
        out[f"tokens/{name}_completion"] = spent["completion_tokens"]
        out[f"tokens/{name}_total"] = tokens
        out[f"cost/{name}_usd"] = spent["usd"]
        out[f"saved/{name}_calls"] = kept["calls"]
        out[f"saved/{name}_tokens"] = kept["prompt_tokens"] + kept["completion_tokens"]
        out[f"saved/{name}_usd"] = kept["usd"]
        for k, v in (("calls", spent["calls"]), ("tokens", tokens), ("usd", spent["usd"])):
            totals[k] += v
        for k, v in (("calls", kept["calls"]), ("tokens", out[f"saved/{name}_tokens"]), ("usd", kept["usd"])):
            saved[k] += v
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
