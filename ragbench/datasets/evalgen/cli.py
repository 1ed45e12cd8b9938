"""``python -m ragbench.datasets generate key=value ...``: compose the config like a job, build the corpus
and its chunk tree, run the generation, write the set and print what was kept and dropped."""

from __future__ import annotations

import logging
import sys
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbench import __version__, offline
from ragbench.cache.replies import reply_store
from ragbench.datasets.base import FileReader, fingerprint
from ragbench.datasets.custom import CustomAdapter
from ragbench.datasets.evalgen.dedup import Deduplicator
from ragbench.datasets.evalgen.journal import Journal, check_share, write_set
from ragbench.datasets.evalgen.plan import plan
from ragbench.datasets.evalgen.prompts import load_generation_prompts
from ragbench.datasets.evalgen.runner import RunResult, Settings, SlotWorker, drop_fix, run
from ragbench.errors import ConfigError, RagbenchError
from ragbench.llm.endpoint import SETTINGS, LLMEndpoint
from ragbench.llm.local import local_model

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from ragbench.llm.client import LLMClient
    from ragbench.types import Document

log = logging.getLogger("ragbench.generate")
CONF_ROOT = Path(__file__).resolve().parents[2] / "conf"
LLM_TARGET = "ragbench.generate.llm.LLMGenerator"
LOCAL_TARGET = "ragbench.generate.local.LocalGenerator"  # llm=local: a model ragbench runs itself


