"""How long ``ragbench.compare`` takes on a big comparison: 20 runs x 1,000 cases x 5 metrics, 1,000 resamples.

Synthetic cases.jsonl rows (5 question types), so no MLflow store or job is needed; times reading the
rows, the statistics (bootstrap CI + randomisation p-value per run, metric and type, Holm) and the
taxonomy, and sets one comparison beside scipy.stats (bootstrap + permutation_test) for a ratio.

    python benchmarks/bench_compare.py [--runs 20] [--cases 1000] [--resamples 1000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ragbench.compare.analysis import analyse
from ragbench.compare.runcases import from_rows

METRICS = ["answer/f1", "retrieval/hit_at_5", "retrieval/mrr", "context/tokens", "latency/generate_p50_ms"]
TYPES = ["single_hop", "multi_hop", "temporal", "open_domain", "adversarial"]


def rows(run: int, cases: int, rng: np.random.Generator) -> list[dict]:
    skill = 0.4 + 0.01 * run
    hit = (rng.random(cases) < skill).astype(float)
    return [{"qid": f"q{i}", "question_type": TYPES[i % len(TYPES)], "status": "ok" if rng.random() > 0.01 else "failed",
             "answer/f1": float(min(1.0, hit[i] * rng.random() + 0.05 * run / 20)), "retrieval/hit_at_5": hit[i],
             "retrieval/hit_at_3": hit[i] * (rng.random() < 0.8), "retrieval/mrr": hit[i] / rng.integers(1, 6),
             "context/evidence_recall": hit[i], "context/tokens": float(150 + 10 * run + rng.normal(0, 20)),
             "latency/generate_ms": float(rng.gamma(2.0, 400.0)), "retrieved_ids": [f"c{j}" for j in range(5)]}
            for i in range(cases)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--cases", type=int, default=1000)
    p.add_argument("--resamples", type=int, default=1000)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    raw = [rows(r, args.cases, rng) for r in range(args.runs)]
    t0 = time.perf_counter()
    runs = [from_rows(x, run_id=f"run{i:02d}", name=f"#{i} retrieval.topk={i}", dataset="bench", topk=5)
            for i, x in enumerate(raw)]
    t_read = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    comp, taxa = analyse(runs, metrics=METRICS, baseline="run00", resamples=args.resamples)
    t_all, c_all = time.perf_counter() - t0, time.process_time() - c0
    compared = [r for r in comp.records if r.verdict != "baseline"]
    print(f"{args.runs} runs x {args.cases} cases x {len(METRICS)} metrics, {args.resamples} resamples: "
          f"{len(compared)} comparisons (overall + {len(TYPES)} types each)")
    print(f"  read cases.jsonl rows      {t_read:7.2f} s")
    print(f"  statistics + taxonomy      {t_all:7.2f} s wall, {c_all:.2f} s CPU "
          f"({1000 * t_all / len(compared):.1f} ms wall per comparison)")
    print(f"  {comp.correction}")

    import scipy.stats

    a = runs[1].values(comp.metrics[0])
    b = runs[0].values(comp.metrics[0])
    t0 = time.process_time()
    scipy.stats.bootstrap((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), paired=True, vectorized=True,
                          method="percentile", n_resamples=args.resamples, random_state=0)
    scipy.stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), vectorized=True,
                                 permutation_type="samples", n_resamples=args.resamples, random_state=0)
    t_scipy = time.process_time() - t0
    n_overall = sum(r.type == "all" for r in compared)
    est = t_scipy * n_overall  # scipy, for the overall comparisons alone (per-type ones are smaller)
    print(f"  scipy.stats (bootstrap + permutation_test), one overall comparison: {1000 * t_scipy:.1f} ms CPU; "
          f"x {n_overall} overall comparisons alone = {est:.1f} s CPU")
    ours = [r for r in compared if r.type == "all"]
    print(f"  ragbench CPU / scipy CPU (ragbench also does the {len(compared) - n_overall} per-type comparisons "
          f"and the taxonomy): {c_all / est:.3f}")
    print(f"  verdicts (overall): {sum(r.verdict == 'better' for r in ours)} better, "
          f"{sum(r.verdict == 'worse' for r in ours)} worse, "
          f"{sum(r.verdict == 'no detectable difference' for r in ours)} no detectable difference")


if __name__ == "__main__":
    main()
