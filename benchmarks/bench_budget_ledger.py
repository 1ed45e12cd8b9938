"""The budget ledger's cost per LLM request (a reservation and its settlement), in one process (the basic
launcher's jobs) and through the sweep's shared file (``ragbench.budget_file``: joblib, Ray and submitit
workers with a limited ``budget.scope=sweep``). A request costs the LLM's latency on top (0.1-10 s).

    python benchmarks/bench_budget_ledger.py [--requests 20000] [--shared 2000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from ragbench.budget import Budget, Ledger
from ragbench.budget_file import FILE, LedgerFile
from ragbench.types import Usage


def per_request_us(n: int, shared: LedgerFile | None) -> float:
    ledger = Ledger()
    ledger.start_job(Budget(max_calls=10**9, max_usd=10.0**6), shared=shared)
    usage = Usage(prompt_tokens=3, completion_tokens=1, cost_usd=1e-4)
    began = time.perf_counter()
    for _ in range(n):
        ledger.settle("llm", usage, ledger.reserve(1e-3))
    return (time.perf_counter() - began) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--shared", type=int, default=2000)
    args = parser.parse_args()
    print(f"in one process:   {per_request_us(args.requests, None):8.1f} us per request")
    with tempfile.TemporaryDirectory() as tmp:
        file = LedgerFile(Path(tmp) / FILE, sweep="bench", owner="bench:1:1", gone=lambda _: None)
        print(f"shared file:      {per_request_us(args.shared, file):8.1f} us per request")


if __name__ == "__main__":
    main()