def compose(overrides: list[str]) -> DictConfig:
    """The ``generate`` config (the job config plus generation keys) with command-line overrides."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        with initialize_config_dir(config_dir=str(CONF_ROOT), version_base="1.3"):
            return hydra_compose(config_name="generate", overrides=overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip() and not ln.strip().startswith(
            ("To append", "full_key", "object_type", "reference_type"))]  # "+key" would be ignored here
        lines = lines[:lines.index("Config search path:")] if "Config search path:" in lines else lines
        text = lines[0] + (f"; {lines[1]} {', '.join(lines[2:])}".rstrip() if len(lines) > 1 else "")
        raise ConfigError(text + "\n  fix: see the keys of conf/generate.yaml and the options of each config "
                          "group (`python -m ragbench.datasets generate --help`)") from None


def documents(cfg: DictConfig) -> tuple[list[Document], str, dict[str, int], dict[str, str]]:
    """(documents, fingerprint of their bytes, skip counters, how they were read) of the ``dataset=custom``
    corpus; ``inspect`` reads the folder again the same way."""
    from hydra.utils import instantiate

    adapter = instantiate(cfg.dataset)
    if not isinstance(adapter, CustomAdapter):
        raise ConfigError(f"generate reads your own documents, not dataset={cfg.dataset.name}\n  fix: run with "
                          "dataset=custom dataset.path=/folder/of/your/documents")
    reader = FileReader(dataset=adapter.name, root=adapter.root())
    stats: dict[str, int] = defaultdict(int)
    docs, _ = adapter._documents(reader, stats)  # noqa: SLF001 - the adapter's own reading of the folder
    read = {"dataset_path": str(reader.root.resolve()), "docs_dir": adapter.docs_dir,
            "text_encoding": adapter.text_encoding,
            "documents_folder": str((reader.root / adapter.docs_dir).resolve())}
    return docs, fingerprint(reader.digests(), {}), dict(stats), read


def client(node: Any, *, role: str, overrides: dict[str, Any] | None = None) -> LLMClient:
    """The LLMClient of an ``llm``-style node's ``LLMEndpoint`` (the same keys, retries, cache and key
    handling as jobs), with ``overrides`` (the critic's) over it; ``llm=local``: the local client, which
    also takes the node's local keys (device, dtype...)."""
    settings = {k: node[k] for k in node if k in SETTINGS}
    settings.update(overrides or {})
    local: dict[str, Any] = {}
    if node.get("_target_") == LOCAL_TARGET:
        local = {k: node[k] for k in node if k not in SETTINGS and k not in ("_target_", "prompt", "dataset")}
        settings["model"] = local_model(settings.get("model"))  # the critic's too (critic.model: ${llm.model})
    return LLMEndpoint.of(role, None, settings, max_tokens=None).client(**local)


def _progress() -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("generate: kept {task.fields[kept]}, ${task.fields[cost]:.4f}"), BarColumn(),
                   MofNCompleteColumn(),
                   TimeRemainingColumn(), disable=not sys.stderr.isatty(), transient=True)
    state: dict[str, Any] = {"task": None, "last": -1}

    def tick(done: int, total: int, kept: int, cost: float) -> None:
        if state["task"] is None:
            bar.start()
            state["task"] = bar.add_task("generate", total=total, kept=kept, cost=cost)
        bar.update(state["task"], completed=done, kept=kept, cost=cost)
        if not sys.stderr.isatty() and (done == total or done - state["last"] >= max(total // 10, 1)):
            log.info("generate: %d/%d slots, %d kept, $%.4f so far", done, total, kept, cost)
            state["last"] = done

    tick.stop = bar.stop  # type: ignore[attr-defined]
    return tick


def summary(result: RunResult, *, planned: Counter[str], cost: float, files: list[Path], skipped: dict[str, int]) -> None:
    """Kept / dropped by reason / per type, and the cost so far, as rich tables on stdout."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    kept = Counter(o.question_type for o in result.kept)
    tried = Counter(o.question_type for o in result.outcomes)
    table = Table(title=f"generated: {len(result.kept)} kept of {len(result.outcomes)} tried")
    for col in ("type", "planned", "tried", "kept"):
        table.add_column(col, justify="left" if col == "type" else "right")
    for t in sorted(planned):
        table.add_row(t, str(planned[t]), str(tried[t]), str(kept[t]))
    console.print(table)
    dropped = Table(title="dropped, by reason")
    dropped.add_column("reason")
    dropped.add_column("items", justify="right")
    for reason, count in result.dropped().most_common():
        dropped.add_row(reason, str(count))
    console.print(dropped)
    for key, value in skipped.items():
        if value:
            console.print(f"documents skipped ({key}): {value}")
    console.print(f"cost so far: ${cost:.4f} (fresh calls; cached replies cost nothing again)")
    for f in files:
        console.print(f"wrote {f}")


def cmd_generate(overrides: list[str]) -> int:
    """Runs a generation; returns the exit code."""
    from hydra.utils import instantiate

    offline.set_defaults()

    cfg = compose(overrides)
    if cfg.llm.get("_target_") not in (LLM_TARGET, LOCAL_TARGET):
        raise ConfigError(f"llm={cfg.llm.get('model')} is not an LLM; writing questions needs one\n  fix: add "
                          "llm=openai (or llm=openai_compatible llm.api_base=..., llm=anthropic, llm=ollama)")
    n = int(cfg.n)
    if n < 1:
        raise ConfigError(f"n must be >= 1, got {n}")
    if not 1 <= int(cfg.critic.threshold) <= 5:
        raise ConfigError(f"critic.threshold={cfg.critic.threshold} is not valid: the critic scores 1-5\n  fix: "
                          "give 1 (keep everything it can parse) to 5 (only perfect scores); the default is 3")
    split = float(cfg.split) if cfg.split is not None else None
    if split is not None:
        check_share(split)  # now, not after the money is spent
    docs, doc_fp, skipped, read = documents(cfg)
    folder = read["documents_folder"]
    chunker = instantiate(cfg.chunker)
    tree = chunker.chunk(docs)
    prompts = load_generation_prompts(str(cfg.prompt))
    weights = {str(k): float(v) for k, v in cfg.types.items()}
    attempts = int(cfg.max_attempts) if cfg.max_attempts is not None else 2 * n
    slots = plan(tree, n=attempts, weights=weights, seed=int(cfg.seed), min_words=int(cfg.min_words))
    if not slots:
        raise ConfigError(f"no paragraph in {folder} has {cfg.min_words} words or more\n  fix: add longer "
                          "documents, or lower min_words")
    critic_cfg = cfg.critic
    llm = cfg.llm
    with reply_store(instantiate(cfg.cache)):  # replies and API embeddings are cached in the job cache
        embedder = instantiate(cfg.embedder) if cfg.dedup.method == "embedder" else None
        gen_client = client(llm, role="llm")
        critic_client = client(llm, role="critic", overrides={
            k: critic_cfg[k] for k in ("model", "api_base", "api_key_env", "temperature", "max_tokens")})
    dedup = Deduplicator(method=str(cfg.dedup.method), threshold=float(cfg.dedup.threshold),
                         embed=embedder.embed_queries if embedder is not None else None)
    if critic_cfg.model == llm.model:
        log.warning("the critic is the generator's model (%s): a model grading its own questions is lenient; "
                    "set critic.model (and critic.api_key_env) to another one", llm.model)
    identity = {
        "documents": doc_fp, "chunker": dict(chunker.params()), "prompt": prompts.sha256, "seed": int(cfg.seed),
        "n": n, "attempts": attempts, "types": weights, "min_words": int(cfg.min_words),
        "generator": {"model": llm.model, "temperature": llm.temperature, "max_tokens": llm.max_tokens},
        "critic": {"model": critic_cfg.model, "temperature": critic_cfg.temperature,
                   "max_tokens": critic_cfg.max_tokens, "threshold": int(critic_cfg.threshold),
                   "related": int(critic_cfg.related)},
        "dedup": {"method": str(cfg.dedup.method), "threshold": float(cfg.dedup.threshold),
                  "embedder": embedder.identity if embedder is not None else None},
        "parse_retries": int(cfg.parse_retries),
    }
    out = Path(str(cfg.out)).expanduser()
    journal = Journal(out, identity, force=bool(cfg.force))
    if journal.done:
        log.info("resuming: %d of %d slots already done in %s", len(journal.done), len(slots), journal.path)
    settings = Settings(n=n, threshold=int(critic_cfg.threshold), parse_retries=int(cfg.parse_retries),
                        max_concurrency=gen_client.follow_slots(), related=int(critic_cfg.related))
    worker = SlotWorker(tree=tree, prompts=prompts, generator=gen_client, critic=critic_client, settings=settings)
    tick = _progress()
    try:
        result = run(slots, worker, journal, dedup, settings, progress=tick)
    except KeyboardInterrupt:
        log.warning("interrupted: %d slots are journaled in %s; run the same command to continue",
                    len(journal.done), journal.path)
        return 130
    finally:
        tick.stop()
    samples = [dict(o.item) for o in result.kept if o.item is not None][:n]
    metadata = {
        "format": "easyrag-evaluation-set", "generated_by": f"ragbench {__version__}",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "provenance": {**identity, "prompt_file": prompts.path, "prompt_hash": prompts.hash,
                       **read, "documents_count": len(docs)},
        "counts": {"kept": len(samples), "tried": len(result.outcomes), "dropped": dict(result.dropped()),
                   "by_type": dict(Counter(s["question_type"] for s in samples)),
                   "by_difficulty": dict(Counter(s["difficulty"] for s in samples))},
        "cost_usd": round(result.cost_usd(), 6),
    }
    dropped = result.dropped()
    if not samples:  # nothing to resume either: the drops would only repeat, and a fix changes the settings
        journal.finish()
        summary(result, planned=Counter(s.question_type for s in slots), cost=result.cost_usd(), files=[],
                skipped=skipped)
        raise RagbenchError(no_samples(dropped, tried=len(result.outcomes) + sum(result.llm_errors.values()),
                                       out=out))
    files = write_set(out, samples, metadata, test_share=split, seed=int(cfg.seed))
    if not result.llm_errors:
        journal.finish()
    else:
        log.warning("%d calls failed (%s); run the same command again to retry them",
                    sum(result.llm_errors.values()), ", ".join(result.llm_errors))
    summary(result, planned=Counter(s.question_type for s in slots), cost=result.cost_usd(), files=files,
            skipped=skipped)
    if len(samples) < n:
        reason = dropped.most_common(1)[0][0] if dropped else None
        log.warning("kept %d of n=%d: raise max_attempts for more%s", len(samples), n,
                    f"; most drops were {reason}: {drop_fix(reason)}" if reason else "")
    return 0


def no_samples(dropped: Counter[str], *, tried: int, out: Path) -> str:
    """The one-line failure of a run that kept nothing: the dominant drop reason and its fix."""
    if not dropped:
        return f"generate kept no question and tried none; nothing written to {out}; fix: raise max_attempts"
    reason, count = dropped.most_common(1)[0]
    return (f"generate kept no question: {count} of {tried} tried were dropped as {reason}; nothing written to "
            f"{out}; fix: {drop_fix(reason)}")
