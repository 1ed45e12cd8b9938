"""LLM generation concurrency: N cases against the loopback server answering after a fixed delay.

Runs ``LLMGenerator.answer`` over N distinct queries in a thread pool of ``max_concurrency`` workers
(as the pipeline's case loop does), through litellm and real HTTP, with the response cache off.
Ideal wall time = N * delay / max_concurrency; the ratio wall / ideal is printed (target <= 1.3).
litellm is imported before the clock starts.

    python benchmarks/bench_llm_concurrency.py [--cases 200] [--delay 0.2] [--concurrency 16] [--repeat 3]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests.fixtures

from ragbench.generate.llm import LLMGenerator
from ragbench.types import Context, Level, Query
from tests.fixtures.llm_server import LLMServer

TARGET = 1.3


def run_once(
    generator: LLMGenerator, queries: list[Query], contexts: tuple[Context, ...]
) -> tuple[float, int]:
    """(wall seconds, answers) for one pass over the queries."""
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=generator.max_concurrency) as pool:
        answers = list(pool.map(lambda q: generator.answer(q, contexts), queries))
    return time.perf_counter() - start, sum(bool(a.text) for a in answers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--delay", type=float, default=0.2, help="server seconds per reply")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    contexts = (
        Context(
            chunk_id="c1",
            text="Mel painted a lake on 7 May 2023.",
            title="Session 1",
            level=Level.PARAGRAPH,
            hit_ids=("c1",),
        ),
    )
    os.environ.setdefault("RAGBENCH_BENCH_KEY", "no-auth-needed")  # the loopback server ignores it
    with LLMServer(delay_s=args.delay) as server:
        generator = LLMGenerator(
            model="openai/bench-model",
            api_base=server.url,
            api_key_env="RAGBENCH_BENCH_KEY",
            max_concurrency=args.concurrency,
            num_retries=0,
            timeout=30,
        )
        generator.client.complete([{"role": "user", "content": "warm-up"}])  # import + connection pool
        ideal = args.cases * args.delay / args.concurrency
        walls = []
        for rep in range(args.repeat):
            queries = [
                Query(
                    qid=f"r{rep}q{i}",
                    text=f"Question {i} of pass {rep}?",
                    answers=("x",),
                    question_type="single_hop",
                )
                for i in range(args.cases)
            ]
            server.reset()
            wall, answered = run_once(generator, queries, contexts)
            walls.append(wall)
            print(
                f"pass {rep + 1}: {wall:.2f} s wall, {answered}/{args.cases} answered, "
                f"{server.count} requests, peak {server.max_in_flight} in flight"
            )
    best, median = min(walls), statistics.median(walls)
    print(f"ideal {args.cases} x {args.delay} s / {args.concurrency} = {ideal:.2f} s")
    print(
        f"wall / ideal: median {median / ideal:.3f}, best {best / ideal:.3f} "
        f"({'meets' if median / ideal <= TARGET else 'misses'} the {TARGET} target)"
    )


if __name__ == "__main__":
    main()
