"""``log.per_query=true``: one line per question in the job's log, as the benchmark suite prints them.

A line names the question and what a reader scans for when a score looks wrong::

    query conv-26_q3 type=temporal status=ok recall@5=1.00 hit_rank=2 latency_ms=812 judge accuracy=4 f1=0.67

``recall@k`` is ``retrieval/recall_at_<k>`` at the job's top-k; ``hit_rank`` is the rank of the first gold
unit (from ``retrieval/mrr_at_<k>``, the reciprocal of that rank; ``-`` when none was retrieved);
``latency_ms`` sums the case's stage latencies; the judge part lists each judge rubric's score
(``judge/<rubric>``) and the answer's token F1. A value the case does not have is left out. The line is
built from the case's record (``ragbench.record.CaseRecord``): what the log says is what the record holds.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from ragbench.record import CaseRecord

log = logging.getLogger("ragbench.per_query")

_AT_K = re.compile(r"^retrieval/mrr_at_(\d+)$")
# judge keys that are bookkeeping, not a verdict
_NOT_VERDICT = ("judge_failed", "prompt_tokens", "completion_tokens", "cost_usd", "heuristic_refusal")


def _num(value: float) -> str:
    return f"{value:.2f}" if value != int(value) else str(int(value))


def hit_rank(scores: Mapping[str, float]) -> int | None:
    """The first gold unit's rank, from the deepest ``retrieval/mrr_at_<k>``; None when none was found."""
    depths = sorted((int(m.group(1)), key) for key in scores if (m := _AT_K.match(key)))
    if not depths:
        return None
    mrr = scores[depths[-1][1]]
    return round(1 / mrr) if mrr > 0 else None


def verdicts(scores: Mapping[str, float]) -> dict[str, float]:
    """Each judge rubric's score of the case (``judge/<rubric>``), and ``f1`` (``answer/f1``)."""
    out = {key.split("/", 1)[1]: v for key, v in scores.items()
           if key.startswith("judge/") and key.count("/") == 1 and key != "judge/score"
           and not key.endswith(_NOT_VERDICT)}
    if "answer/f1" in scores:
        out["f1"] = scores["answer/f1"]
    return dict(sorted(out.items()))


def line(case: CaseRecord, topk: int) -> str:
    """The case's log line (see the module docstring)."""
    parts = [f"query {case.qid}", f"type={case.question_type}", f"status={case.status}"]
    recall = case.scores.get(f"retrieval/recall_at_{topk}")
    if recall is not None:
        parts.append(f"recall@{topk}={recall:.2f}")
    if any(_AT_K.match(k) for k in case.scores):
        rank = hit_rank(case.scores)
        parts.append(f"hit_rank={'-' if rank is None else rank}")
    if case.latency_ms:
        parts.append(f"latency_ms={sum(case.latency_ms.values()):.0f}")
    judged = verdicts(case.scores)
    if judged:
        parts.append("judge " + " ".join(f"{k}={_num(v)}" for k, v in judged.items()))
    if case.error_type:
        parts.append(f"error={case.error_type}")
    return " ".join(parts)


def log_case(case: CaseRecord, topk: int) -> None:
    """Writes the case's line to the job's log (INFO: Hydra's job log file and the console)."""
    log.info("%s", line(case, topk))
