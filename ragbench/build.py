"""A job's components built from its config: every one picked by its Hydra ``_target_``, nothing heavy
loaded (models load on first use). Used by a job (``ragbench.app``), the bill of a sweep (``ragbench.plan``)
and the preview of a dataset (``ragbench.preview``)."""

from __future__ import annotations

from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ragbench.cache.replies import reply_store
from ragbench.cache.store import StageCache
from ragbench.components import Components
from ragbench.config_check import check_config
from ragbench.errors import ConfigError, RagbenchError
from ragbench.generate.history import history_policy
from ragbench.judge.build import build_judges
from ragbench.judge.scorers import CONFIG_KEY as SCORERS_KEY
from ragbench.judge.scorers import build_scorers
from ragbench.query.options import query_options
from ragbench.repeats import repeat_policy
from ragbench.retrieval.batch import DEFAULT_SEARCH_DEPTH
from ragbench.scopes import check_scope, declared_scope
from ragbench.stages import builds_llm


def instantiate_node(node: Any, **kwargs: Any) -> Any:
    """``hydra.utils.instantiate`` that surfaces a component's own RagbenchError, not Hydra's wrapper."""
    try:
        return instantiate(node, **kwargs)
    except RagbenchError:
        raise
    except Exception as exc:
        cause = exc.__cause__
        if isinstance(cause, RagbenchError):
            raise cause from None
        raise ConfigError(f"cannot build a component from the config: {exc}") from exc


def build(cfg: DictConfig) -> tuple[Components, StageCache]:
    """Instantiates every component named by ``_target_``; nothing heavy loads here."""
    check_config(cfg)  # unknown group keys, out-of-range numbers: before MLflow or any model
    cache = instantiate_node(cfg.cache)
    with reply_store(cache):  # LLM clients built here keep their replies in the job's store
        return _components(cfg), cache


def _components(cfg: DictConfig) -> Components:
    rr = cfg.reranker
    llm = builds_llm(cfg)  # stages=retrieval: no generator, no judge (ragbench.stages)
    dataset = instantiate_node(cfg.dataset)
    # the protocol is the dataset's: a retrieval config without `scope` (a user's minimal one) searches as
    # the adapter declares, never silently the whole corpus
    scope = cfg.retrieval.get("scope") or declared_scope(dataset, f"dataset._target_={cfg.dataset.get('_target_')}")
    return Components(
        dataset=dataset,
        chunker=instantiate_node(cfg.chunker),
        embedder=instantiate_node(cfg.embedder) if cfg.get("embedder") else None,
        retriever=instantiate_node(cfg.retrieval.retriever),
        topk=int(cfg.retrieval.topk),
        rerankers=[instantiate_node(node) for node in (rr.get("rerankers") or {}).values()],
        candidates=int(rr.get("candidates") or 0),
        expander=instantiate_node(cfg.expander),
        generator=instantiate_node(cfg.llm) if llm else None,
        judges=build_judges(cfg.judge, instantiate_node) if llm else {},
        scope=check_scope(str(scope)),
        search_depth=int(cfg.retrieval.get("search_depth") or DEFAULT_SEARCH_DEPTH),
        parent_vectors=str(cfg.retrieval.get("parent_vectors") or "none"),
        retrieval_scorers=build_scorers(OmegaConf.select(cfg, SCORERS_KEY, default=None), instantiate_node),
        history=history_policy(cfg.get("generate")),  # conversations: the generator's history
        repeats=repeat_policy(OmegaConf.to_container(node) if isinstance(node := cfg.get("repeats"), DictConfig)
                              else node),  # repeats=N (ragbench.repeats)
        **query_options(cfg, instantiate_node),
    )
