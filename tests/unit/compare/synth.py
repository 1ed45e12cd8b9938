"""Synthetic runs as cases.jsonl rows (the shape ragbench.record.CaseRecord.row writes)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragbench.compare.runcases import RunCases, from_rows


def rows(f1: Sequence[float], *, types: Sequence[str] | None = None, hit5: Sequence[float] | None = None,
         tokens: Sequence[float] | None = None, failed: Sequence[int] = (), prefix: str = "q") -> list[dict]:
    out = []
    for i, v in enumerate(f1):
        row = {"qid": f"{prefix}{i}", "question_type": (types[i] if types else "single-hop"),
               "status": "failed" if i in failed else "ok", "answerable": True,
               "retrieved_ids": [f"c{i}", "x"], "context_ids": [f"p{i}"],
               "latency/generate_ms": 10.0 + i, "latency/search_ms": 1.0}
        if i not in failed:
            row["answer/f1"] = float(v)
        if hit5 is not None:
            row["retrieval/hit_at_5"] = float(hit5[i])
            row["retrieval/mrr"] = float(hit5[i]) / 2
        if tokens is not None:
            row["context/tokens"] = float(tokens[i])
        out.append(row)
    return out


def run(run_id: str, data: list[dict], *, dataset: str = "locomo", name: str | None = None) -> RunCases:
    return from_rows(data, run_id=run_id, name=name or f"#0 retrieval={run_id}", dataset=dataset, topk=5)


def scores(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random(n)
