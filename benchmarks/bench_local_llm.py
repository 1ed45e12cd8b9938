"""ragbench's local-model generation speed beside the floor (issue 47, item 3).

Runs one ``llm=local`` job on the Qasper sample in this process (a fresh cache, so every answer is
generated), recording each batch ragbench hands to the model. ragbench's figure: generated tokens per
second of the job's cases stage (``time/cases_s``: rounds, retrieval per case, prompts, caching and
accounting included). The floor: ``model.generate`` on the same prompts in the same batches, outside
ragbench. Target: ragbench >= 0.9x the floor.

    python benchmarks/bench_local_llm.py [--questions 8] [--topk 3] [--max-tokens 48] [--batch-size 8]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--topk", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)

    from ragbench import offline

    offline.set_defaults()
    from ragbench.llm.local import engine
    from ragbench.llm.local.source import resolve
    from tests.fixtures.jobs import run_job

    warm = engine.load(resolve(None), threads=args.threads)  # loaded, and one generate run: no first-call cost
    warm.generate([warm.prompt_ids([{"role": "user", "content": "Say OK."}])], max_new_tokens=4)
    batches: list[tuple[list[list[int]], dict[str, Any]]] = []
    real = engine.LocalModel.generate

    def recording(self: engine.LocalModel, prompts: Any, **kw: Any) -> list[engine.Generated]:
        batches.append(([list(p) for p in prompts], dict(kw)))
        return real(self, prompts, **kw)

    engine.LocalModel.generate = recording  # type: ignore[method-assign]  # the benchmark only records
    with tempfile.TemporaryDirectory() as tmp:
        overrides = [
            "dataset=qasper",
            f"dataset.max_queries={args.questions}",
            "retrieval=bm25",
            f"retrieval.topk={args.topk}",
            "expander.max_context_tokens=300",
            "llm=local",
            f"llm.max_tokens={args.max_tokens}",
            f"llm.batch_size={args.batch_size}",
            "judge=lexical",
            f"cache.dir={tmp}/cache",
        ]
        if args.threads:
            overrides.append(f"llm.threads={args.threads}")
        run, _ = run_job(overrides, Path(tmp))
    engine.LocalModel.generate = real  # type: ignore[method-assign]
    m = run.data.metrics
    tokens = m["tokens/generation_completion"]
    ours = tokens / m["time/cases_s"]
    model = engine.loaded()[0]
    floor_s, floor_tokens = 0.0, 0
    for prompts, kw in batches:
        begin = time.perf_counter()
        out = real(model, prompts, **kw)
        floor_s += time.perf_counter() - begin
        floor_tokens += sum(r.completion_tokens for r in out)
    floor = floor_tokens / floor_s
    print(
        f"Qasper sample: {args.questions} questions, top-k {args.topk}, "
        f"{len(batches)} batches of <= {args.batch_size}"
    )
    print(
        f"ragbench   {ours:8.2f} tokens/s  ({tokens:.0f} tokens / time/cases_s {m['time/cases_s']:.1f} s;"
        f" llm/tokens_per_s {m['llm/tokens_per_s']:.2f})"
    )
    print(f"floor      {floor:8.2f} tokens/s  ({floor_tokens} tokens / {floor_s:.1f} s of model.generate)")
    print(f"ratio      {ours / floor:8.2f}x  (target >= 0.9x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
