"""Measured rates the plan estimates wall time from, recorded by every finished job in the stage cache
(``<cache.dir>/rates.json``): per embedder identity the texts encoded per second (model load excluded),
per generator / judge identity the seconds per LLM request and the mean completion tokens. A plan on a
machine with no recorded rate says so instead of guessing."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragbench.cache.store import StageCache
    from ragbench.components import Components, JobResult

log = logging.getLogger(__name__)
FILE = "rates.json"


def read_rates(cache_dir: Path) -> dict[str, dict[str, float]]:
    try:
        data = json.loads((cache_dir / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(cache_dir: Path, rates: dict[str, dict[str, float]]) -> None:
    cache_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".rates-", dir=cache_dir)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(rates, fh, indent=1, sort_keys=True)
    os.replace(tmp, cache_dir / FILE)


def record_rates(cache: StageCache, components: Components, result: JobResult) -> None:
    """Updates the rates file with this job's measurements; never fails the job."""
    if not cache.writes:
        return
    rates: dict[str, dict[str, Any]] = {}
    emb = components.embedder
    seconds = result.timings.get("embed", 0.0)
    if emb is not None and result.counts.get("embedded_texts", 0) and seconds > 0:
        rates[emb.identity] = {"texts_per_s": result.counts["embedded_texts"] / seconds}
    fresh = [c.answer for c in result.cases if c.answer is not None and not c.answer.usage.cached]
    if components.generator is not None and fresh:
        rates[components.generator.identity] = {
            "s_per_call": sum(a.latency_s for a in fresh) / len(fresh),
            "completion_tokens": sum(a.usage.completion_tokens for a in fresh) / len(fresh)}
    if not rates:
        return
    try:
        _write(cache.dir, {**read_rates(cache.dir), **rates})
    except OSError as exc:
        log.debug("rates not recorded in %s: %s", cache.dir, exc)
