"""The embedder's backends against torch on the LoCoMo sample: encode speed and every retrieval metric.

    python benchmarks/bench_backend.py [--repeats 5] [--path /data/locomo] [--backends onnx,onnx-qint8,openvino]
    python benchmarks/bench_backend.py --metrics-only --backends auto \
        --datasets locomo,qasper,syllabusqa,financebench,multihop_rag

Speed: in one process, each backend's model is loaded (and exported, once, into a temporary cache) first;
then every distinct chunk text of the sample is encoded by each backend in turn, the order rotating each
repeat, ``--repeats`` times (the machine is shared: alternating repeats, medians reported). Printed: the
median wall and CPU seconds per backend and the ratio torch / backend (> 1: faster than torch).

Metrics: per backend one real sweep ``python -m ragbench -m dataset=locomo retrieval=dense,hybrid
retrieval.topk=3,5,10 stages=retrieval embedder.backend=...`` (cold cache, fresh MLflow store); printed is
the largest absolute difference of every ``retrieval/*`` metric of its six jobs against torch's, and how
many are exactly equal. ``--datasets``: that sweep on each bundled sample (``--metrics-only``: no timing);
``auto`` is ``embedder.backend=auto`` (the default).
Needs the onnx extra (``pip install -e '.[onnx]'``); openvino backends need the openvino extra.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SWEEP = ["dataset=locomo", "retrieval=dense,hybrid", "retrieval.topk=3,5,10", "stages=retrieval",
         "embedder.show_progress=false"]


def overrides(backend: str) -> list[str]:
    """'onnx-qint8' -> embedder.backend=onnx embedder.quantize=true."""
    name, _, q = backend.partition("-")
    return [f"embedder.backend={name}", f"embedder.quantize={'true' if q else 'false'}"]


def sample_texts(path: str | None) -> tuple[list[str], list[str]]:
    """The distinct searchable chunk texts and the distinct question texts of the LoCoMo sample (or the folder
    at ``path``)."""
    from hydra import compose, initialize_config_module

    from ragbench.build import build

    extra = [f"dataset.path={path}"] if path else []
    with initialize_config_module(config_module="ragbench.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=["dataset=locomo", *extra])
    c, _ = build(cfg)
    evalset = c.dataset.load()
    chunks = c.chunker.chunk(evalset.documents).searchable()
    return list(dict.fromkeys(ch.text for ch in chunks)), list(dict.fromkeys(q.text for q in evalset.queries))


def texts_of_sample(path: str | None) -> list[str]:
    """The distinct searchable chunk texts (``sample_texts``)."""
    return sample_texts(path)[0]


def speed(backends: list[str], texts: list[str], repeats: int) -> dict[str, tuple[float, float]]:
    from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder

    embedders = {}
    for b in backends:
        name, _, q = b.partition("-")
        e = SentenceTransformerEmbedder(backend=name, quantize=bool(q), show_progress=False)
        start = time.perf_counter()
        e.embed_documents(texts[:8])  # load (and export, the first time) outside the timing
        print(f"{b}: loaded{' and exported' if name != 'torch' else ''} in {time.perf_counter() - start:.1f} s",
              flush=True)
        embedders[b] = e
    times: dict[str, list[tuple[float, float]]] = {b: [] for b in backends}
    for r in range(repeats):
        order = backends[r % len(backends):] + backends[: r % len(backends)]
        for b in order:
            # the shared model slot holds one model: reload outside the timing when the previous was another
            embedders[b]._st = None
            embedders[b].load()
            w, c = time.perf_counter(), time.process_time()
            embedders[b].embed_documents(texts)
            times[b].append((time.perf_counter() - w, time.process_time() - c))
        print(f"repeat {r + 1}: " + ", ".join(f"{b} {times[b][-1][0]:.1f} s" for b in backends), flush=True)
    return {b: (statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts)) for b, ts in times.items()}


def sweep_metrics(backend: str, path: str | None, env: dict[str, str],
                  dataset: str = "locomo") -> dict[str, dict[str, float]]:
    import mlflow

    with tempfile.TemporaryDirectory() as tmp:
        sweep = [f"dataset={dataset}" if a == "dataset=locomo" else a for a in SWEEP]
        # a cold stage cache per sweep; the exports stay in the benchmark's download cache (made once)
        cmd = [sys.executable, "-m", "ragbench", "-m", *sweep, *overrides(backend),
               f"cache.dir={os.path.join(tmp, 'cache')}", *([f"dataset.path={path}"] if path else [])]
        subprocess.run(cmd, cwd=tmp, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{os.path.join(tmp, 'mlruns', 'mlflow.db')}")
        out = {}
        for exp in client.search_experiments():
            for run in client.search_runs([exp.experiment_id]):
                p = run.data.params
                job = f"{p.get('retrieval.retriever._target_', '').rsplit('.', 1)[-1]}/k={p.get('retrieval.topk')}"
                name = run.data.tags.get("ragbench.dataset", dataset)
                out[f"{name}/{job}"] = {m: v for m, v in run.data.metrics.items() if m.startswith("retrieval/")}
        return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5, help="alternating encode repeats (median reported)")
    p.add_argument("--path", default=None, help="a full LoCoMo folder (dataset.path); default: the bundled sample")
    p.add_argument("--backends", default=None, help="comma-separated; default: onnx, onnx-qint8 and, when "
                   "installed, openvino, openvino-qint8")
    p.add_argument("--no-metrics", action="store_true", help="speed only (no sweeps)")
    p.add_argument("--metrics-only", action="store_true", help="the sweeps only (no timing)")
    p.add_argument("--datasets", default="locomo", help="comma-separated datasets of the metric sweeps")
    args = p.parse_args()
    if importlib.util.find_spec("onnxruntime") is None:
        print("needs the onnx extra: pip install -e '.[onnx]'", file=sys.stderr)
        return 2
    backends = args.backends.split(",") if args.backends else (
        ["onnx", "onnx-qint8"] + (["openvino", "openvino-qint8"] if importlib.util.find_spec("openvino") else []))
    backends = ["torch", *[b for b in backends if b != "torch"]]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MLFLOW_DISABLE_TELEMETRY": "true",
           "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    with tempfile.TemporaryDirectory() as cache:
        os.environ["RAGBENCH_CACHE"] = cache  # the exports of this benchmark only
        env["RAGBENCH_CACHE"] = cache
        if not args.metrics_only:
            texts = texts_of_sample(args.path)
            print(f"{len(texts):,} distinct chunk texts; {args.repeats} alternating repeats", flush=True)
            medians = speed(backends, texts, args.repeats)
            tw, tc = medians["torch"]
            for b in backends:
                w, c = medians[b]
                print(f"{b:>15}: median {w:.2f} s wall, {c:.2f} s CPU; speed vs torch: wall x{tw / w:.2f}, "
                      f"CPU x{tc / c:.2f}")
        if args.no_metrics:
            return 0
        sweeps: dict[str, dict[str, dict[str, float]]] = {b: {} for b in backends}
        for b in backends:  # one sweep per backend over every dataset (dataset=a,b,c)
            sweeps[b].update(sweep_metrics(b, args.path, env, args.datasets))
    ref = sweeps["torch"]
    keys = sorted({key for m in ref.values() for key in m})
    for b in backends[1:]:
        # per metric: the largest absolute difference over the jobs (dense and hybrid at k = 3, 5, 10)
        worst = {key: max(abs(m[key] - sweeps[b][job][key]) for job, m in ref.items() if key in m) for key in keys}
        equal3 = sum(round(v, 3) == round(sweeps[b][job][key], 3) for job, m in ref.items() for key, v in m.items())
        exact = sum(v == sweeps[b][job].get(key) for job, m in ref.items() for key, v in m.items())
        n = sum(len(m) for m in ref.values())
        print(f"{b}: {len(ref)} jobs ({args.datasets}), {n} retrieval metric values, {exact}/{n} exactly equal, "
              f"{equal3}/{n} equal to 3 decimals; largest difference per metric:")
        print("  " + "; ".join(f"{key.removeprefix('retrieval/')} {d:.4f}" for key, d in worst.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
