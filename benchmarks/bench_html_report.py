"""How big report.html is and how fast it opens for a large sweep: 12 runs x 2,000 questions, each case with
5 hits (800-character chunk texts from a 20,000-chunk corpus), its contexts, an answer and a judge's reasoning.

Synthetic cases.jsonl rows, so no MLflow store or job is needed. Prints the build time, the file size, and,
when Chromium and Playwright are installed, the time until the page is ready (the drill-down's first page
drawn), to open one question and to apply the "A right, B wrong" filter.

    python benchmarks/bench_html_report.py [--runs 12] [--cases 2000] [--out /tmp/report.html]
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import numpy as np

from ragbench.compare.analysis import analyse
from ragbench.compare.html import write_html
from ragbench.compare.runcases import from_rows

TYPES = ["single_hop", "multi_hop", "temporal", "open_domain", "adversarial"]
WORDS = "the of a retrieval answer context model evidence question chunk passage score rank gold judge".split()


def text(rng: np.random.Generator, chars: int) -> str:
    words = rng.choice(WORDS, size=chars // 6)
    return " ".join(words)[:chars]


def rows(run: int, cases: int, corpus: list[str], rng: np.random.Generator) -> list[dict]:
    topk = 3 + run % 3 * 2
    out = []
    for i in range(cases):
        qrng = np.random.default_rng(i)  # the question's own facts are the same in every run
        gold = int(qrng.integers(len(corpus)))
        ranked = [int(x) for x in rng.integers(len(corpus), size=10)]
        if rng.random() < 0.4 + 0.02 * run:
            ranked[int(rng.integers(topk))] = gold
        hit = gold in ranked[:topk]
        f1 = float(min(1.0, hit * rng.random() + 0.1))
        out.append({
            "qid": f"q{i}", "question_type": TYPES[i % len(TYPES)], "status": "ok", "topk": topk,
            "question": text(qrng, 90), "answers": [text(qrng, 30)], "gold": "", "answer": text(rng, 120),
            "ranked_ids": [f"c{x}" for x in ranked], "ranked_doc_ids": [f"d{x // 20}" for x in ranked],
            "retrieved_ids": [f"c{x}" for x in ranked[:topk]], "topk_texts": [corpus[x] for x in ranked[:topk]],
            "qrels": {"chunk": {f"c{gold}": 1}, "unit": {}},
            "evidence": {"matched": True, "texts": [corpus[gold][:200]]},
            "contexts": [{"chunk_id": f"c{x}", "title": f"d{x // 20}", "text": corpus[x], "has_evidence": x == gold}
                         for x in ranked[:topk]],
            "judge_notes": {"llm": {"rubric": "accuracy", "reasoning": text(rng, 200)}},
            "answer/f1": f1, "answer/em": float(f1 > 0.9), "judge/accuracy": float(f1 > 0.5),
            "retrieval/hit_at_1": float(ranked[0] == gold), "retrieval/hit_at_3": float(gold in ranked[:3]),
            "retrieval/hit_at_5": float(gold in ranked[:5]), "retrieval/hit_at_10": float(gold in ranked),
            "retrieval/mrr": 1.0 / (ranked.index(gold) + 1) if gold in ranked else 0.0,
            "context/evidence_text_recall": float(hit), "context/tokens": float(topk * 160),
            "latency/generate_ms": float(rng.gamma(2.0, 400.0)),
        })
    return out


def browser_times(path: Path) -> dict[str, float] | None:
    exe = shutil.which("chromium") or shutil.which("/usr/bin/chromium")
    if exe is None:
        return None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=args)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        t = time.perf_counter()
        page.goto(path.resolve().as_uri(), timeout=300_000)
        page.wait_for_selector("#dd-list tr.q", timeout=300_000)
        ready = time.perf_counter() - t
        t = time.perf_counter()
        page.locator("#dd-list tr.q").first.click()
        page.wait_for_selector("#dd-list .detail")
        opened = time.perf_counter() - t
        t = time.perf_counter()
        page.locator("#dd-vs").select_option("ab")
        page.locator("#dd-count").inner_text()
        filtered = time.perf_counter() - t
        heap = page.evaluate("() => performance.memory ? performance.memory.usedJSHeapSize : 0")
        browser.close()
    return {"ready_s": ready, "open_question_s": opened, "filter_s": filtered, "js_heap_mb": heap / 2**20}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=12)
    p.add_argument("--cases", type=int, default=2000)
    p.add_argument("--out", type=Path, default=Path("/tmp/ragbench-bench-report.html"))
    args = p.parse_args()
    rng = np.random.default_rng(0)
    corpus = [text(rng, 800) for _ in range(20_000)]
    records = {f"r{j}": rows(j, args.cases, corpus, rng) for j in range(args.runs)}
    runs = [from_rows(r, run_id=rid, name=f"topk={3 + j % 3 * 2} seed={j} #{j}", dataset="synthetic",
                      topk=3 + j % 3 * 2, keep_rows=False) for j, (rid, r) in enumerate(records.items())]
    t = time.perf_counter()
    comp, taxa = analyse(runs, resamples=200)
    analysed = time.perf_counter() - t
    t = time.perf_counter()
    write_html(args.out, comp, taxa, {}, records=records)
    built = time.perf_counter() - t
    size = args.out.stat().st_size
    print(f"{args.runs} runs x {args.cases} questions: analyse {analysed:.1f} s, report.html built in {built:.1f} s, "
          f"{size / 2**20:.1f} MiB ({args.out})")
    times = browser_times(args.out)
    if times is None:
        print("no Chromium or Playwright: load time not measured")
    else:
        print("headless Chromium: ready (first 100 questions drawn) {ready_s:.2f} s, open a question "
              "{open_question_s:.3f} s, 'A right, B wrong' filter {filter_s:.3f} s, JS heap {js_heap_mb:.0f} MiB"
              .format(**times))


if __name__ == "__main__":
    main()
