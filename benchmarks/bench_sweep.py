"""The design-card sweep, cold and warm: wall time, peak memory, and overhead over the work itself.

    python benchmarks/bench_sweep.py            # prints figures and ratios (no asserts)

Cold: a fresh folder and stage cache. "Work timed alone", read two ways: (1) strictly, in-process with
no start-up costs: each dataset's ingest (load, chunk, embed with the model already loaded) plus each
job's retrieve/generate/judge pass over cached vectors, plus one model load; (2) as separate commands:
each job run on its own, the first of each dataset cold, the others with its vectors cached. Warm: the same command again in the same folder,
once with resume (finished jobs are recognised) and once with resume=false (every stage from the cache).
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SWEEP = ["-m", "retrieval.topk=3,5,10", "dataset=locomo,qasper"]
# reports whether torch / litellm / sentence_transformers were imported by a whole ragbench command
PROBE = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: print('IMPORTED', sorted(m for m in ('torch', 'litellm', 'sentence_transformers')"
    " if m in sys.modules), file=sys.stderr))\n"
    "sys.argv = ['ragbench', *sys.argv[1:]]\n"
    "runpy.run_module('ragbench', run_name='__main__', alter_sys=True)\n"
)


def command(args: list[str], cwd: Path, probe: bool = False) -> tuple[float, int, str]:
    """(wall seconds, peak RSS of the child in MiB, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAGBENCH_CACHE": str(cwd / "cache")}
    argv = [sys.executable, "-c", PROBE, *args] if probe else [sys.executable, "-m", "ragbench", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"ragbench failed:\n{proc.stderr[-3000:]}")
    peak = max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before) // 1024
    return wall, peak, proc.stderr


def work_alone() -> float:
    """Seconds of the sweep's real work, each piece run alone in this process."""
    from hydra import compose, initialize_config_module

    from ragbench.build import build
    from ragbench.cache.store import StageCache
    from ragbench.pipeline import Pipeline

    total = 0.0
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    start = time.perf_counter()
    from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder

    _ = SentenceTransformerEmbedder(show_progress=False).dim  # one model load, as the sweep needs
    total += time.perf_counter() - start
    print(f"  model load (import + weights): {time.perf_counter() - start:.2f}s")
    with initialize_config_module("ragbench.conf", version_base="1.3"):
        for dataset in ("locomo", "qasper"):
            cache_dir = tmp / dataset
            cfg = compose("config", overrides=[f"dataset={dataset}", f"cache.dir={cache_dir}"])
            components, _ = build(cfg)
            emb = components.embedder
            docs = components.dataset.load().documents
            texts = [c.text for c in components.chunker.chunk(docs).searchable()]
            emb._load()  # noqa: SLF001 - the model is loaded outside the timed ingest
            start = time.perf_counter()
            components.dataset.load()
            components.chunker.chunk(docs)
            emb.embed_documents(texts)
            ingest = time.perf_counter() - start
            total += ingest
            Pipeline(components, cache=StageCache(dir=str(cache_dir))).run()  # fills the vector cache
            print(f"  {dataset}: ingest {ingest:.2f}s ({len(texts)} texts)")
            for topk in (3, 5, 10):
                pass_dir = tmp / f"{dataset}-{topk}"
                # the first pass of a dataset encodes its questions (the sweep does so once per dataset)
                for stage in ("index",) if topk == 3 else ("index", "query_vectors"):
                    shutil.copytree(cache_dir / stage, pass_dir / stage)
                cfg = compose("config", overrides=[f"dataset={dataset}", f"retrieval.topk={topk}",
                                                   f"cache.dir={pass_dir}"])
                components, cache = build(cfg)
                start = time.perf_counter()
                Pipeline(components, cache=cache).run()
                elapsed = time.perf_counter() - start
                total += elapsed
                print(f"  {dataset} topk={topk}: retrieve/generate/judge pass {elapsed:.2f}s")
    shutil.rmtree(tmp, ignore_errors=True)
    return total


def commands_alone(folder: Path) -> float:
    """Seconds of the same work run as separate commands: each dataset's first job cold (ingest), then
    each job on its own with only the corpus and query vectors cached (its retrieve/generate/judge pass)."""
    total = 0.0
    for dataset in ("locomo", "qasper"):
        base = folder / f"alone-{dataset}"
        base.mkdir()
        wall, _, _ = command([f"dataset={dataset}", "retrieval.topk=3"], base)
        total += wall
        print(f"  {dataset}: first job cold, as its own command: {wall:.1f}s")
        for topk in (5, 10):
            run_dir = folder / f"alone-{dataset}-{topk}"
            (run_dir / "cache").mkdir(parents=True)
            for stage in ("index", "query_vectors"):
                shutil.copytree(base / "cache" / stage, run_dir / "cache" / stage)
            wall, _, _ = command([f"dataset={dataset}", f"retrieval.topk={topk}"], run_dir)
            total += wall
            print(f"  {dataset} topk={topk}: as its own command, vectors cached: {wall:.1f}s")
    return total


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    folder = Path(tempfile.mkdtemp(prefix="bench-sweep-run-"))
    print(f"design-card sweep in {folder}")
    cold, cold_peak, err = command(SWEEP, folder)
    jobs = len(re.findall(r"ragbench job", err)) or 6
    print(f"cold sweep: {cold:.1f}s wall, peak RSS {cold_peak} MiB ({jobs} jobs)")
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{folder}/mlruns/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("ragbench").experiment_id],
                              filter_string="tags.`ragbench.role` = 'job'")
    embedding = [r.data.params["dataset.name"] for r in runs if r.data.metrics.get("ingest/embedded_texts", 0) > 0]
    print(f"jobs that embedded texts: {len(embedding)} ({', '.join(sorted(embedding))})")
    print("work timed alone:")
    alone = work_alone()
    print(f"work alone total: {alone:.1f}s")
    print(f"RATIO cold sweep / work alone (in-process, no start-up costs) = {cold / alone:.3f} (target <= 1.2)")
    print("the same jobs as separate commands:")
    separate = commands_alone(folder)
    print(f"RATIO cold sweep / separate commands = {cold / separate:.3f}")
    warm, _, err = command(SWEEP, folder, probe=True)
    imported = re.search(r"IMPORTED (.*)", err)
    print(f"warm rerun (resume): {warm:.1f}s; heavy imports: {imported.group(1) if imported else '?'}")
    print(f"RATIO warm / cold = {warm / cold:.3f} (target <= 0.15)")
    warm2, _, err = command([*SWEEP, "resume=false"], folder, probe=True)
    imported = re.search(r"IMPORTED (.*)", err)
    print(f"warm rerun (resume=false, all stages cached): {warm2:.1f}s; heavy imports: "
          f"{imported.group(1) if imported else '?'}")
    print(f"RATIO warm(resume=false) / cold = {warm2 / cold:.3f}")
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
